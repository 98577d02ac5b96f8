// Command surflare-watchdog supervises the Surflare VPN on OpenWrt routers and
// Linux laptops. This file holds only the subcommand dispatch: each subcommand
// lives in its own cmd_*.go file and registers itself in init, so features can
// be added without touching a shared switch.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"syscall"

	"surflare-watchdog/src/config"
	"surflare-watchdog/src/suggest"
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
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

// dispatch runs the subcommand args[0] names; stdout and stderr are for
// the dispatcher's own messages (the subcommands write to os.Stdout/Stderr).
func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "--help", "help":
		usage(stdout)
		return exitOK
	case "-v", "--version":
		args[0] = "version"
	}
	c, ok := commands[args[0]]
	if !ok {
		hint := suggest.DidYouMean(args[0], slices.Sorted(maps.Keys(commands)), 2)
		fmt.Fprintf(stderr, "surflare-watchdog: unknown command %q%s\n\n", args[0], hint)
		usage(stderr)
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
	hint := suggest.DidYouMean(args[0], slices.Sorted(maps.Keys(subs)), 2)
	fmt.Fprintf(stderr, "surflare-watchdog %s: unknown subcommand %q%s\n\n%s", name, args[0], hint, usage)
	return exitUsage
}

// parseFlagsOrUsage parses a subcommand's flags, which may come before,
// between or after its positional arguments (rotate "Los Angeles" --json);
// "--" ends the flags. fs.Args() are the positional arguments afterwards.
// A flag that does not exist is answered with the closest that does.
// --help prints the usage once, to stdout (code exitOK); a bad flag prints the problem and the
// usage to stderr (code exitUsage); ok is false when the caller should
// return code. (The flag package's own Usage would also print the flags to
// stderr, so --help showed them twice.)
func parseFlagsOrUsage(fs *flag.FlagSet, args []string, synopsis string, stdout, stderr io.Writer) (code int, ok bool) {
	fs.SetOutput(io.Discard)
	var pos []string
	err := fs.Parse(args)
	for err == nil && fs.NArg() > 0 {
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos, args = append(pos, rest[0]), rest[1:]
		err = fs.Parse(args)
	}
	if err == nil {
		fs.Parse(append([]string{"--"}, pos...)) // sets fs.Args(), keeps the flags' values
	}
	switch {
	case errors.Is(err, flag.ErrHelp):
		writeUsage(stdout, fs, synopsis)
		return exitOK, false
	case err != nil:
		msg := err.Error()
		if typed, found := strings.CutPrefix(msg, "flag provided but not defined: -"); found {
			var names []string
			fs.VisitAll(func(f *flag.Flag) { names = append(names, "--"+f.Name) })
			typed = strings.TrimLeft(typed, "-")
			msg = "unknown flag --" + typed + suggest.DidYouMean(typed, names, 2)
		}
		fmt.Fprintf(stderr, "surflare-watchdog %s: %s\n", fs.Name(), msg)
		writeUsage(stderr, fs, synopsis)
		return exitUsage, false
	}
	return 0, true
}

// writeUsage writes "Usage: surflare-watchdog SYNOPSIS", the note for the
// subcommand (flagUsageNotes) and its flags, if it has any.
func writeUsage(w io.Writer, fs *flag.FlagSet, synopsis string) {
	fmt.Fprintf(w, "Usage: surflare-watchdog %s\n", synopsis)
	if note := flagUsageNotes[fs.Name()]; note != "" {
		fmt.Fprintf(w, "\n%s\n", note)
	}
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprint(w, "\nFlags:\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
}

// parseFlags is parseFlagsOrUsage with the synopsis "NAME [flags]" and no
// positional arguments. Every subcommand takes --config, so a script can
// pass the same flags to each: those that do not read the config accept
// it and say so in their help.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (int, bool) {
	if fs.Lookup("config") == nil {
		fs.String("config", config.DefaultPath, "the UCI `file` (accepted like everywhere; this subcommand does not read it)")
	}
	synopsis := fs.Name()
	fs.VisitAll(func(*flag.Flag) { synopsis = fs.Name() + " [flags]" })
	if code, ok := parseFlagsOrUsage(fs, args, synopsis, stdout, stderr); !ok {
		return code, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "surflare-watchdog %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return exitUsage, false
	}
	return exitOK, true
}
