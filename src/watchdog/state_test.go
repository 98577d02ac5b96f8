package watchdog

import (
	"strings"
	"testing"
	"time"
)

func TestNextState(t *testing.T) {
	now := time.Unix(1000, 0)
	later := now.Add(time.Minute)
	up := facts{started: true, connected: true}
	cases := []struct {
		name string
		f    facts
		want State
	}{
		{"not started", facts{}, StateStarting},
		{"healthy", up, StateHealthy},
		{"degraded", facts{started: true, connected: true, consecutiveFails: 2}, StateDegraded},
		{"connecting", facts{started: true, connecting: true}, StateConnecting},
		{"disconnected", facts{started: true}, StateDisconnected},
		{"auth wait", facts{started: true, auth: authFacts{running: true}}, StateAuthWait},
		{"connected with login running", facts{started: true, connected: true, auth: authFacts{running: true}}, StateHealthy},
		{"auth failed", facts{started: true, auth: authFacts{fatal: true}}, StateAuthFailed},
		{"subscription", facts{started: true, auth: authFacts{subscriptionUntil: later}}, StateSubscription},
		{"subscription over", facts{started: true, auth: authFacts{subscriptionUntil: now}}, StateDisconnected},
		{"cooldown", facts{started: true, cooldownUntil: later}, StateCooldown},
		{"wan down beats connecting", facts{started: true, connecting: true, wanDown: true}, StateWANDown},
		{"probed wan down", facts{started: true, connected: true, wanDownProbed: true}, StateWANDown},
		{"fail open", facts{started: true, auth: authFacts{failOpen: true, running: true}}, StateFailOpen},
		{"diag beats all but stop", facts{started: true, diag: true, cooldownUntil: later, auth: authFacts{failOpen: true}}, StateDiag},
		{"stopping", facts{started: true, diag: true, stopping: true}, StateStopping},
		{"stopped", facts{stopping: true, stopped: true}, StateStopped},
	}
	for _, tc := range cases {
		if got := nextState(tc.f, now); got != tc.want {
			t.Errorf("%s: nextState = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestSettingsValidate(t *testing.T) {
	if err := DefaultSettings().Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	s := DefaultSettings()
	s.CheckInterval, s.FailThreshold, s.Candidates, s.Node = 0, 0, nil, ""
	err := s.Validate()
	for _, want := range []string{"check_interval", "fail_threshold", "no node"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v, want it to mention %s", err, want)
		}
	}
	if _, err := New(s, Deps{}); err == nil {
		t.Error("New accepted invalid settings")
	}
	if _, err := New(DefaultSettings(), Deps{}); err == nil {
		t.Error("New accepted missing dependencies")
	}
}
