package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"surflare-watchdog/src/lab"
)

func init() {
	register(&command{
		name: "fault", args: "[--lab PREFIX] NAME on|off [ARG]...",
		summary: "switch a fault on or off in a running lab",
		run:     runFault,
	})
}

func faultHelp(w *os.File) {
	fmt.Fprintln(w, "Usage: surflare-lab fault [--lab PREFIX] NAME on|off [ARG]...\n\nFaults:")
	for _, f := range lab.Faults {
		fmt.Fprintf(w, "  %-34s %s\n", strings.TrimSpace(f.Name+" on|off "+f.Args), f.Summary)
	}
	fmt.Fprintln(w, "\nNode names ignore case, spaces and dashes (los-angeles = Los Angeles).")
}

func runFault(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("fault", flag.ContinueOnError)
	prefix := fs.String("lab", "", "lab prefix (default: the only running lab)")
	fs.Usage = func() { faultHelp(os.Stderr); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	rest := fs.Args()
	if len(rest) < 2 || (rest[1] != "on" && rest[1] != "off") {
		faultHelp(os.Stderr)
		return exitUsage
	}
	if !needRoot("fault") {
		return exitFailure
	}
	l, err := lab.Attach(*prefix)
	if err != nil {
		fmt.Fprintf(os.Stderr, "surflare-lab fault: %v\n", err)
		return exitFailure
	}
	defer l.Close()
	if err := l.Fault(ctx, rest[0], rest[1] == "on", rest[2:]...); err != nil {
		fmt.Fprintf(os.Stderr, "surflare-lab fault: %v\n", err)
		return exitFailure
	}
	log := l.FaultLog()
	if n := len(log); n > 0 {
		ev := log[n-1]
		fmt.Printf("%s %s %s %s %s\n", ev.Time.Format("15:04:05.000"), l.Prefix, ev.Name, onOff(ev.On), ev.Detail)
	}
	return exitOK
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}
