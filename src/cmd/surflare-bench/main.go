// Command surflare-bench is `make bench`: the detection, recovery, leak,
// false-rotation and footprint benchmark of the watchdog on the lab, ours
// against the seed design's parameters (package bench). It writes
// results.md, results.json and latency.svg to --out and prints the table.
//
//	surflare-bench --out bench/out            # full run (long)
//	surflare-bench --out bench/out --quick    # CI / a quick look
//
// Missed targets are findings, not failures: the exit code is 0 when the
// benchmark ran, 1 when it could not (2 for bad flags).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"surflare-watchdog/src/bench"
	"surflare-watchdog/src/lab"
)

const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("surflare-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quick := fs.Bool("quick", false, "the short version (CI): 1 run per scenario and urltest cadence, 1 min soak, 1 min steady state")
	out := fs.String("out", "bench/out", "output directory for results.md, results.json, latency.svg")
	// Every figure has a flag; 0 / "" keeps the mode's default.
	runs := fs.Int("runs", 0, "runs per latency scenario (and urltest cadence) with our parameters (default 10, quick 1)")
	baseRuns := fs.Int("baseline-runs", 0, "runs per scenario with the baseline (default 10, quick 1)")
	deadRuns := fs.Int("dead-runs", 0, "runs of the dead-nodes scenario per side (default 5, quick 1)")
	scenarios := fs.String("scenarios", "", "comma-separated latency scenarios (default: "+strings.Join(bench.LatencyScenarios, ",")+")")
	baseScen := fs.String("baseline-scenarios", "", "comma-separated scenarios also run with the baseline (default all; quick: node-down)")
	soak := fs.Duration("soak", 0, "false-rotation run on the lossy path, with bulk traffic (default 30m, quick 1m)")
	loss := fs.Int("loss", 0, "loss on the lossy path, percent (default 10)")
	jitter := fs.Int("jitter", 0, "jitter on the lossy path, ms (default 300)")
	steady := fs.Duration("steady", 0, "footprint window in steady state (default 10m, quick 1m)")
	warmup := fs.Duration("warmup", 0, "settle time before the footprint window (default 30s, quick 10s)")
	binPath := fs.String("bin", "", "the release binary to size (default build/x86_64/surflare-watchdog, from make build)")
	ipk := fs.String("ipk", "", "glob of the x86_64 ipk to size (default build/ipk/surflare-watchdog_*_x86_64.ipk, from make ipk)")
	chaos := fs.Duration("chaos", 0, "each side's chaos run (default 30m, quick 3m)")
	chaosSeed := fs.Uint64("chaos-seed", 0, "seed of the chaos faults, the same for both sides (default 1)")
	parallel := fs.Int("parallel", 0, "labs at once (default 2, quick 5); each measurement has its own lab")
	cads := fs.String("cadences", "", "comma-separated urltest cadences (s) the cadence scenarios ("+strings.Join(bench.CadenceScenarios, ",")+") run at (default "+joinInts(bench.URLTestCadences)+")")
	baseCads := fs.String("baseline-cadences", "", "comma-separated urltest cadences (s) the baseline runs them at (default all; quick: 30)")
	probeURL := fs.String("footprint-probe-url", bench.FootprintProbeURL, "our footprint window's storm503.probe_url (https as shipped; the lab's http://"+lab.Search.String()+"/generate_204 to compare)")
	skip := fs.String("skip", "", "comma-separated parts to leave out: "+strings.Join(bench.Parts, ","))
	var vendor []string
	fs.Func("vendor", fmt.Sprintf("knob of the lab's fake vendor client, KEY=VALUE (repeatable; default %s — e.g. --vendor urltest_interval=30)",
		bench.URLTestCadence(bench.DefaultURLTestS)), func(v string) error { vendor = append(vendor, v); return nil })
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: surflare-bench [--quick] [--out DIR] [flags]   (as root)\n\n"+
			"Runs the watchdog's benchmark on the lab and writes results.md, results.json and\n"+
			"latency.svg to DIR; prints the table. Flags:\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "surflare-bench: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	o := bench.DefaultOptions(*quick)
	bench.FootprintProbeURL = *probeURL
	setInt(&o.Runs, *runs)
	setInt(&o.BaselineRuns, *baseRuns)
	setInt(&o.DeadNodeRuns, *deadRuns)
	setInt(&o.LossPct, *loss)
	setInt(&o.Parallel, *parallel)
	setInt(&o.JitterMS, *jitter)
	setDur(&o.Soak, *soak)
	setDur(&o.Steady, *steady)
	setDur(&o.SteadyWarmup, *warmup)
	setDur(&o.Chaos, *chaos)
	if *chaosSeed != 0 {
		o.ChaosSeed = *chaosSeed
	}
	if *binPath != "" {
		o.BinaryPath = *binPath
	}
	if *ipk != "" {
		o.IPKGlob = *ipk
	}
	if *scenarios != "" {
		o.Scenarios = split(*scenarios)
	}
	if *baseScen != "" {
		o.BaselineScenarios = split(*baseScen)
	}
	for _, c := range []struct {
		flag string
		dst  *[]int
	}{{*cads, &o.Cadences}, {*baseCads, &o.BaselineCadences}} {
		if c.flag == "" {
			continue
		}
		*c.dst = nil
		for _, f := range split(c.flag) {
			n, err := strconv.Atoi(f)
			if err != nil || n < 1 {
				fmt.Fprintf(stderr, "surflare-bench: cadence %q: want whole seconds >= 1\n", f)
				return exitUsage
			}
			*c.dst = append(*c.dst, n)
		}
	}
	if len(vendor) > 0 {
		// The defaults first, so a knob given here replaces its default.
		o.Vendor = append(o.Vendor, vendor...)
		if err := lab.CheckVendor(o.Vendor); err != nil {
			fmt.Fprintf(stderr, "surflare-bench: %v\n", err)
			return exitUsage
		}
	}
	for _, p := range split(*skip) {
		if !contains(bench.Parts, p) {
			fmt.Fprintf(stderr, "surflare-bench: --skip %q: not a part (%s)\n", p, strings.Join(bench.Parts, ", "))
			return exitUsage
		}
		o.Skip = append(o.Skip, p)
	}
	if o.LossPct < 0 || o.LossPct > 100 || o.JitterMS < 0 || o.Runs < 1 || o.BaselineRuns < 1 || o.DeadNodeRuns < 1 {
		fmt.Fprintln(stderr, "surflare-bench: runs must be >= 1, loss 0..100, jitter >= 0")
		return exitUsage
	}
	o.Progress = stderr

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r, err := bench.Measure(ctx, o)
	if r == nil {
		fmt.Fprintf(stderr, "surflare-bench: %v\n", err)
		return exitFailure
	}
	if err != nil {
		r.Missing = append(r.Missing, "interrupted: "+err.Error())
	}
	if werr := bench.WriteOutputs(*out, r); werr != nil {
		fmt.Fprintf(stderr, "surflare-bench: %v\n", werr)
		return exitFailure
	}
	fmt.Fprintln(stdout)
	if werr := bench.WriteMarkdown(stdout, r); werr != nil {
		return exitFailure
	}
	fmt.Fprintf(stderr, "surflare-bench: wrote %s/{%s,%s,%s} in %s\n", *out, bench.FileMarkdown, bench.FileJSON, bench.FileSVG,
		time.Duration(float64(r.ElapsedS)*float64(time.Second)).Round(time.Second))
	if err != nil {
		return exitFailure
	}
	return exitOK
}

func setInt(dst *int, v int) {
	if v != 0 {
		*dst = v
	}
}

func setDur(dst *time.Duration, v time.Duration) {
	if v != 0 {
		*dst = v
	}
}

func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}
