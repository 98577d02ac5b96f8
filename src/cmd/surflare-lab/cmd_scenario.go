package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"surflare-watchdog/src/lab"
)

func init() {
	register(&command{
		name:    "scenario",
		args:    "NAME [--runs N] [--json] [--set S.O=V]",
		summary: "inject a fault into a lab running the daemon and measure detection, recovery and leaks",
		run:     runScenario,
	})
}

func runScenario(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("scenario", flag.ContinueOnError)
	runs := fs.Int("runs", 1, "how many runs, each in a fresh lab")
	asJSON := fs.Bool("json", false, "print one JSON object (scenario, runs, summary) instead of a table")
	verbose := fs.Bool("v", false, "log lab progress to stderr")
	openwrt := fs.Bool("openwrt", false, openwrtUsage)
	var sets setFlags
	fs.Var(&sets, "set", "daemon config override surflare.SECTION.OPTION=VALUE (repeatable; applied after the scenario's own)")
	vendor := vendorFlag(fs)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: surflare-lab scenario NAME [--runs N] [--json] [--set surflare.S.O=V]... [--vendor KEY=VALUE]...\n\n")
		fmt.Fprintf(w, "Each run brings up a fresh lab, starts the daemon with short intervals, waits until it\n")
		fmt.Fprintf(w, "is healthy, injects the fault and measures detect_s, recover_s, nodes tried and leaked\n")
		fmt.Fprintf(w, "packets. Scenarios:\n")
		for _, s := range lab.Scenarios() {
			fmt.Fprintf(w, "  %-27s %s\n", s.Name, s.Summary)
		}
		fmt.Fprintf(w, "\nFlags:\n")
		fs.PrintDefaults()
	}
	// Flags may follow the name: surflare-lab scenario node-down --runs 3.
	name, rest := "", args
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, rest = args[0], args[1:]
	}
	if err := fs.Parse(rest); err != nil {
		return parseExit(err)
	}
	if name == "" && fs.NArg() > 0 {
		name = fs.Arg(0)
	} else if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "surflare-lab scenario: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if name == "" {
		fmt.Fprintf(os.Stderr, "surflare-lab scenario: which scenario?\n\n")
		fs.Usage()
		return exitUsage
	}
	if *runs < 1 {
		fmt.Fprintf(os.Stderr, "surflare-lab scenario: --runs %d: want at least 1\n", *runs)
		return exitUsage
	}
	if err := lab.CheckScenario(name, sets); err != nil {
		fmt.Fprintf(os.Stderr, "surflare-lab scenario: %v\n", err)
		return exitUsage
	}
	if err := lab.CheckVendor(*vendor); err != nil {
		fmt.Fprintf(os.Stderr, "surflare-lab scenario: %v\n", err)
		return exitUsage
	}
	if !needRoot("scenario") {
		return exitFailure
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if *verbose {
		logger = slog.Default()
	}
	o := lab.ScenarioOptions{Runs: *runs, Set: sets, Vendor: *vendor, Log: logger, Progress: os.Stderr, OpenWrt: openwrtOption(*openwrt)}
	res, err := lab.RunScenario(ctx, name, o)
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "surflare-lab scenario %s: %v\n", name, err)
		if len(res.Runs) == 0 {
			return exitFailure
		}
	}
	if *asJSON {
		err = res.WriteJSON(os.Stdout)
	} else {
		err = res.WriteTable(os.Stdout)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "surflare-lab scenario: %v\n", err)
		return exitFailure
	}
	for _, r := range res.Runs {
		if r.Error != "" {
			return exitFailure
		}
	}
	return exitOK
}
