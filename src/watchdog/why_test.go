package watchdog

import (
	"strings"
	"testing"
	"time"

	"surflare-watchdog/src/health"
)

// Every state has a line a household can read: no state names or outcome
// codes in it (they go in Detail), and red (action) only where someone
// has to act or the LAN is offline for a while.
func TestWhyLineForEveryState(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	w := &Watchdog{s: DefaultSettings(), node: "Dallas", exit: Exit{Country: "US"}}
	w.f.cooldownUntil = now.Add(4 * time.Minute)
	w.f.auth.subscriptionUntil = now.Add(time.Hour)
	want := map[State]string{
		StateStarting: WhyInfo, StateStopping: WhyInfo, StateStopped: WhyInfo, StateDiag: WhyInfo, StateProbing: WhyInfo,
		StateFailOpen: WhyAction, StateSubscription: WhyAction, StateAuthFailed: WhyAction, StateCooldown: WhyAction,
		StateWANDown: WhyAction, StateConnecting: WhyWarn, StateAuthWait: WhyWarn, StateDisconnected: WhyWarn,
		StateDegraded: WhyWarn, StateHealthy: WhyOK,
	}
	codes := []string{"_", "LOCAL_FAIL", "PROXY_BROKEN", "G2", "Probe 7"}
	for st, sev := range want {
		y := w.whyLocked(Status{State: st, LastCheck: &health.Result{Outcome: health.LocalFail, Reason: "x"}}, now)
		if y.Severity != sev || y.Line == "" {
			t.Errorf("%s: %+v, want severity %s", st, y, sev)
		}
		for _, c := range codes {
			if strings.Contains(y.Line, c) {
				t.Errorf("%s: line %q has the code %q", st, y.Line, c)
			}
		}
		if !strings.Contains(y.Detail, "state="+string(st)) || !strings.Contains(y.Detail, "LOCAL_FAIL") {
			t.Errorf("%s: detail %q lacks the codes", st, y.Detail)
		}
	}
	if y := w.whyLocked(Status{State: StateCooldown}, now); y.Line != "Kill switch on: no node works (tried 6); next try in 4 min" {
		t.Errorf("cooldown: %q", y.Line)
	}
	if y := w.whyLocked(Status{State: StateHealthy}, now); y.Line != "Internet is working through Dallas (US)" {
		t.Errorf("healthy: %q", y.Line)
	}
}
