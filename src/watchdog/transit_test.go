package watchdog

import (
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// blackholeTokyo: from now the Tokyo relay drops everything, so tunnels
// via Tokyo and via auto (which tries Tokyo first) carry nothing.
func blackholeTokyo(h *harness) {
	h.advance(time.Minute)
	h.world.set(func(w *world) { w.badTransit["Tokyo"], w.badTransit["auto"] = true, true })
	h.advance(80 * time.Second)
}

// The relay, not the node, is broken: log health shows every node failing
// via Tokyo and auto and none via Singapore. The watchdog switches transit
// on the same node instead of burning through the candidates.
func TestTransitSwitchBeforeRotating(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		wd.urltest = []string{"Tokyo", "Singapore", "auto"}
		s := testSettings(t)
		s.Transits = []string{"Tokyo", "Singapore"}
		h := start(t, s, wd, withPairs(wd))
		blackholeTokyo(h)

		if got := h.connects(); !slices.Equal(got, []string{"Dallas", "Dallas"}) {
			t.Errorf("connects = %q, want Dallas again (via another transit)", got)
		}
		if got := wd.get().transit; got != "Singapore" {
			t.Errorf("vendor transit = %q, want Singapore", got)
		}
		if h.logged("Transit switch: Dallas via auto -> Dallas via Singapore") != 1 {
			t.Errorf("switch not logged:\n%s", strings.Join(h.logs(), "\n"))
		}
		st := h.w.Status()
		if st.State != StateHealthy || st.Node != "Dallas" || st.Transit != "Singapore" {
			t.Errorf("status %s on %s via %s, want healthy on Dallas via Singapore", st.State, st.Node, st.Transit)
		}
		if st.Counters.TransitSwitches != 1 || st.Counters.Rotations != 0 {
			t.Errorf("transit switches %d rotations %d, want 1 and 0", st.Counters.TransitSwitches, st.Counters.Rotations)
		}

		// A later node failure rotates on the transit that works.
		wd.set(func(w *world) { w.dead["Dallas"] = true })
		h.advance(3 * time.Minute)
		if got := h.connects(); !slices.Equal(got, []string{"Dallas", "Dallas", "Los Angeles"}) {
			t.Errorf("connects = %q, want a rotation to Los Angeles", got)
		}
		if got := wd.get().transit; got != "Singapore" {
			t.Errorf("vendor transit after the rotation = %q, want Singapore kept", got)
		}
		h.requireState(StateHealthy)
		h.stop()
	})
}

// Without a configured list the transits are learned from log health: a
// node that went down made every transit to it fail, so Singapore is known.
func TestTransitLearnedFromLogHealth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		wd.urltest = []string{"Tokyo", "Singapore", "auto"}
		wd.dead["Miami"] = true // every transit fails for Miami
		h := start(t, testSettings(t), wd, withPairs(wd))
		blackholeTokyo(h)
		if got := wd.get().transit; got != "Singapore" {
			t.Errorf("vendor transit = %q, want Singapore (learned); logs:\n%s", got, strings.Join(h.logs(), "\n"))
		}
		h.requireState(StateHealthy)
		h.stop()
	})
}

// A node failure with clean transits is a node failure: no switch.
func TestNoTransitSwitchForANodeFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		wd.urltest = []string{"Tokyo", "Singapore", "auto"}
		s := testSettings(t)
		s.Transits = []string{"Tokyo", "Singapore"}
		h := start(t, s, wd, withPairs(wd))
		failDallas(h) // Dallas fails via every transit
		if got := h.connects(); !slices.Equal(got, []string{"Dallas", "Los Angeles"}) {
			t.Errorf("connects = %q, want a plain rotation", got)
		}
		if h.logged("Transit switch") != 0 {
			t.Errorf("transit switched for a dead node:\n%s", strings.Join(h.logs(), "\n"))
		}
		h.stop()
	})
}
