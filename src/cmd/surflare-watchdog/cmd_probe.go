package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"surflare-watchdog/src/config"
	"surflare-watchdog/src/control"
	"surflare-watchdog/src/daemon"
	"surflare-watchdog/src/nodeprobe"
	"surflare-watchdog/src/progress"
)

// probePoll is how often the CLI asks the daemon for the probe's progress.
const probePoll = 250 * time.Millisecond

func init() {
	register(&command{
		name:    "probe",
		summary: "measure nodes one by one (L4/L7 latency, exit, SYN/RST/SACK, relays, urltest)",
		run: func(ctx context.Context, args []string) int {
			return runProbe(ctx, args, os.Stdout, os.Stderr)
		},
	})
}

// runProbe is `surflare-watchdog probe [NODE…] [--json] [--config F]`.
// With a daemon running, the daemon probes (supervision paused, kill
// switch armed, the original node restored) and this polls its progress;
// without one, the vendor CLI is driven directly.
func runProbe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	cfgPath := fs.String("config", config.DefaultPath, "UCI `file` with the candidates, probe targets and run dir")
	runDir := fs.String("run-dir", "", "the daemon's run `dir` (default: paths.run_dir of --config)")
	asJSON := fs.Bool("json", false, "print the results as JSON (progress goes to stderr)")
	const synopsis = "probe [NODE…] [--json] [--config FILE] [--run-dir DIR]"
	if code, ok := parseFlagsOrUsage(fs, args, synopsis, stdout, stderr); !ok {
		return code
	}
	nodes := fs.Args()
	// One line per step; on a terminal the step in progress updates in place.
	progressOut := progress.Auto(stdout)
	if *asJSON {
		progressOut = progress.Auto(stderr)
	}
	defer progressOut.Done()
	if *runDir == "" {
		*runDir = runDirFromConfig(*cfgPath, stderr)
	}
	sock := control.SocketPath(*runDir)

	resp, err := control.Call(ctx, sock, daemon.ProbeRequest(nodes))
	var rep nodeprobe.Report
	switch {
	case errors.Is(err, control.ErrNotRunning):
		fmt.Fprintf(stderr, "surflare-watchdog probe: no daemon answers on %s: driving the vendor CLI directly (nothing of ours guards the LAN meanwhile)\n", sock)
		var code int
		if rep, code = probeDirect(ctx, *cfgPath, nodes, progressOut, stderr); code != exitOK {
			return code
		}
	case ctx.Err() != nil:
		return exitInterrupted
	case err != nil:
		fmt.Fprintf(stderr, "surflare-watchdog probe: %v\n", err)
		return exitFailure
	case !resp.OK:
		fmt.Fprintf(stderr, "surflare-watchdog probe: %v\n", resp.Err())
		return exitFailure
	default:
		var code int
		if rep, code = followProbe(ctx, sock, progressOut, stderr); code != exitOK {
			return code
		}
	}
	progressOut.Done()
	return printProbe(rep, *asJSON, stdout, stderr)
}

// followProbe polls the daemon's probe (nodeprobe.Follow) and maps the
// outcome to an exit code.
func followProbe(ctx context.Context, sock string, progress, stderr io.Writer) (nodeprobe.Report, int) {
	status := func(ctx context.Context) (nodeprobe.JobStatus, error) {
		var st nodeprobe.JobStatus
		resp, err := control.Call(ctx, sock, control.Request{Cmd: daemon.CmdProbeStatus})
		if err == nil && !resp.OK {
			err = resp.Err()
		}
		if err == nil {
			err = json.Unmarshal(resp.Data, &st)
		}
		return st, err
	}
	rep, err := nodeprobe.Follow(ctx, status, probePoll, progress, func(msg string) {
		fmt.Fprintf(stderr, "surflare-watchdog probe: %s\n", msg)
	})
	switch {
	case err == nil:
		return rep, exitOK
	case ctx.Err() != nil:
		fmt.Fprintln(stderr, "surflare-watchdog probe: interrupted; the daemon finishes the probe and restores the node itself")
		return rep, exitInterrupted
	}
	fmt.Fprintf(stderr, "surflare-watchdog probe: %v\n", err)
	return rep, exitFailure
}

// probeDirect probes without a daemon (daemon.ProbeWithoutDaemon) and
// maps the outcome to an exit code.
func probeDirect(ctx context.Context, cfgPath string, nodes []string, progress, stderr io.Writer) (nodeprobe.Report, int) {
	c, _, err := config.Load(cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "surflare-watchdog probe: %v\n", err)
		return nodeprobe.Report{}, exitFailure
	}
	rep, err := daemon.ProbeWithoutDaemon(ctx, c, nodes, progress, func(err error) {
		fmt.Fprintf(stderr, "surflare-watchdog probe: %v\n", err)
	})
	switch {
	case err == nil:
		return rep, exitOK
	case errors.Is(err, daemon.ErrProbeArgs):
		fmt.Fprintf(stderr, "surflare-watchdog probe: %v\n", err)
		return rep, exitUsage
	case ctx.Err() != nil:
		return rep, exitInterrupted
	}
	fmt.Fprintf(stderr, "surflare-watchdog probe: %v\n", err)
	return rep, exitFailure
}

// printProbe prints the report as a table or as JSON.
func printProbe(rep nodeprobe.Report, asJSON bool, stdout, stderr io.Writer) int {
	if err := rep.Write(stdout, asJSON); err != nil {
		fmt.Fprintf(stderr, "surflare-watchdog probe: %v\n", err)
		return exitFailure
	}
	return exitOK
}
