// Command surflare-lab runs the simulated Surflare world (package lab):
// network namespaces with LAN clients, a router and an "internet" of relays,
// exits, probe targets and the account API. It brings labs up and down,
// injects faults into a running lab, runs the selftest and the demo, and
// serves the internet side inside the internet namespace.
//
// Every subcommand lives in its own cmd_*.go file and registers itself.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"surflare-watchdog/src/lab/fakes"
	"syscall"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

type command struct {
	name    string
	args    string
	summary string
	hidden  bool
	run     func(ctx context.Context, args []string) int
}

var commands = map[string]*command{}

func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("duplicate subcommand " + c.name)
	}
	commands[c.name] = c
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "Usage: surflare-lab COMMAND [ARGS]   (as root)\n\nCommands:\n")
	names := make([]string, 0, len(commands))
	for n, c := range commands {
		if !c.hidden {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		c := commands[n]
		fmt.Fprintf(w, "  %-36s %s\n", strings.TrimSpace(n+" "+c.args), c.summary)
	}
	fmt.Fprintf(w, "\nRun 'surflare-lab COMMAND --help' for a command's flags.\n")
}

func main() {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	os.Exit(dispatch(os.Args[1:]))
}

func dispatch(args []string) int {
	if len(args) == 0 {
		usage(os.Stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "--help", "help":
		usage(os.Stdout)
		return exitOK
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "surflare-lab: unknown command %q\n\n", args[0])
		usage(os.Stderr)
		return exitUsage
	}
	// SIGINT/SIGTERM cancel the context; every command tears down what it
	// made when its context ends.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return c.run(ctx, args[1:])
}

// needRoot prints why and returns false when not root.
func needRoot(cmd string) bool {
	if os.Geteuid() != 0 {
		fmt.Fprintf(os.Stderr, "surflare-lab %s: needs root (it creates network namespaces)\n", cmd)
		return false
	}
	return true
}

// parseExit is the exit code for a flag parse error: 0 for --help (the
// usage was printed, as asked), 2 otherwise.
func parseExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitUsage
}

// setFlags collects repeatable --set surflare.SECTION.OPTION=VALUE.
type setFlags []string

func (s *setFlags) String() string     { return strings.Join(*s, " ") }
func (s *setFlags) Set(v string) error { *s = append(*s, v); return nil }

// vendorFlag registers the repeatable --vendor KEY=VALUE flag on fs.
func vendorFlag(fs *flag.FlagSet) *setFlags {
	var v setFlags
	var keys []string
	for _, k := range fakes.Knobs {
		keys = append(keys, k.Key)
	}
	fs.Var(&v, "vendor", "knob of the fake vendor client, KEY=VALUE (repeatable; keys: "+strings.Join(keys, ", ")+"; see src/lab/fakes/README.md)")
	return &v
}
