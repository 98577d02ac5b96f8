package watchdog

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"surflare-watchdog/src/health"
)

// Why is the one line a person reads first in status, the web UI and LuCI:
// what is going on with the household's Internet and, when it needs them,
// what to do. Internal codes (state names, outcomes, preflight checks) go in
// Detail, never in Line.
type Why struct {
	Line     string `json:"line"`
	Severity string `json:"severity"` // WhyOK, WhyInfo, WhyWarn or WhyAction
	Detail   string `json:"detail,omitempty"`
}

// Why severities: only WhyAction asks the person to do something (the UI
// paints it red).
const (
	WhyOK     = "ok"     // the Internet works through the tunnel
	WhyInfo   = "info"   // on purpose: diagnostics, a node probe, starting, stopping
	WhyWarn   = "warn"   // being handled: connecting, logging in, a failing node
	WhyAction = "action" // offline or unprotected until someone acts or it clears
)

// whyLocked derives the line from the snapshot and the facts, in the order
// nextState decides the state.
func (w *Watchdog) whyLocked(st Status, now time.Time) Why {
	detail := "state=" + string(st.State)
	if c := st.LastCheck; c != nil && c.Outcome != "" {
		detail += " last_check=" + string(c.Outcome)
		if c.Reason != "" {
			detail += " (" + c.Reason + ")"
		}
	}
	y := func(sev, line string) Why { return Why{Line: line, Severity: sev, Detail: detail} }
	switch st.State {
	case StateStarting:
		return y(WhyInfo, "Starting up")
	case StateStopping:
		return y(WhyInfo, "Stopping")
	case StateStopped:
		return y(WhyInfo, "Stopped")
	case StateDiag:
		return y(WhyInfo, "Diagnostics mode: the watchdog is paused and changes nothing")
	case StateProbing:
		return y(WhyInfo, "Testing nodes; the tunnel comes back when the test ends")
	case StateFailOpen:
		return y(WhyAction, fmt.Sprintf("Kill switch off after %d failed logins: traffic is NOT protected — check the Surflare account", w.f.auth.failures))
	case StateBlocked:
		b := w.f.pre.blocker
		line := b.Why + " — " + b.Fix
		if w.f.pre.openSetup {
			line += " (until then the kill switch is off)"
		}
		v := y(WhyAction, line)
		v.Detail = detail + " preflight=" + b.Check
		if b.Detail != "" {
			v.Detail += ": " + b.Detail
		}
		return v
	case StateSubscription:
		return y(WhyAction, "The Surflare subscription is not active — renew it; next check in "+humanDuration(w.f.auth.subscriptionUntil.Sub(now)))
	case StateAuthFailed:
		v := y(WhyAction, "Surflare login failed — check the account (e-mail and password), then reconnect")
		if e := w.f.auth.lastError; e != "" {
			v.Detail += " login_error=" + e
		}
		return v
	case StateCooldown:
		return y(WhyAction, fmt.Sprintf("Kill switch on: no node works (tried %d); next try in %s", len(w.s.candidates()), humanDuration(w.f.cooldownUntil.Sub(now))))
	case StateWANDown:
		v := y(WhyAction, "The router has no Internet connection (WAN down) — check the modem")
		if b := w.f.pre.blocker; w.f.pre.blocked() {
			v.Detail += " preflight=" + b.Check
			if b.Detail != "" {
				v.Detail += ": " + b.Detail
			}
		}
		return v
	case StateConnecting:
		return y(WhyWarn, "Connecting to "+w.node+"…")
	case StateAuthWait:
		return y(WhyWarn, "Logging in to Surflare…")
	case StateDisconnected:
		if now.Before(w.rateLimitedUntil) {
			return y(WhyAction, "Kill switch on: too many reconnects; next try in "+humanDuration(w.rateLimitedUntil.Sub(now)))
		}
		if sev, line := w.accountWhyLocked(now); line != "" {
			return y(sev, line)
		}
		if !w.retryAt.IsZero() {
			return y(WhyWarn, fmt.Sprintf("Kill switch on: trying %s again in %s", orNode(w.retryNode, w.node), humanDuration(w.retryAt.Sub(now))))
		}
		return y(WhyWarn, "Kill switch on: not connected")
	case StateDegraded:
		if b := w.f.pre.blocker; w.f.pre.blocked() {
			return y(WhyAction, b.Why+" — "+b.Fix)
		}
		return y(WhyWarn, fmt.Sprintf("Internet through %s is failing checks (%d of %d before switching)", w.node, w.f.consecutiveFails, w.s.FailThreshold))
	case StateHealthy:
		where := w.node
		if w.exit.Country != "" {
			where += " (" + w.exit.Country + ")"
		}
		return y(WhyOK, "Internet is working through "+where)
	}
	return y(WhyInfo, string(st.State))
}

func orNode(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// humanDuration says d the way a person would: "45 s", "4 min", "2 h".
func humanDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "a moment"
	case d < time.Minute:
		return fmt.Sprintf("%d s", int((d+time.Second-1)/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int((d+time.Minute-1)/time.Minute))
	}
	return strings.TrimSuffix(fmt.Sprintf("%.1f", d.Hours()), ".0") + " h"
}

// medianTunnelLatency is the median latency of a check's passing tunnel
// probes (0 when none passed).
func medianTunnelLatency(r health.Result) int64 {
	var ms []int64
	for _, p := range r.Tunnel {
		if p.OK && !p.Skipped {
			ms = append(ms, p.LatencyMS)
		}
	}
	if len(ms) == 0 {
		return 0
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i] < ms[j] })
	return ms[len(ms)/2]
}
