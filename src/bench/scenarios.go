package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"surflare-watchdog/src/lab"
)

// runScenario runs a registered lab scenario runs times with p's overrides
// through the lab's scenario runner (each run in a fresh lab) and converts
// the result. Runs the runner could not carry out keep their Error.
func runScenario(ctx context.Context, env labEnv, name string, p Params, runs int, progress io.Writer) *Measured {
	m := &Measured{}
	if _, err := lab.LookupScenario(name); err != nil {
		m.Error = "the lab's scenario runner has no such scenario: " + err.Error()
		return m
	}
	var pw io.Writer
	if progress != nil {
		pw = prefixWriter{w: progress, prefix: fmt.Sprintf("[%s] ", p.Variant)}
	}
	res, err := lab.RunScenario(ctx, name, lab.ScenarioOptions{
		Runs: runs, Set: p.Sets, Vendor: env.vendor, BinDir: env.binDir, Log: env.log, Progress: pw,
	})
	for _, r := range res.Runs {
		m.Runs = append(m.Runs, Run{
			DetectS: r.DetectS, RecoverS: r.RecoverS, NodesTried: r.NodesTried,
			DeadNodesTried: r.DeadNodesTried, LeakedPackets: int64(r.LeakedPackets),
			Outcome: r.Outcome, Error: r.Error,
		})
	}
	m.Summary = Summarize(m.Runs)
	var errs []string
	if err != nil {
		errs = append(errs, err.Error())
	}
	for i, r := range m.Runs {
		if r.Error != "" {
			errs = append(errs, fmt.Sprintf("run %d: %s", i+1, firstLine(r.Error)))
		}
	}
	m.Error = strings.Join(errs, "; ")
	return m
}

// prefixWriter prefixes each write (one progress line) with the variant.
type prefixWriter struct {
	w      io.Writer
	prefix string
}

func (p prefixWriter) Write(b []byte) (int, error) {
	if _, err := io.WriteString(p.w, p.prefix+string(b)); err != nil {
		return 0, err
	}
	return len(b), nil
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

// ScenarioDeadNodes is the benchmark's own scenario for "dead nodes tried
// before a healthy one": the next deadAhead candidates after the current
// node go down first and stay down for deadWarmup, long enough for log
// health to call them dead; then the current node goes down (T0). A
// watchdog that uses the urltest data goes straight to the first live
// candidate; one that does not tries each dead one first.
//
// Log health counts per NODE via TRANSIT and the rotation judges the
// transit in use ("auto"): one error per urltest round (the lab's 5 s), and
// a node is dead above the threshold (10), so it takes 11 rounds. An
// earlier 30 s warm-up (6 rounds) left the candidates below the threshold:
// the "with urltest data" side was then measured without it.
const ScenarioDeadNodes = "bench-dead-nodes"

const (
	deadAhead = 2
	// deadWarmup: threshold+1 rounds of the lab's urltest, plus one round
	// of margin for the proxy's round timing.
	deadWarmup = (deadThreshold + 2) * deadUrltestEvery
	// deadThreshold is config.Default's log health threshold (checked by a
	// test); deadUrltestEvery is the urltest cadence this part pins in its
	// labs (jobs.go).
	deadThreshold    = 10
	deadUrltestEvery = 5 * time.Second
	// deadBudget bounds one run: without log health every dead candidate
	// may cost a full connect_dataplane_timeout (60 s by default) and the
	// first failed one is retried once.
	deadBudget = 8 * time.Minute
)

func init() {
	lab.RegisterScenario(lab.ScenarioSpec{
		Name: ScenarioDeadNodes,
		Summary: fmt.Sprintf("the %d candidates after the current node are down for %s, then the current node goes down: count the dead nodes tried",
			deadAhead, deadWarmup),
		Budget: deadBudget,
		Run:    runDeadNodes,
	})
}

// deadNodesDescription says what ScenarioDeadNodes does, for the report.
func deadNodesDescription() string {
	return fmt.Sprintf("The %d candidates after the current node are made to refuse tunnels (node-down) %s before the current node fails the same way; every other node is healthy",
		deadAhead, deadWarmup)
}

func runDeadNodes(ctx context.Context, h *lab.Harness) error {
	cur := h.Node()
	ahead := candidatesAfter(cur, deadAhead)
	if len(ahead) < deadAhead {
		return fmt.Errorf("node %q: not enough lab candidates after it", cur)
	}
	for _, n := range ahead {
		if err := h.Lab.Fault(ctx, lab.FaultNodeDown, true, n); err != nil {
			return err
		}
		h.SetDead(n, true, time.Now())
	}
	h.Note("%s down %s before %s", strings.Join(ahead, ", "), deadWarmup, cur)
	if err := sleep(ctx, deadWarmup); err != nil {
		return err
	}
	at, err := h.Inject(ctx, lab.FaultNodeDown, true, cur)
	if err != nil {
		return err
	}
	h.SetDead(cur, true, at)
	remaining := deadBudget - deadWarmup - 10*time.Second
	if dl, ok := ctx.Deadline(); ok {
		remaining = time.Until(dl) - time.Second
	}
	if !h.WaitRecovered(ctx, remaining) {
		h.Note("no recovery within the budget")
	}
	return nil
}

// candidatesAfter returns the n lab nodes after cur in candidate order
// (the lab config lists lab.Nodes in order), wrapping around.
func candidatesAfter(cur string, n int) []string {
	i := slices.IndexFunc(lab.Nodes, func(x lab.Node) bool { return x.Name == cur })
	if i < 0 {
		return nil
	}
	var out []string
	for k := 1; k <= n && k < len(lab.Nodes); k++ {
		out = append(out, lab.Nodes[(i+k)%len(lab.Nodes)].Name)
	}
	return out
}

// quietLog is a logger for the labs the benchmark brings up: warnings and
// errors only, so progress lines stay readable.
func quietLog(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
