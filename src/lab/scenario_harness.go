package lab

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// Harness is one scenario run: a fresh lab with the daemon healthy, the
// monitor running, and the bookkeeping that turns what it saw into a
// ScenarioRun. A scenario's Run calls Inject (T0 is the first injection),
// marks which nodes are dead, waits for what it expects and returns;
// the runner then calls finish.
type Harness struct {
	Lab *Lab
	// Sets are the config overrides the daemon runs with.
	Sets []string
	log  *slog.Logger

	mon        *monitor
	stopMon    context.CancelFunc
	healthyAt  time.Time
	healthNode string
	loginsAt0  int

	mu        sync.Mutex
	t0        time.Time
	deadFrom  map[string][]deadSpan
	extra     map[string]any
	outcome   []string
	recovery  func(ScenarioRun) bool // the scenario's own "recovered" rule, nil = client traffic back
	notBefore time.Time              // client requests started before this do not count as recovery
}

// deadSpan is an interval during which a node was dead (To zero = still).
type deadSpan struct{ From, To time.Time }

// Timing budgets of a run.
const (
	// healthyBudget bounds the daemon's first connect in a fresh lab.
	healthyBudget = 60 * time.Second
	// settleBudget is how long a run waits after recovery for the daemon to
	// report healthy, so NodesTried and States are complete.
	settleBudget = 10 * time.Second
)

// begin starts the daemon, waits until it is healthy and a LAN client's
// traffic goes out through its node, zeroes the leak counters and starts
// the monitor.
func (h *Harness) begin(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(ctx, healthyBudget)
	defer cancel()
	if _, err := h.Lab.StartDaemon(sctx, h.Sets...); err != nil {
		return fmt.Errorf("starting the daemon: %w", err)
	}
	st, err := h.Lab.WaitDaemon(sctx, healthyBudget, DaemonState.Healthy)
	if err != nil {
		return fmt.Errorf("daemon never healthy: %w; log tail:\n%s", err, h.Lab.daemonLogTail(15))
	}
	want := ""
	for _, n := range Nodes {
		if n.Name == st.Node {
			want = n.Addr.String()
		}
	}
	if want == "" {
		return fmt.Errorf("daemon healthy on %q, which is not a lab node", st.Node)
	}
	if _, err := h.Lab.WaitClientExit(sctx, 0, want); err != nil {
		return fmt.Errorf("daemon healthy on %s but a LAN client does not get out through it: %w", st.Node, err)
	}
	if _, err := h.Lab.ResetLeaks(ctx); err != nil {
		return err
	}
	h.healthyAt, h.healthNode = time.Now(), st.Node
	h.mon = newMonitor(h.Lab)
	var mctx context.Context
	mctx, h.stopMon = context.WithCancel(ctx)
	h.mon.start(mctx)
	// The first status sample gives the login counter before the fault.
	if _, ok := h.WaitSample(ctx, 5*time.Second, func(statusSample) bool { return true }); ok {
		h.loginsAt0 = h.mon.last().LoginAttempts
	}
	return nil
}

// Node is the node the daemon was healthy on before the injection.
func (h *Harness) Node() string { return h.healthNode }

// Inject switches a fault on or off and returns the time it took effect,
// as FaultLog recorded it. The first injection of a run is T0.
func (h *Harness) Inject(ctx context.Context, name string, on bool, args ...string) (time.Time, error) {
	if err := h.Lab.Fault(ctx, name, on, args...); err != nil {
		return time.Time{}, err
	}
	at := time.Now()
	if log := h.Lab.FaultLog(); len(log) > 0 {
		at = log[len(log)-1].Time
	}
	h.mu.Lock()
	if h.t0.IsZero() {
		h.t0 = at
	}
	h.mu.Unlock()
	return at, nil
}

// T0 is the first injection's time (zero before it).
func (h *Harness) T0() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.t0
}

// SetDead records that node is dead (or alive again) from at on.
func (h *Harness) SetDead(node string, dead bool, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	spans := h.deadFrom[node]
	switch {
	case dead && (len(spans) == 0 || !spans[len(spans)-1].To.IsZero()):
		h.deadFrom[node] = append(spans, deadSpan{From: at})
	case !dead && len(spans) > 0 && spans[len(spans)-1].To.IsZero():
		spans[len(spans)-1].To = at
	}
}

// deadAt reports whether node was dead at t.
func (h *Harness) deadAt(node string, t time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.deadFrom[node] {
		if !t.Before(s.From) && (s.To.IsZero() || t.Before(s.To)) {
			return true
		}
	}
	return false
}

// liveExit reports whether a client request that ended at t came out of a
// node that was alive then.
func (h *Harness) liveExit(ip string, t time.Time) bool {
	n := ExitName(ip)
	return n != "" && !h.deadAt(n, t)
}

// Extra records a scenario-specific figure.
func (h *Harness) Extra(key string, v any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.extra[key] = v
}

// Note adds a sentence to the run's outcome.
func (h *Harness) Note(format string, a ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.outcome = append(h.outcome, fmt.Sprintf(format, a...))
}

// RecoveredWhen replaces the default recovery rule (client traffic back
// through a live node) for scenarios where traffic cannot come back.
func (h *Harness) RecoveredWhen(f func(ScenarioRun) bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recovery = f
}

// RecoverNotBefore makes client requests started before t not count as
// recovery (kill9-during-connect: traffic must come back after the
// restart).
func (h *Harness) RecoverNotBefore(t time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.notBefore = t
}

// clientRecovery finds the moment client traffic came back: the end of
// the first request through a live node that started after the first
// failed request since T0 (or, if none failed, the first good one after
// T0). failedSeen says whether any request failed.
func (h *Harness) clientRecovery(clients []clientResult) (at time.Time, failedSeen, ok bool) {
	t0 := h.T0()
	if t0.IsZero() {
		return time.Time{}, false, false
	}
	h.mu.Lock()
	notBefore := h.notBefore
	h.mu.Unlock()
	var firstFail time.Time
	for _, c := range clients {
		if c.Start.Before(t0) {
			continue
		}
		if !c.OK || !h.liveExit(c.IP, c.End) {
			if firstFail.IsZero() || c.Start.Before(firstFail) {
				firstFail = c.Start
			}
		}
	}
	from := t0
	if !firstFail.IsZero() {
		from = firstFail
	}
	if from.Before(notBefore) {
		from = notBefore
	}
	for _, c := range clients {
		if c.Start.Before(from) || !c.OK || !h.liveExit(c.IP, c.End) {
			continue
		}
		if at.IsZero() || c.End.Before(at) {
			at = c.End
		}
	}
	return at, !firstFail.IsZero(), !at.IsZero()
}

// lastClientOK reports whether the last request to finish got out through
// a live node: traffic still works when the run ends.
func (h *Harness) lastClientOK(clients []clientResult) bool {
	var last *clientResult
	for i := range clients {
		if last == nil || clients[i].End.After(last.End) {
			last = &clients[i]
		}
	}
	return last != nil && last.OK && h.liveExit(last.IP, last.End)
}

// outageGrace is how long after the fault WaitRecovered waits for a first
// failed request before it accepts that traffic never stopped (a fault the
// proxy rode out). Without it a request that got through in the moment
// before the fault bit ended the wait before the outage began, and the
// run then had no recovery at all (seen under load).
const outageGrace = 3 * time.Second

// WaitRecovered waits up to budget for client traffic through a live
// node (see clientRecovery), then up to settleBudget for the daemon to say
// healthy. It reports whether traffic came back.
func (h *Harness) WaitRecovered(ctx context.Context, budget time.Duration) bool {
	ok := h.waitFor(ctx, budget, func() bool {
		_, _, _, clients := h.mon.snapshot()
		at, failed, ok := h.clientRecovery(clients)
		if ok && !failed && time.Since(h.T0()) < outageGrace {
			// Nothing has failed yet: the fault may not have bitten
			// (a crash takes a moment to be noticed). Too early to call
			// the run an outage-free one.
			return false
		}
		// A request still open from before the recovery could yet fail
		// and move the outage's start past it: wait until they are done.
		return ok && h.mon.settledBefore(at)
	})
	if ok {
		h.WaitSample(ctx, settleBudget, func(s statusSample) bool { return s.State == "healthy" })
	}
	return ok
}

// WaitSample waits up to budget for a status sample (taken after the call)
// that satisfies cond and returns it.
func (h *Harness) WaitSample(ctx context.Context, budget time.Duration, cond func(statusSample) bool) (statusSample, bool) {
	since := time.Now()
	var got statusSample
	ok := h.waitFor(ctx, budget, func() bool {
		s := h.mon.last()
		if s.At.Before(since) || !cond(s) {
			return false
		}
		got = s
		return true
	})
	return got, ok
}

// WaitLog waits up to budget for a daemon log line (written after the
// monitor started) whose message contains substr and returns it.
func (h *Harness) WaitLog(ctx context.Context, budget time.Duration, substr string) (logLine, bool) {
	var got logLine
	ok := h.waitFor(ctx, budget, func() bool {
		_, _, logs, _ := h.mon.snapshot()
		for _, l := range logs {
			if strings.Contains(l.Msg, substr) {
				got = l
				return true
			}
		}
		return false
	})
	return got, ok
}

// Observe lets the run go on for d (the monitor keeps sampling).
func (h *Harness) Observe(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// waitFor polls cond every monitorPoll/2 until it holds, budget passes or
// ctx ends.
func (h *Harness) waitFor(ctx context.Context, budget time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(budget)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(monitorPoll / 2):
		}
	}
}

// finish stops the monitor and turns what it saw into the run's figures.
func (h *Harness) finish(ctx context.Context) ScenarioRun {
	run := ScenarioRun{NodesTried: []string{}, States: []string{}}
	if h.mon == nil {
		return run
	}
	h.stopMon()
	h.mon.wait()
	samples, trs, logs, clients := h.mon.snapshot()
	t0 := h.T0()

	// Detection: the first state change away from healthy after T0.
	for _, t := range trs {
		if t0.IsZero() || t.At.Before(t0) {
			continue
		}
		if len(run.States) == 0 || run.States[len(run.States)-1] != t.To {
			run.States = append(run.States, t.To)
		}
		if run.DetectS == nil && t.To != "healthy" {
			run.DetectS = seconds3(t.At.Sub(t0).Seconds())
		}
	}
	if run.DetectS == nil && !t0.IsZero() { // transitions missed: fall back to samples
		for _, s := range samples {
			if !s.At.Before(t0) && s.State != "" && s.State != "healthy" {
				run.DetectS = seconds3(s.At.Sub(t0).Seconds())
				break
			}
		}
	}

	// Nodes tried: every "Connecting to NODE" the daemon logged after T0.
	for _, c := range connectsAfter(logs, samples, t0) {
		run.NodesTried = append(run.NodesTried, c.node)
		if h.deadAt(c.node, c.at) {
			run.DeadNodesTried++
		}
	}

	okAtEnd := false
	if at, failed, ok := h.clientRecovery(clients); ok {
		run.RecoverS = seconds3(at.Sub(t0).Seconds())
		if !failed {
			h.Note("LAN clients never saw a failure")
		}
		after := 0
		for _, c := range clients {
			if c.Start.After(at) && (!c.OK || !h.liveExit(c.IP, c.End)) {
				after++
			}
		}
		okAtEnd = h.lastClientOK(clients)
		h.Extra("client_failures_after_recovery", after)
		if !okAtEnd {
			h.Note("LAN traffic broke again after recovering")
		}
	}
	if len(samples) > 0 {
		last := samples[len(samples)-1]
		run.FinalState = last.State
		run.LoginAttempts = max(0, last.LoginAttempts-h.loginsAt0)
	}
	h.mon.mu.Lock()
	h.Extra("status_samples", len(samples))
	if h.mon.statusErrs > 0 {
		h.Extra("status_errors", h.mon.statusErrs)
		h.Extra("status_last_error", truncate(h.mon.lastStatErr, 200))
	}
	h.mon.mu.Unlock()
	lc, err := h.Lab.Leaks(ctx)
	if err != nil {
		run.Error = "reading leak counters: " + err.Error()
	}
	run.LeakedPackets, run.Leaks = lc.Total(), lc.String()

	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.extra) > 0 {
		run.Extra = h.extra
	}
	if h.recovery != nil {
		run.Recovered = h.recovery(run)
	} else {
		run.Recovered = run.RecoverS != nil && okAtEnd
	}
	run.Outcome = strings.Join(append(describeRun(run, h.healthNode), h.outcome...), "; ")
	return run
}

// connectEvent is one connect the daemon started.
type connectEvent struct {
	at   time.Time
	node string
}

// connectsAfter lists the daemon's connects after t0 from its log
// ("Connecting to NODE"); if the log has none (a different vocabulary),
// the node changes seen in status samples stand in.
func connectsAfter(logs []logLine, samples []statusSample, t0 time.Time) []connectEvent {
	var out []connectEvent
	for _, l := range logs {
		node, ok := strings.CutPrefix(l.Msg, "Connecting to ")
		if !ok || l.When().Before(t0) {
			continue
		}
		out = append(out, connectEvent{at: l.When(), node: strings.TrimSpace(node)})
	}
	if len(out) > 0 {
		return out
	}
	prev := ""
	for _, s := range samples {
		if s.At.Before(t0) {
			prev = s.Node
			continue
		}
		if s.Node != "" && s.Node != prev {
			out = append(out, connectEvent{at: s.At, node: s.Node})
		}
		prev = s.Node
	}
	return out
}

// describeRun is the first sentence of Outcome: what the daemon did.
func describeRun(run ScenarioRun, from string) []string {
	var s []string
	switch n := len(run.NodesTried); {
	case n == 0:
		s = append(s, "stayed on "+from)
	case n == 1 && run.NodesTried[0] == from:
		s = append(s, "reconnected to "+from)
	default:
		s = append(s, fmt.Sprintf("rotated %s -> %s", from, strings.Join(run.NodesTried, " -> ")))
	}
	if slices.Contains(run.States, "storm_cooldown") {
		s = append(s, "storm protection")
	}
	if run.LoginAttempts > 0 {
		s = append(s, fmt.Sprintf("%d login(s)", run.LoginAttempts))
	}
	return s
}

// errNoScenario is returned for an unknown scenario name.
var errNoScenario = errors.New("unknown scenario")

// labOptionsFor is how runScenarioOnce brings a lab up.
func labOptionsFor(o ScenarioOptions, spec ScenarioSpec, sets []string) Options {
	vendor := append(slices.Clone(spec.Vendor), o.Vendor...)
	return Options{BinDir: o.BinDir, RepoRoot: o.RepoRoot, Set: sets, Vendor: vendor, Log: o.Log, Clients: 1, OpenWrt: o.OpenWrt}
}

// removeAll is os.RemoveAll, as a variable for the runner's cleanup.
var removeAll = os.RemoveAll
