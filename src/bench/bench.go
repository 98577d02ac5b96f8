package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"surflare-watchdog/src/lab"
)

// Parts of the benchmark, for Options.Skip.
const (
	PartScenarios = "scenarios"
	PartDeadNodes = "dead-nodes"
	PartLeaks     = "leaks"
	PartSoak      = "soak"
	PartFootprint = "footprint"
	PartChaos     = "chaos"
)

// Parts lists every part, in the order they run.
var Parts = []string{PartChaos, PartFootprint, PartSoak, PartLeaks, PartScenarios, PartDeadNodes}

// Options shape a benchmark run. DefaultOptions gives the full or quick
// run; every figure of it can be changed.
type Options struct {
	Quick bool
	// Runs per latency scenario with our parameters and with the baseline.
	Runs, BaselineRuns int
	// DeadNodeRuns per side (with and without urltest data).
	DeadNodeRuns int
	// Scenarios measured with ours; BaselineScenarios also with the
	// baseline (a subset in quick mode: the baseline's 30 s checks make
	// every run slow).
	Scenarios, BaselineScenarios []string
	// Cadences are the fake proxy's urltest intervals (s) every scenario
	// of CadenceScenarios runs at, one row each; BaselineCadences those
	// the baseline runs them at. Other scenarios run at the cadence of
	// Vendor only.
	Cadences, BaselineCadences []int
	// Soak is the false-rotation run's length on the lossy path.
	Soak              time.Duration
	LossPct, JitterMS int
	// SteadyWarmup and Steady are the footprint's settle time and window.
	SteadyWarmup, Steady time.Duration
	// Chaos is each side's chaos run (same ChaosSeed for both).
	Chaos     time.Duration
	ChaosSeed uint64
	// BinaryPath and IPKGlob locate `make ipk`'s outputs for the sizes.
	BinaryPath, IPKGlob string
	// RepoRoot is the module root (lab binaries are built from it; the
	// boot lock ruleset is read from it).
	RepoRoot string
	// Skip names parts not to run (see Parts).
	Skip []string
	// Parallel is how many labs run at once (each job brings up its own).
	Parallel int
	// Vendor are knobs for the lab's fake vendor client (fakes.Knobs,
	// KEY=VALUE) in every lab of the run; DefaultOptions sets the urltest
	// cadence (URLTestCadence), so a report always says which it used.
	Vendor []string
	// Progress receives one line per finished step; nil = discard.
	Progress io.Writer
	// Log receives the labs' warnings; nil = warnings to Progress.
	Log *slog.Logger
}

// DefaultOptions are the benchmark's figures (bench/README.md): at least 10 runs, every
// cadence scenario at 5, 30 and 180 s of urltest for both sides, 30 minutes
// of soak; quick: 1 run per scenario and cadence (the baseline on node down
// at 30 s only), 1 minute of soak, 1 minute of steady state.
func DefaultOptions(quick bool) Options {
	o := Options{
		Quick: quick, Runs: 10, BaselineRuns: 10, DeadNodeRuns: 5,
		Scenarios:         slices.Clone(LatencyScenarios),
		BaselineScenarios: slices.Clone(LatencyScenarios),
		Cadences:          slices.Clone(URLTestCadences),
		BaselineCadences:  slices.Clone(URLTestCadences),
		Soak:              30 * time.Minute, LossPct: 10, JitterMS: 300,
		SteadyWarmup: 30 * time.Second, Steady: 10 * time.Minute,
		Chaos: 30 * time.Minute, ChaosSeed: DefaultChaosSeed,
		Parallel:   2,
		Vendor:     []string{URLTestCadence(DefaultURLTestS)},
		BinaryPath: "build/x86_64/surflare-watchdog",
		IPKGlob:    "build/ipk/surflare-watchdog_*_x86_64.ipk",
	}
	if quick {
		o.Runs, o.BaselineRuns, o.DeadNodeRuns = 1, 1, 1
		o.BaselineScenarios = []string{ScenarioNodeDown}
		o.BaselineCadences = []int{30}
		o.Soak, o.SteadyWarmup, o.Steady = time.Minute, 10*time.Second, time.Minute
		o.Chaos = 3 * time.Minute
		o.Parallel = 5
	}
	return o
}

// DefaultURLTestS is the fake proxy's urltest cadence the benchmark runs
// at unless told otherwise (--vendor urltest_interval=S): the 5 s every
// earlier run used, so figures stay comparable and the quick run keeps its
// length. The lab's own default is 30 s; a figure fast only at 5 s is not
// fast on a real client (DESIGN §9), so runs at 30 and 180 s belong beside it.
const DefaultURLTestS = 5

// URLTestCadences are the cadences the cadence scenarios run at: the lab's
// old 5 s, a client that tests twice a minute, and stock sing-box's 3 min
// (DESIGN §9). A figure is fast only if it is fast at all three.
var URLTestCadences = []int{5, 30, 180}

// URLTestCadence is the vendor knob for a urltest cadence of s seconds.
func URLTestCadence(s int) string { return fmt.Sprintf("urltest_interval=%d", s) }

// cadenceOf is the urltest cadence a list of vendor knobs sets (the last
// urltest_interval wins, as in the lab), 0 if none does.
func cadenceOf(vendor []string) int {
	c := 0
	for _, k := range vendor {
		if v, ok := strings.CutPrefix(k, "urltest_interval="); ok {
			if n, err := strconv.Atoi(v); err == nil {
				c = n
			}
		}
	}
	return c
}

// fakeConnectRuns is how many fake connects are timed.
const fakeConnectRuns = 3

// Measure carries out the benchmark and returns its judged result. The error
// is for what stops the whole run (not root, no repo, build failure);
// a part that fails is recorded in the result (Missing) and the rest goes
// on.
func Measure(ctx context.Context, o Options) (*Result, error) {
	start := time.Now()
	if os.Geteuid() != 0 {
		return nil, errors.New("the benchmark needs root (it runs the lab: network namespaces, nftables)")
	}
	if o.Parallel < 1 {
		o.Parallel = 1
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Log == nil {
		o.Log = quietLog(o.Progress)
	}
	if o.RepoRoot == "" {
		wd, _ := os.Getwd()
		root, err := lab.FindRepoRoot(wd)
		if err != nil {
			return nil, err
		}
		o.RepoRoot = root
	}
	ours, err := OursParams()
	if err != nil {
		return nil, err
	}
	base := BaselineParams(ours)
	r := &Result{
		Date: start.UTC(), Quick: o.Quick, Parallel: o.Parallel, Vendor: o.Vendor, Ours: ours, Baseline: base,
		Machine:      DescribeMachine(ctx, o.RepoRoot),
		FakeConnectS: Num(math.NaN()),
		Sizes:        ReadSizes(abs(o.RepoRoot, o.BinaryPath), abs(o.RepoRoot, o.IPKGlob)),
	}
	binDir, err := os.MkdirTemp("", "surflare-bench-bin-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(binDir)
	progress(o, "building the lab binaries")
	if err := lab.Build(ctx, o.RepoRoot, binDir); err != nil {
		return nil, err
	}
	env := labEnv{binDir: binDir, log: o.Log, vendor: o.Vendor}

	jobs := plan(ctx, o, env, r, ours, base)
	progress(o, "%d jobs, at most %d labs at once", len(jobs), o.Parallel)
	runJobs(ctx, jobs, o.Parallel)
	sortByVariant(r)
	// Leak slots of jobs that never ran (interrupted) are dropped.
	r.Leaks = slices.DeleteFunc(r.Leaks, func(l LeakCheck) bool { return l.Name == "" })
	collectMissing(r, o)
	r.ElapsedS = elapsed(start)
	Judge(r)
	return r, ctx.Err()
}

// sortByVariant puts ours before baseline wherever phase 1 appended in
// completion order, so reports are stable.
func sortByVariant(r *Result) {
	rank := func(v Variant) int {
		if v == Ours {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(r.Footprint, func(a, b Footprint) int { return rank(a.Variant) - rank(b.Variant) })
	slices.SortStableFunc(r.Soak, func(a, b Soak) int { return rank(a.Variant) - rank(b.Variant) })
	slices.SortStableFunc(r.Chaos, func(a, b Chaos) int { return rank(a.Variant) - rank(b.Variant) })
}

// collectMissing lists every part that failed or was skipped.
func collectMissing(r *Result, o Options) {
	for _, part := range o.Skip {
		r.Missing = append(r.Missing, "skipped on request: "+part)
	}
	if r.Sizes.Error != "" {
		r.Missing = append(r.Missing, "sizes: "+r.Sizes.Error)
	}
	for _, f := range r.Footprint {
		if f.Error != "" {
			r.Missing = append(r.Missing, fmt.Sprintf("footprint (%s): %s", f.Variant, f.Error))
		}
	}
	for _, s := range r.Soak {
		if s.Error != "" {
			r.Missing = append(r.Missing, fmt.Sprintf("false rotations (%s): %s", s.Variant, s.Error))
		}
	}
	for _, c := range r.Chaos {
		if c.Error != "" {
			r.Missing = append(r.Missing, fmt.Sprintf("chaos (%s): %s", c.Variant, firstLine(c.Error)))
		}
	}
	for _, l := range r.Leaks {
		if l.Error != "" {
			r.Missing = append(r.Missing, fmt.Sprintf("leaks, %s (%s): %s", l.Name, l.Variant, firstLine(l.Error)))
		}
	}
	var noBaseline []string
	for _, row := range r.Scenarios {
		for _, side := range []struct {
			v Variant
			m *Measured
		}{{Ours, row.Ours}, {Baseline, row.Baseline}} {
			if side.m != nil && side.m.Error != "" {
				r.Missing = append(r.Missing, fmt.Sprintf("scenario %s (%s): %s", rowLabel(row), side.v, side.m.Error))
			}
		}
		if row.Baseline == nil && row.Ours != nil {
			noBaseline = append(noBaseline, rowLabel(row))
		}
	}
	if len(noBaseline) > 0 {
		r.Missing = append(r.Missing, "baseline not run in this mode: "+strings.Join(noBaseline, ", "))
	}
	if d := r.DeadNodes; d != nil {
		for _, m := range []*Measured{d.WithData, d.WithoutData} {
			if m != nil && m.Error != "" {
				r.Missing = append(r.Missing, "dead nodes: "+m.Error)
			}
		}
	}
}

func progress(o Options, format string, a ...any) {
	fmt.Fprintf(o.Progress, "%s bench: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, a...))
}

func abs(root, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(root, p)
}
