package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"surflare-watchdog/src/lab"
)

// The idle node-down scenario: the node in use dies while no LAN client
// uses the tunnel, so no failed connection can show it; only the daemon's
// idle probe (main.idle_probe_interval), its periodic check or the
// vendor's urltest can. The lab's scenario monitor keeps a LAN client
// busy every 100 ms, so this scenario brings up its own lab (a Standalone
// scenario) and watches the daemon's status only, which is no LAN traffic.
//
// The fault lands idleQuiet plus a random share of one more idleQuiet
// after the last LAN request, so the probe's phase differs from run to
// run. Detection is the first transition away from healthy after the
// fault; recovery is the first LAN request, made once the daemon is
// healthy again, that gets out through a live node (a household that
// picks up a phone after the node died): its end, after the fault.
const (
	// idleQuiet: longer than the shipped idle_probe_interval (10 s), so
	// the probe has seen the tunnel idle before the fault.
	idleQuiet = 12 * time.Second
	// idleDetectBudget: past a 30 s check and a 30 s urltest with room to
	// spare; a 180 s urltest alone would not fit, and that is the point.
	idleDetectBudget = 100 * time.Second
	// idleRecoverBudget bounds the wait for healthy after detection (the
	// baseline's 4 failed checks at 10 s are 40 s and more).
	idleRecoverBudget = 3 * time.Minute
)

func init() {
	lab.RegisterScenario(lab.ScenarioSpec{
		Name:       registryName(ScenarioIdleNodeDown),
		Summary:    "benchmark: the node in use goes down while no LAN client uses the tunnel",
		Standalone: runIdleNodeDown,
	})
}

func runIdleNodeDown(ctx context.Context, o lab.Options) ([]lab.ScenarioRun, error) {
	run := lab.ScenarioRun{NodesTried: []string{}, States: []string{}}
	fail := func(err error) ([]lab.ScenarioRun, error) {
		run.Error = err.Error()
		return []lab.ScenarioRun{run}, nil
	}
	l, err := lab.Up(ctx, o)
	if err != nil {
		return fail(fmt.Errorf("lab up: %w", err))
	}
	defer l.Close()
	defer stopDaemon(l)
	st, err := startHealthy(ctx, l, o.Set)
	if err != nil {
		return fail(err)
	}
	if _, err := l.ResetLeaks(ctx); err != nil {
		return fail(err)
	}
	node := st.Node
	quiet := idleQuiet + rand.N(idleQuiet)
	if err := sleep(ctx, quiet); err != nil {
		return fail(err)
	}
	if err := l.Fault(ctx, lab.FaultNodeDown, true, node); err != nil {
		return fail(err)
	}
	t0 := time.Now()
	if log := l.FaultLog(); len(log) > 0 {
		t0 = log[len(log)-1].Time
	}
	why := ""
	// The daemon may leave healthy and be healthy again on another node
	// between two status polls (a fast rotation takes well under a second,
	// a status poll under load more): its transitions say it, not only its
	// state.
	away, err := l.WaitDaemon(ctx, idleDetectBudget, func(s lab.DaemonState) bool {
		_, _, left := firstAway(s, t0)
		return s.State != "healthy" || s.Node != node || left
	})
	if err == nil {
		at := time.Now() // when seen, if no transition is listed
		if first, _, ok := firstAway(away, t0); ok {
			at = first
		}
		run.DetectS = secondsPtr(at.Sub(t0))
		run.States = append(run.States, away.State)
		why = detectedBy(away, t0)
		if why != "" {
			why = withTrigger(l.DaemonLog(), t0, why)
		}
		back, werr := l.WaitDaemon(ctx, idleRecoverBudget, func(s lab.DaemonState) bool { return s.Healthy() && s.Node != node })
		if werr == nil {
			run.NodesTried = append(run.NodesTried, back.Node)
			run.States = append(run.States, back.State)
			if _, cerr := waitHealthy(ctx, l); cerr == nil {
				run.RecoverS = secondsPtr(time.Since(t0))
				run.Recovered = true
			}
		}
	}
	run.Outcome = fmt.Sprintf("%s down after %s idle", node, quiet.Round(100*time.Millisecond))
	if why != "" {
		run.Outcome += "; " + detectedByPrefix + why
	}
	switch {
	case run.DetectS == nil:
		run.Outcome += fmt.Sprintf("; not detected within %s (state %q; daemon log after the fault: %s)", idleDetectBudget, away.State, logAfter(l.DaemonLog(), t0, 4))
	case run.RecoverS == nil:
		run.Outcome += "; no LAN traffic through a live node afterwards"
	default:
		run.Outcome += "; rotated to " + run.NodesTried[0]
	}
	lc, err := l.Leaks(ctx)
	if err != nil {
		return fail(fmt.Errorf("reading leak counters: %w", err))
	}
	run.LeakedPackets, run.Leaks = lc.Total(), lc.String()
	return []lab.ScenarioRun{run}, nil
}

func secondsPtr(d time.Duration) *float64 {
	s := float64(d.Round(time.Millisecond)) / float64(time.Second)
	return &s
}

// logAfter is a digest of the daemon's log lines at or after t0: the
// number of lines, then the messages of the first n (for a run that did
// not detect, so the report says what the daemon did instead).
func logAfter(log string, t0 time.Time, n int) string {
	var msgs []string
	count := 0
	for _, line := range strings.Split(log, "\n") {
		at, ok := logField(line, "time")
		ts, err := time.Parse(time.RFC3339Nano, at)
		if !ok || err != nil || ts.Before(t0) {
			continue
		}
		count++
		if len(msgs) < n {
			msg, _ := logField(line, "msg")
			if reason, ok := logField(line, "reason"); ok {
				msg += " (" + reason + ")"
			}
			msgs = append(msgs, truncate(msg, 120))
		}
	}
	if count == 0 {
		return "no lines"
	}
	return fmt.Sprintf("%d lines: %s", count, strings.Join(msgs, " | "))
}
