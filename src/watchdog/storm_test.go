package watchdog

import (
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// After a storm cooldown the node that came back still has its
// pre-cooldown urltest errors in the window. They no longer count: the new
// cycle skips only nodes failing again since the cooldown started, and a
// first connect the proxy's urltest shows failing is not retried.
func TestAfterStormOnlyNewLogErrorsCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		wd.urltest = []string{"auto"}
		s := testSettings(t)
		s.ReconnectLimit = 100 // this test is about the storm alone
		// A data-plane proof shorter than a urltest round (as in the
		// lab): only the round at proxy start can show the node failing,
		// and its log line carries whole seconds.
		s.Phase2Timeout, s.Phase2Poll = 4*time.Second, time.Second
		h := start(t, s, wd, withPairs(wd))
		h.advance(time.Minute)
		wd.set(func(w *world) {
			for _, n := range s.Candidates {
				w.dead[n] = true
			}
		})
		h.advance(10 * time.Minute)
		h.requireState(StateCooldown)
		if st := h.w.Status(); !st.Candidates[2].Dead {
			t.Errorf("Chicago not dead by log health before the cooldown: %+v", st.Candidates)
		}
		wd.set(func(w *world) { w.dead["Chicago"] = false })
		n := len(h.connects())
		until := *h.w.Status().Conditions.StormCooldownUntil
		for h.w.Status().State != StateHealthy && time.Since(until) < 10*time.Minute {
			h.advance(time.Second)
		}
		took := time.Since(until)
		h.requireState(StateHealthy)
		after := h.connects()[n:]
		// Dallas first (nothing failed since the cooldown), its connect
		// shows it failing, so straight to Chicago: Los Angeles is failing
		// again, Chicago is silent.
		if want := []string{"Dallas", "Chicago"}; !slices.Equal(after, want) {
			t.Errorf("connects after the cooldown = %q, want %q\n%s", after, want, strings.Join(h.logs(), "\n"))
		}
		// One failed data-plane proof (4 s) and one connect.
		if took > 6*time.Second {
			t.Errorf("traffic back %s after the cooldown, want about one failed connect (4 s)", took)
		}
		if h.logged("Cascade: log health shows Dallas via auto failing since the connect") != 1 {
			t.Errorf("no log-health cascade:\n%s", strings.Join(h.logs(), "\n"))
		}
		h.stop()
	})
}

// The fresh cycle after a cooldown may start on the last candidate when
// it is the only one not failing since the cooldown started.
func TestAfterStormStartsOnTheOnlyCleanNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		wd.urltest = []string{"auto"}
		s := testSettings(t)
		s.Candidates = []string{"Dallas", "Miami"}
		h := start(t, s, wd, withPairs(wd))
		h.advance(time.Minute)
		wd.set(func(w *world) { w.dead["Dallas"], w.dead["Miami"] = true, true })
		h.advance(6 * time.Minute)
		h.requireState(StateCooldown)
		// Miami comes back; Dallas keeps failing, and a proxy (someone
		// else's test, say) logs it during the cooldown.
		wd.set(func(w *world) {
			w.dead["Miami"] = false
			w.pairs["Dallas via auto"] = pairErr{n: 99, last: time.Now().Add(time.Minute)}
		})
		n := len(h.connects())
		h.advance(10 * time.Minute)
		if got := h.connects()[n:]; len(got) == 0 || got[0] != "Miami" {
			t.Errorf("first connect after the cooldown = %q, want Miami\n%s", got, strings.Join(h.logs(), "\n"))
		}
		h.requireState(StateHealthy)
		h.stop()
	})
}
