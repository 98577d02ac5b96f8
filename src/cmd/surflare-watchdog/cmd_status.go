package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"surflare-watchdog/src/config"
	"surflare-watchdog/src/control"
	"surflare-watchdog/src/statusview"
)

// daemonCommand is a subcommand that only forwards a request to the running
// daemon over its control socket.
type daemonCommand struct {
	name, summary string
	args          string // synopsis of the positional arguments
	// request builds the request from the positional arguments; an error
	// is a usage error.
	request func(args []string) (control.Request, error)
}

var daemonCommands = []daemonCommand{
	{name: "status", summary: "why, state, node, exit, WAN, login, last check and nodes (--verbose: every field)",
		request: noArgs(control.CmdStatus)},
	{name: "check", summary: "run a health check now and show its result",
		request: noArgs(control.CmdCheck)},
	{name: "rotate", summary: "switch to NODE, or to the next candidate", args: "[NODE]",
		request: func(args []string) (control.Request, error) {
			switch len(args) {
			case 0:
				return control.Request{Cmd: control.CmdRotate}, nil
			case 1:
				return control.Request{Cmd: control.CmdRotate, Args: map[string]any{"node": args[0]}}, nil
			}
			return control.Request{}, errors.New(`one node at most (quote names with spaces: rotate "Los Angeles")`)
		}},
	{name: "reconnect", summary: "reconnect to the current node",
		request: noArgs(control.CmdReconnect)},
	{name: "diag", summary: "diagnostic mode on (tables stay, the loop idles) or off", args: "on|off",
		request: func(args []string) (control.Request, error) {
			if len(args) == 1 && (args[0] == "on" || args[0] == "off") {
				return control.Request{Cmd: control.CmdDiag, Args: map[string]any{"on": args[0] == "on"}}, nil
			}
			return control.Request{}, errors.New("say on or off")
		}},
}

func noArgs(cmd string) func([]string) (control.Request, error) {
	return func(args []string) (control.Request, error) {
		if len(args) > 0 {
			return control.Request{}, fmt.Errorf("unexpected argument %q", args[0])
		}
		return control.Request{Cmd: cmd}, nil
	}
}

func init() {
	for _, d := range daemonCommands {
		register(&command{
			name:    d.name,
			summary: d.summary,
			run: func(ctx context.Context, args []string) int {
				return d.run(ctx, args, os.Stdout, os.Stderr)
			},
		})
	}
}

func (d daemonCommand) run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(d.name, flag.ContinueOnError)
	cfgPath := fs.String("config", config.DefaultPath, "UCI `file` whose paths.run_dir locates the daemon")
	runDir := fs.String("run-dir", "", "the daemon's run `dir` (default: paths.run_dir of --config)")
	asJSON := fs.Bool("json", false, "print the daemon's answer as JSON")
	verbose := fs.Bool("verbose", false, "print every field of the daemon's answer")
	synopsis := strings.TrimSpace(d.name + " [--json|--verbose] [--run-dir DIR] [--config FILE] " + d.args)
	if code, ok := parseFlagsOrUsage(fs, args, synopsis, stdout, stderr); !ok {
		return code
	}
	req, err := d.request(fs.Args())
	if err != nil {
		fmt.Fprintf(stderr, "surflare-watchdog %s: %v\nUsage: surflare-watchdog %s\n", d.name, err, synopsis)
		return exitUsage
	}
	if *runDir == "" {
		*runDir = runDirFromConfig(*cfgPath, stderr)
	}
	sock := control.SocketPath(*runDir)
	resp, err := control.Call(ctx, sock, control.WithWait(req)) // an action answers with its outcome
	switch {
	case errors.Is(err, control.ErrNotRunning):
		fmt.Fprintf(stderr, "surflare-watchdog: daemon not running (no control socket at %s)\n", sock)
		return exitNoDaemon
	case ctx.Err() != nil:
		return exitInterrupted
	case err != nil:
		fmt.Fprintf(stderr, "surflare-watchdog %s: %v\n", d.name, err)
		return exitFailure
	case !resp.OK:
		resp.Write(stdout, *asJSON)
		fmt.Fprintf(stderr, "surflare-watchdog %s: %v\n", d.name, resp.Err())
		return exitFailure
	}
	if resp.Message != "" && !*asJSON && !*verbose {
		fmt.Fprintln(stdout, resp.Message) // an action's outcome: "rotated to Chicago in 2.1 s"
		return exitOK
	}
	d.printAnswer(stdout, resp.Data, *asJSON, *verbose)
	return exitOK
}

// printAnswer shows the daemon's answer: as it came with --json, every
// field with --verbose, else the compact view (status with its node
// table; the actions, which answer with the status they leave, without).
func (d daemonCommand) printAnswer(stdout io.Writer, data json.RawMessage, asJSON, verbose bool) {
	switch {
	case asJSON:
		control.WriteJSON(stdout, data)
	case len(data) == 0:
		fmt.Fprintln(stdout, "ok")
	case verbose:
		control.WriteText(stdout, data)
	default:
		statusview.Write(stdout, data, time.Now(), statusview.Options{Nodes: d.name == "status"})
	}
}

// runDirFromConfig is paths.run_dir of the config file, or the default when
// the file is absent (a laptop without UCI) or broken (the daemon keeps its
// last good config, which most likely still has the default run dir).
func runDirFromConfig(path string, stderr io.Writer) string {
	c, _, err := config.Load(path)
	if err == nil {
		return c.Paths.RunDir
	}
	def := config.Default().Paths.RunDir
	if !errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(stderr, "surflare-watchdog: warning: %s does not load (run 'surflare-watchdog config check'); looking for the daemon in %s\n", path, def)
	}
	return def
}
