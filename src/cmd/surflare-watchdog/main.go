// Command surflare-watchdog supervises the Surflare VPN on OpenWrt routers and
// Linux laptops. This file holds only the subcommand dispatch: each subcommand
// lives in its own cmd_*.go file and registers itself in init, so features can
// be added without touching a shared switch.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// Exit codes shared by every subcommand.
const (
	exitOK          = 0
	exitFailure     = 1 // the command ran and failed
	exitUsage       = 2 // bad flags or arguments
	exitNoDaemon    = 3 // the command needs the running daemon and it is not there
	exitInterrupted = 130
)

// command is one subcommand. run receives the arguments after the subcommand
// name and returns the process exit code.
type command struct {
	name    string
	summary string
	hidden  bool
	run     func(ctx context.Context, args []string) int
}

var commands = map[string]*command{}

// register adds a subcommand; called from init in each cmd_*.go file.
func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("duplicate subcommand " + c.name)
	}
	commands[c.name] = c
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "Usage: surflare-watchdog COMMAND [ARGS]\n\nCommands:\n")
	names := make([]string, 0, len(commands))
	for n, c := range commands {
		if !c.hidden {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, commands[n].summary)
	}
	fmt.Fprintf(w, "\nRun 'surflare-watchdog COMMAND --help' for a command's flags.\n")
}

func main() {
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
	case "-v", "--version":
		args[0] = "version"
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "surflare-watchdog: unknown command %q\n\n", args[0])
		usage(os.Stderr)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return c.run(ctx, args[1:])
}

// subcommands runs the subcommand args[0] names from subs with the rest of
// args; no subcommand or an unknown one prints usage to stderr (exit 2),
// help prints it to stdout. name is the command's words ("firewall trace").
func subcommands(name, usage string, args []string, stdout, stderr io.Writer, subs map[string]func(args []string) int) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	if run, ok := subs[args[0]]; ok {
		return run(args[1:])
	}
	fmt.Fprintf(stderr, "surflare-watchdog %s: unknown subcommand %q\n\n%s", name, args[0], usage)
	return exitUsage
}
