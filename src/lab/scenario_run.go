package lab

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

// ScenarioSpec is one named scenario.
type ScenarioSpec struct {
	Name    string
	Summary string
	// Sets are config overrides the scenario needs on top of
	// ScenarioBaseSets; the user's own --set come after both.
	Sets []string
	// Vendor are knobs for the fakes (fakes.Knobs) the scenario needs;
	// ScenarioOptions.Vendor come after them.
	Vendor []string
	// Budget bounds one run (lab up and daemon start excluded); 0 = 90 s.
	Budget time.Duration
	// Run carries out one run: the daemon is healthy and the monitor is
	// sampling when it is called; it injects the fault, marks dead nodes,
	// waits for what it expects and returns. The runner measures
	// everything else.
	Run func(ctx context.Context, h *Harness) error
	// Standalone, when set instead of Run, carries out one run entirely by
	// itself in a lab it brings up with o (dns-leak: several phases, each
	// reported as a run).
	Standalone func(ctx context.Context, o Options) ([]ScenarioRun, error)
}

var (
	scenarioMu sync.Mutex
	scenarios  = map[string]ScenarioSpec{}
)

// RegisterScenario adds a scenario (from an init function); a second
// registration of a name panics, as it is a programming error.
func RegisterScenario(s ScenarioSpec) {
	scenarioMu.Lock()
	defer scenarioMu.Unlock()
	if _, dup := scenarios[s.Name]; dup {
		panic("lab: duplicate scenario " + s.Name)
	}
	scenarios[s.Name] = s
}

// Scenarios lists every registered scenario, by name.
func Scenarios() []ScenarioSpec {
	scenarioMu.Lock()
	defer scenarioMu.Unlock()
	out := make([]ScenarioSpec, 0, len(scenarios))
	for _, s := range scenarios {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// LookupScenario finds a scenario by name.
func LookupScenario(name string) (ScenarioSpec, error) {
	scenarioMu.Lock()
	defer scenarioMu.Unlock()
	s, ok := scenarios[name]
	if !ok {
		var names []string
		for n := range scenarios {
			names = append(names, n)
		}
		sort.Strings(names)
		return ScenarioSpec{}, fmt.Errorf("%w %q (scenarios: %s)", errNoScenario, name, strings.Join(names, ", "))
	}
	return s, nil
}

// ScenarioBaseSets shorten the daemon's intervals so a fault is noticed
// and handled in seconds, keeping the seed's proportions: checks every
// 2 s (30 s), every 1 s after a failure (10 s), two failed checks before a
// rotation (4), 10 s storm cooldown and rate-limit window (600 s each),
// 5 s to prove a new tunnel's data plane (60 s). The probe timeout keeps
// its default (5 s): it is about the network's latency, not the cadence,
// and a shorter one would call a slow but working path dead.
var ScenarioBaseSets = []string{
	"surflare.main.check_interval=2",
	"surflare.main.degraded_interval=1",
	"surflare.main.fail_threshold=2",
	"surflare.main.storm_cooldown=10",
	"surflare.main.reconnect_window=10",
	"surflare.main.connect_local_timeout=5",
	"surflare.main.connect_dataplane_timeout=5",
	"surflare.main.heartbeat_interval=0",
}

// ScenarioOptions shape RunScenario.
type ScenarioOptions struct {
	// Runs is how many times the scenario runs, each in a fresh lab; 0 = 1.
	Runs int
	// Set holds extra surflare.SECTION.OPTION=VALUE overrides, applied
	// last. A section the lab config lacks (loopguard, auth, …) is added
	// with its own name.
	Set []string
	// Vendor holds knobs for the fakes (fakes.Knobs, KEY=VALUE), applied
	// after the scenario's own.
	Vendor []string
	// BinDir holds prebuilt lab binaries (see Build); empty = build once
	// into a temporary directory.
	BinDir string
	// RepoRoot is the module to build from (empty = found from the working
	// directory).
	RepoRoot string
	// Log receives lab progress; nil = slog.Default.
	Log *slog.Logger
	// Progress, if set, gets one line per finished run.
	Progress io.Writer
	// OpenWrt runs each run's lab with real OpenWrt as its router (see
	// Options.OpenWrt); nil = the lab's own router.
	OpenWrt *OpenWrt
}

// RunScenario runs scenario name o.Runs times, each in a fresh lab (so no
// fault, login state or kernel table outlives its run), and returns the
// figures with their summary. A run that could not be carried out is
// kept with its Error set; the error returned is only for a bad name,
// bad --set or a failed build.
func RunScenario(ctx context.Context, name string, o ScenarioOptions) (ScenarioResult, error) {
	if err := CheckScenario(name, o.Set); err != nil {
		return ScenarioResult{}, err
	}
	spec, _ := LookupScenario(name)
	sets := scenarioSets(spec, o.Set)
	if o.BinDir == "" {
		dir, err := os.MkdirTemp("", "surflare-scenario-bin-")
		if err != nil {
			return ScenarioResult{}, err
		}
		defer removeAll(dir)
		root := o.RepoRoot
		if root == "" {
			wd, _ := os.Getwd()
			if root, err = FindRepoRoot(wd); err != nil {
				return ScenarioResult{}, err
			}
		}
		if err := Build(ctx, root, dir); err != nil {
			return ScenarioResult{}, err
		}
		o.BinDir = dir
	}
	res := ScenarioResult{Scenario: name, Runs: []ScenarioRun{}}
	for range max(o.Runs, 1) {
		if ctx.Err() != nil {
			break
		}
		var runs []ScenarioRun
		if spec.Standalone != nil {
			rs, err := spec.Standalone(ctx, labOptionsFor(o, spec, sets))
			if err != nil {
				rs = append(rs, ScenarioRun{NodesTried: []string{}, States: []string{}, Error: err.Error()})
			}
			runs = rs
		} else {
			runs = []ScenarioRun{runScenarioOnce(ctx, spec, o, sets)}
		}
		for _, run := range runs {
			res.Runs = append(res.Runs, run)
			if o.Progress == nil {
				continue
			}
			fmt.Fprintf(o.Progress, "%s run %d: detect %s recover %s leaks %d nodes [%s] %s\n", name, len(res.Runs),
				fmtSecs(run.DetectS), fmtSecs(run.RecoverS), run.LeakedPackets, strings.Join(run.NodesTried, ", "),
				firstNonEmpty(run.Error, run.Outcome))
		}
	}
	res.Summarize()
	return res, ctx.Err()
}

// scenarioSets is the override list for spec: base, the scenario's own,
// the user's; each section they name that the lab config lacks is added
// first (`surflare.loopguard=loopguard`), as `uci set` would need.
func scenarioSets(spec ScenarioSpec, user []string) []string {
	all := append(append(append([]string(nil), ScenarioBaseSets...), spec.Sets...), user...)
	have := map[string]bool{}
	for _, sec := range labConfig(&Lab{Dir: os.TempDir()}) {
		have[sec.name] = true
	}
	var out []string
	for _, s := range all {
		path, _, _ := strings.Cut(s, "=")
		parts := strings.Split(path, ".")
		if len(parts) == 3 && parts[0] == "surflare" && parts[1] != "" && !have[parts[1]] {
			have[parts[1]] = true
			out = append(out, "surflare."+parts[1]+"="+parts[1])
		}
		out = append(out, s)
	}
	return out
}

// CheckScenario reports a bad scenario name or override before anything
// is built (the CLI's usage errors).
func CheckScenario(name string, set []string) error {
	spec, err := LookupScenario(name)
	if err != nil {
		return err
	}
	return checkSets(scenarioSets(spec, set))
}

// checkSets validates the overrides before any lab is built.
func checkSets(sets []string) error {
	f := labConfig(&Lab{Dir: os.TempDir()})
	for _, s := range sets {
		if err := f.set(s); err != nil {
			return err
		}
	}
	return nil
}

// runScenarioOnce is one run in a fresh lab.
func runScenarioOnce(ctx context.Context, spec ScenarioSpec, o ScenarioOptions, sets []string) (run ScenarioRun) {
	budget := spec.Budget
	if budget == 0 {
		budget = 90 * time.Second
	}
	l, err := Up(ctx, labOptionsFor(o, spec, sets))
	if err != nil {
		return ScenarioRun{NodesTried: []string{}, States: []string{}, Error: "lab up: " + err.Error()}
	}
	defer l.Close()
	h := &Harness{Lab: l, Sets: sets, log: l.log, deadFrom: map[string][]deadSpan{}, extra: map[string]any{}}
	defer func() {
		if h.stopMon != nil {
			h.stopMon()
		}
		if l.DaemonRunning() {
			sctx, cancel := context.WithTimeout(context.Background(), DaemonStopGrace+time.Second)
			defer cancel()
			if _, err := l.StopDaemon(sctx); err != nil && run.Error == "" {
				run.Error = "stopping the daemon: " + err.Error()
			}
		}
	}()
	if err := h.begin(ctx); err != nil {
		r := h.finish(ctx)
		r.Error = err.Error()
		return r
	}
	rctx, cancel := context.WithTimeout(ctx, budget)
	runErr := spec.Run(rctx, h)
	cancel()
	run = h.finish(ctx)
	if runErr != nil && run.Error == "" {
		run.Error = runErr.Error()
	}
	return run
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}
