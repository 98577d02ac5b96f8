package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"surflare-watchdog/src/lab"
)

func init() {
	register(&command{
		name:    "chaos",
		args:    "--duration D --seed N [--json] [--openwrt]",
		summary: "the daemon under procd-like respawn, LAN traffic and random overlapping faults; checks every invariant",
		run:     runChaos,
	})
}

func runChaos(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	duration := fs.Duration("duration", 3*time.Minute, "how long faults are thrown (lab up and the first healthy tunnel excluded)")
	seed := fs.Uint64("seed", 1, "seed of the fault schedule: the same seed throws the same faults in the same order")
	budget := fs.Duration("budget", 60*time.Second, "recovery budget of one burst of faults (from its last fault's end to LAN traffic through an exit)")
	asJSON := fs.Bool("json", false, "print one JSON object instead of the table")
	verbose := fs.Bool("v", false, "log lab progress to stderr")
	openwrt := fs.Bool("openwrt", false, openwrtUsage+"; procd, fw4, netifd and logd run the daemon and take the faults (src/lab/chaos_box.go)")
	keepLog := fs.String("keep-log", "", "copy the daemon's whole log to this file before teardown (to read a broken invariant)")
	var sets setFlags
	fs.Var(&sets, "set", "daemon config override surflare.SECTION.OPTION=VALUE (repeatable; after the chaos run's own)")
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: surflare-lab chaos --duration D --seed N [--budget D] [--json] [--openwrt] [--keep-log FILE] [--set surflare.S.O=V]...\n\n")
		fmt.Fprintf(w, "Brings up a lab, runs the daemon under a supervisor with procd's respawn rules (threshold %s,\n", lab.ProcdRespawnThreshold)
		fmt.Fprintf(w, "timeout %s, retry %d), keeps LAN traffic going (HTTP, a kept-alive stream, DNS, UDP, IPv6) and\n", lab.ProcdRespawnTimeout, lab.ProcdRespawnRetry)
		fmt.Fprintf(w, "throws bursts of overlapping faults drawn from the whole catalogue. Checks leaks, recovery,\n")
		fmt.Fprintf(w, "exits, panics, fd/thread/RSS slopes, state files and teardown. Exit 0 only if all held.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "surflare-lab chaos: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if *duration <= 0 || *budget <= 0 {
		fmt.Fprintf(os.Stderr, "surflare-lab chaos: --duration and --budget must be positive\n")
		return exitUsage
	}
	if !needRoot("chaos") {
		return exitFailure
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if *verbose {
		logger = slog.Default()
	}
	o := lab.ChaosOptions{Duration: *duration, Seed: *seed, Budget: *budget, Log: logger, Progress: os.Stderr, OpenWrt: openwrtOption(*openwrt), KeepLog: *keepLog}
	if len(sets) > 0 {
		o.Sets = append(lab.ChaosSets(), sets...)
	}
	res, err := lab.RunChaos(ctx, o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "surflare-lab chaos: %v\n", err)
		return exitFailure
	}
	if ctx.Err() != nil {
		res.Notes = append(res.Notes, "interrupted: the figures cover the run up to the interrupt")
	}
	if *asJSON {
		err = res.WriteJSON(os.Stdout)
	} else {
		err = res.WriteTable(os.Stdout)
	}
	if err != nil || !res.OK() {
		return exitFailure
	}
	return exitOK
}
