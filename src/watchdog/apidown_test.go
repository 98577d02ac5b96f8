package watchdog

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"surflare-watchdog/src/surflare"
)

// The account API is down while the watchdog must leave a dead node: the
// connect to the next candidate fails with "Account check failed". That
// says nothing about the node, so the watchdog stays on it and retries
// after 3, 6, 12 s instead of walking through the candidates.
func TestAccountAPIDownRetriesSameNodeWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		h := start(t, testSettings(t), wd)
		api := errors.Join(surflare.ErrAccountCheck, errors.New("✘ Account check failed — Could not verify account status. Check network."))
		wd.set(func(w *world) { w.connectErr["Los Angeles"] = []error{api, api, api} })
		failDallas(h)
		h.advance(30 * time.Second)

		want := []string{"Dallas", "Los Angeles", "Los Angeles", "Los Angeles", "Los Angeles"}
		if got := h.connects(); !slices.Equal(got, want) {
			t.Errorf("connects = %q, want %q (no rotation while the account API is down)", got, want)
		}
		for _, d := range []string{"3s", "6s", "12s"} {
			if h.logged("Account API unreachable: retrying Los Angeles in "+d) != 1 {
				t.Errorf("no %q retry line:\n%s", d, strings.Join(h.logs(), "\n"))
			}
		}
		at := wd.get().connectAt
		if len(at) == len(want) {
			var gaps []time.Duration
			for i := 2; i < len(at); i++ {
				gaps = append(gaps, (at[i] - at[i-1]).Round(time.Second))
			}
			if !slices.Equal(gaps, []time.Duration{3 * time.Second, 6 * time.Second, 12 * time.Second}) {
				t.Errorf("retry gaps = %v, want [3s 6s 12s]", gaps)
			}
		}
		st := h.w.Status()
		if st.State != StateHealthy || st.Node != "Los Angeles" {
			t.Errorf("state %s on %s, want healthy on Los Angeles", st.State, st.Node)
		}
		if st.Counters.Rotations != 1 || st.Counters.Storms != 0 {
			t.Errorf("rotations %d storms %d, want 1 and 0", st.Counters.Rotations, st.Counters.Storms)
		}
		if !slices.Contains(wd.get().calls, "fw.Set kill-switch") || wd.count("fw.Set stopped") != 0 || wd.count("fw.Set fail-open") != 0 {
			t.Errorf("the kill switch must hold during the retries: %q", wd.get().calls)
		}
		h.stop()
	})
}
