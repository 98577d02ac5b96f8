package watchdog

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// fakeOverride is a 503 storm that is on while active is set.
type fakeOverride struct{ active *atomic.Bool }

func (o fakeOverride) Override(time.Time) (string, bool) {
	return "12 urltest 503s in 300s", o.active.Load()
}

func TestStorm503OverrideReconnectsDespitePassingProbes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		s := testSettings(t)
		var active atomic.Bool
		h := start(t, s, wd, func(d *Deps) { d.Override = fakeOverride{&active} })
		h.requireState(StateHealthy)
		if got := h.connects(); len(got) != 1 {
			t.Fatalf("connects before the storm = %q", got)
		}

		// Storm on: the next check passes its probes, yet the watchdog
		// logs the override and reconnects on the same node.
		active.Store(true)
		h.advance(s.CheckInterval + time.Second)
		if n := h.logged("G2: 503 storm override"); n < 1 {
			t.Errorf("override not logged; logs:\n%q", h.logs())
		}
		got := h.connects()
		if len(got) < 2 || got[1] != "Dallas" {
			t.Errorf("connects = %q, want a reconnect to Dallas", got)
		}

		// Storm over: checks are healthy again and nothing else reconnects.
		// (A storm that outlives the reconnect rotates: see below.)
		active.Store(false)
		h.advance(2 * s.CheckInterval)
		n := len(h.connects())
		h.advance(3 * s.CheckInterval)
		if m := len(h.connects()); m != n {
			t.Errorf("connects went from %d to %d after the storm ended", n, m)
		}
		h.requireState(StateHealthy)
		h.stop()
	})
}

// A storm that outlives the override's reconnect belongs to the node: the
// next override rotates instead of reconnecting the same node forever.
func TestStorm503OverridePersistingRotates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		s := testSettings(t)
		var active atomic.Bool
		h := start(t, s, wd, func(d *Deps) { d.Override = fakeOverride{&active} })
		h.requireState(StateHealthy)
		active.Store(true)
		for i := 0; i < 4 && len(h.connects()) < 3; i++ {
			h.advance(s.CheckInterval + time.Second)
		}
		got := h.connects()
		if len(got) < 3 || got[1] != "Dallas" || got[2] == "Dallas" {
			t.Fatalf("connects = %q, want Dallas, a reconnect to Dallas, then another node", got)
		}
		if h.logged("persists after a reconnect; rotating") < 1 {
			t.Errorf("rotation not explained; logs:\n%q", h.logs())
		}
		active.Store(false)
		h.stop()
	})
}
