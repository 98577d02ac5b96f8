package watchdog

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"surflare-watchdog/src/health"
)

// checkDone is a finished health check.
type checkDone struct {
	gen int
	r   health.Result
}

// startCheckLocked runs one health check in the background. While an
// independent signal already names the current node broken, the check is a
// confirming one (confirmCheckLocked): its probes are bounded by
// ConfirmProbeTimeout instead of the configured probe timeout.
func (w *Watchdog) startCheckLocked() {
	w.cancelCheckLocked()
	w.checkGen++
	gen := w.checkGen
	w.checkInFlight = true
	w.checkStarted = w.clock.Now()
	ctx, cancel := context.WithCancel(w.opCtx)
	ctx, w.checkBound = health.WithProbeBound(ctx)
	w.checkConfirming = false
	if why, ok := w.confirmCheckLocked(); ok {
		w.logLocked(slog.LevelInfo, fmt.Sprintf("Confirming check on %s (probes bounded by %s): %s", w.node, w.s.ConfirmProbeTimeout, why))
		ctx = health.WithProbeTimeout(ctx, w.s.ConfirmProbeTimeout)
		w.checkConfirming = true
	}
	w.checkCancel = cancel
	w.ops.Add(1)
	go func() {
		defer w.ops.Done()
		defer cancel()
		w.send(checkDone{gen: gen, r: w.d.Prober.Check(ctx)})
	}()
}

// promoteCheckLocked makes the check in flight a confirming one when the
// evidence names the node broken now and did not when the check started
// (confirmCheckLocked then said no): its probes end ConfirmProbeTimeout after the check's own
// start (health.ProbeBound), exactly as if it had started as a confirming
// check. This is what lets the confirming check overlap the silence
// build-up: the early detector asks for a check on its first sight of
// acknowledged-but-unanswered flows (detect: suspect), long before they
// have been silent for silentAfter, and the firing that follows finds that
// check already running. Ignoring the firing (the old rule) left the check
// with the full probe timeout; restarting it would waste the seconds it
// has already waited. A working tunnel answers the probes well inside the
// bound either way, and a failure still rotates only when corroborated.
// The evidence is asked as of the check's start where it can tell
// (AsOfCorroborator), as the rotation will ask it: what the check's own
// probes feed it must not cut the check short.
func (w *Watchdog) promoteCheckLocked() {
	if !w.checkInFlight || w.checkConfirming || w.checkBound == nil {
		return
	}
	if w.d.Corroborator == nil || !w.f.connected || w.f.connecting || w.node == "" {
		return
	}
	why, ok := corroborateAsOf(w.d.Corroborator, w.checkStarted, w.clock.Now(), w.node, w.transit)
	if !ok {
		return
	}
	w.checkConfirming = true
	end := w.checkStarted.Add(w.s.ConfirmProbeTimeout)
	w.logLocked(slog.LevelInfo, fmt.Sprintf("Check on %s in flight becomes a confirming one (probes end %s after its start, %s from now): %s",
		w.node, w.s.ConfirmProbeTimeout, max(0, end.Sub(w.clock.Now())).Round(time.Millisecond), why))
	w.checkBound.Tighten(end)
}

// cancelCheckLocked abandons an in-flight check; its result is ignored.
func (w *Watchdog) cancelCheckLocked() {
	if w.checkCancel != nil {
		w.checkCancel()
		w.checkCancel = nil
	}
	if w.checkInFlight {
		w.checkGen++
		w.checkInFlight = false
	}
}

// recordCheckLocked stores a result for Status and subscribers.
func (w *Watchdog) recordCheckLocked(r health.Result) {
	w.counters.Checks++
	w.lastCheck = &r
	if r.ExitIP != "" || r.ExitCountry != "" {
		w.exit = Exit{IP: r.ExitIP, Country: r.ExitCountry}
	}
	w.emitLocked(Event{Type: EventHealth, At: w.clock.Now(), Health: &r})
}

// onCheckLocked acts on a health check: the health monitor.
func (w *Watchdog) onCheckLocked(e checkDone) {
	if e.gen != w.checkGen {
		w.supersededLocked(true, e.gen) // by a reconnect or a pause
		return
	}
	w.checkInFlight = false
	w.checkCancel = nil
	r := e.r
	w.recordCheckLocked(r)
	w.checkAnsweredLocked(e)
	if w.f.stopping || w.pausedLocked() || !w.f.connected || w.f.connecting {
		return // recorded for the user; nothing to act on
	}
	now := w.clock.Now()
	if r.WANDown {
		w.f.wanDownProbed = true
		if !w.wanLogged {
			w.wanLogged = true
			w.logLocked(slog.LevelWarn, "WAN egress down: pausing rotation until it returns", "reason", r.Reason)
		}
		w.nextCheckAt = now.Add(w.s.DegradedInterval)
		w.updateLocked("WAN egress down")
		return
	}
	if w.f.wanDownProbed {
		w.f.wanDownProbed, w.wanLogged = false, false
		w.logLocked(slog.LevelInfo, "WAN egress back")
	}
	if r.Outcome.Healthy() && w.d.Override != nil {
		if why, on := w.d.Override.Override(now); on {
			w.counters.FailedChecks++
			if w.overridden == w.node {
				// A fresh connect to the same node did not end the storm:
				// it is the node's, so leave it.
				w.logLocked(slog.LevelWarn, fmt.Sprintf("G2: 503 storm override on %s: %s persists after a reconnect; rotating", w.node, why))
				w.rotateLocked("G2: 503 storm override")
			} else {
				// A fresh connect often lands on another server of the
				// same node: try that once before giving the node up.
				w.logLocked(slog.LevelWarn, fmt.Sprintf("G2: 503 storm override on %s: probes pass but %s; reconnecting", w.node, why))
				w.overridden = w.node
				w.reconnectLocked(w.node, "G2: 503 storm override")
			}
			w.updateLocked("503 storm override")
			return
		}
		w.overridden = "" // the storm is over
	}
	if r.Outcome.Healthy() {
		if ms := medianTunnelLatency(r); ms > 0 {
			w.latency[w.node] = ms
		}
		if w.f.consecutiveFails > 0 {
			w.logLocked(slog.LevelInfo, fmt.Sprintf("VPN recovered on %s after %d failed checks", w.node, w.f.consecutiveFails))
		}
		w.markHealthyLocked()
		w.refundAttemptLocked(now)
		w.nextCheckAt = now.Add(w.s.CheckInterval)
		w.maybeRefreshLocked()
		w.updateLocked("check " + string(r.Outcome))
		return
	}

	w.counters.FailedChecks++
	w.stopRefreshRetriesLocked()
	w.f.consecutiveFails++
	w.counters.ConsecutiveFailures = w.f.consecutiveFails
	w.logLocked(slog.LevelWarn, fmt.Sprintf("Health check failed on %s: %s (%d/%d)", w.node, r.Outcome, w.f.consecutiveFails, w.s.FailThreshold),
		"reason", r.Reason)
	w.startAuthCheckLocked()
	switch {
	case !w.canAutoConnectLocked(now):
		// Rotating cannot fix a dead session or an inactive subscription;
		// keep probing while the login worker (or the cooldown) runs.
		w.nextCheckAt = now.Add(w.s.DegradedInterval)
	case r.Outcome == health.LocalFail:
		// The proxy died or its tables vanished: the node is not to blame.
		w.reconnectLocked(w.node, "local plumbing broken: "+r.Reason)
	case r.Outcome == health.DomesticExit:
		w.rotateLocked("domestic exit: " + r.Reason)
	case w.f.consecutiveFails >= w.s.FailThreshold:
		w.rotateLocked(fmt.Sprintf("%d consecutive failed checks", w.f.consecutiveFails))
	case w.rotateIfCorroboratedLocked(now): // fast recovery (corroborate.go)
	default:
		w.nextCheckAt = now.Add(w.s.DegradedInterval)
	}
	w.updateLocked("check " + string(r.Outcome))
}

// markHealthyLocked ends a failure cycle.
func (w *Watchdog) markHealthyLocked() {
	w.f.consecutiveFails = 0
	w.counters.ConsecutiveFailures = 0
	w.counters.FailedReconnects = 0
	clear(w.tried)
	clear(w.triedTransit)
	now := w.clock.Now()
	w.lastHealthyAt = now
	w.rememberHealthyLocked()
	if w.s.HeartbeatInterval > 0 && (w.lastHeartbeat.IsZero() || now.Sub(w.lastHeartbeat) >= w.s.HeartbeatInterval) {
		w.lastHeartbeat = now
		w.logLocked(slog.LevelInfo, "VPN healthy: exit="+orUnknown(w.exit.Country), "node", w.node, "ip", w.exit.IP)
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// reconnectLocked reconnects to the same node (automatic).
func (w *Watchdog) reconnectLocked(node, reason string) {
	if !w.rateAllowsLocked(w.clock.Now(), node, reason) {
		return // logged once by the limit, with when it lets go
	}
	w.logLocked(slog.LevelWarn, "Reconnecting to "+node, "reason", reason)
	w.startConnectLocked(node, reason, byEngine)
}

// rotateLocked gives up on the current node for this cycle and moves on.
func (w *Watchdog) rotateLocked(reason string) {
	if w.localCauseLocked() {
		// The router's fault, not the node's (preflight.go): keep the
		// node, keep probing; the preflight clears the way back.
		w.nextCheckAt = w.clock.Now().Add(w.s.DegradedInterval)
		return
	}
	old := w.node
	w.tried[old] = true
	w.rememberFailedLocked(old)
	w.rotateFromLocked(old, reason)
}

// rotateFromLocked connects to the next usable candidate after from, or
// triggers storm protection when none is left. A transit that log health
// blames is switched first (switchTransitLocked): that keeps the node.
func (w *Watchdog) rotateFromLocked(from, reason string) {
	if w.switchTransitLocked(from, reason) {
		return
	}
	next, ok := w.pickNextLocked(from, true)
	if !ok {
		w.stormLocked()
		return
	}
	if !w.rateAllowsLocked(w.clock.Now(), next, reason) {
		// No rotation yet: the limit logged when it lets go, and the
		// rotation is counted and logged then.
		w.retryFrom = from
		return
	}
	w.countRotationLocked(from, next, reason)
	w.startConnectLocked(next, reason, byEngine)
}

// countRotationLocked counts and logs a rotation from one node to the next.
func (w *Watchdog) countRotationLocked(from, next, reason string) {
	w.counters.Rotations++
	w.logLocked(slog.LevelWarn, fmt.Sprintf("Node rotation: %s -> %s (%d/%d)", from, next, len(w.tried)+1, len(w.s.candidates())), "reason", reason)
}

// pickNextLocked walks the candidates after from, in config order, and
// returns the first that has not failed in this cycle (when skipTried) and
// is not dead by fresh log health. If every remaining one is dead, the one
// whose last urltest error is oldest is returned anyway.
func (w *Watchdog) pickNextLocked(from string, skipTried bool) (string, bool) {
	cands := w.s.candidates()
	start := 0
	for i, c := range cands {
		if c == from {
			start = i + 1
			break
		}
	}
	var dead []string
	for k := range len(cands) {
		c := cands[(start+k)%len(cands)]
		if c == from && !skipTried {
			continue
		}
		if skipTried && w.tried[c] {
			continue
		}
		if isDead, n := w.deadLocked(c); isDead {
			w.logLocked(slog.LevelInfo, fmt.Sprintf("LOG_HEALTH: skipping %s via %s (%d errors)", c, w.transit, n))
			dead = append(dead, c)
			continue
		}
		return c, true
	}
	if len(dead) > 0 {
		pick := w.oldestErrorLocked(dead)
		w.logLocked(slog.LevelWarn, fmt.Sprintf("LOG_HEALTH: every remaining candidate is marked dead; trying %s anyway", pick))
		return pick, true
	}
	return "", false
}
