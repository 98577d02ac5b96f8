package watchdog

import (
	"testing"
	"time"
)

// Every engine state has one firewall mode, decided by firewallMode from
// the same facts as nextState. The LAN goes into the proxy only after a
// verified connect and stays there through the states that do not touch
// the tunnel (degraded, diag, a node probe, WAN down); everything after a
// failed or new connect is the kill switch alone; fail-open and the two
// stops are the only modes without it or without the guard.
func TestFirewallModeForEveryState(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	later := now.Add(time.Hour)
	up := facts{started: true, connected: true, lanProxied: true}
	with := func(f facts, change func(*facts)) facts { change(&f); return f }
	cases := []struct {
		name  string
		f     facts
		state State
		mode  FirewallMode
	}{
		{"starting", facts{}, StateStarting, FirewallKillSwitch},
		{"connecting", facts{started: true, connecting: true}, StateConnecting, FirewallKillSwitch},
		{"healthy", up, StateHealthy, FirewallLANProxy},
		{"degraded", with(up, func(f *facts) { f.consecutiveFails = 1 }), StateDegraded, FirewallLANProxy},
		{"diag while up", with(up, func(f *facts) { f.diag = true }), StateDiag, FirewallLANProxy},
		{"diag while down", facts{started: true, diag: true}, StateDiag, FirewallKillSwitch},
		{"probing", with(up, func(f *facts) { f.probing = true }), StateProbing, FirewallLANProxy},
		{"wan down while up", with(up, func(f *facts) { f.wanDown = true }), StateWANDown, FirewallLANProxy},
		{"wan down after a failed connect", facts{started: true, wanDownProbed: true}, StateWANDown, FirewallKillSwitch},
		{"reconnecting", facts{started: true, connecting: true}, StateConnecting, FirewallKillSwitch},
		{"disconnected", facts{started: true}, StateDisconnected, FirewallKillSwitch},
		{"auth wait", facts{started: true, auth: authFacts{running: true}}, StateAuthWait, FirewallKillSwitch},
		{"auth failed", facts{started: true, auth: authFacts{fatal: true}}, StateAuthFailed, FirewallKillSwitch},
		{"subscription", facts{started: true, auth: authFacts{subscriptionUntil: later}}, StateSubscription, FirewallKillSwitch},
		{"storm cooldown", facts{started: true, cooldownUntil: later}, StateCooldown, FirewallKillSwitch},
		{"fail-open", facts{started: true, auth: authFacts{failOpen: true}}, StateFailOpen, FirewallFailOpen},
		{"fail-open over a verified tunnel", with(up, func(f *facts) { f.auth.failOpen = true }), StateFailOpen, FirewallFailOpen},
		{"stopping", with(up, func(f *facts) { f.stopping = true }), StateStopping, FirewallStopped},
		{"stopping open", with(up, func(f *facts) { f.stopping, f.stopOpen = true, true }), StateStopping, FirewallStoppedOpen},
		{"stopped", facts{started: true, stopped: true}, StateStopped, FirewallStopped},
		{"stopped from fail-open, open", facts{stopped: true, stopOpen: true, auth: authFacts{failOpen: true}}, StateStopped, FirewallStoppedOpen},
	}
	seen := map[State]bool{}
	for _, c := range cases {
		if got := nextState(c.f, now); got != c.state {
			t.Errorf("%s: the facts give state %s, want %s (fix the case)", c.name, got, c.state)
		}
		seen[c.state] = true
		if got := firewallMode(c.f); got != c.mode {
			t.Errorf("%s (%s): firewall mode %s, want %s", c.name, c.state, got, c.mode)
		}
	}
	for _, s := range []State{StateStarting, StateStopping, StateStopped, StateDiag, StateProbing, StateFailOpen,
		StateSubscription, StateAuthFailed, StateCooldown, StateWANDown, StateConnecting, StateAuthWait,
		StateDisconnected, StateDegraded, StateHealthy} {
		if !seen[s] {
			t.Errorf("state %s has no case", s)
		}
	}
}

func TestFirewallModeNames(t *testing.T) {
	for m, want := range map[FirewallMode]string{FirewallKillSwitch: "kill-switch", FirewallLANProxy: "lan-proxy",
		FirewallFailOpen: "fail-open", FirewallStopped: "stopped", FirewallStoppedOpen: "stopped-open", 99: "unknown"} {
		if got := m.String(); got != want {
			t.Errorf("%d: %q, want %q", int(m), got, want)
		}
	}
}
