package watchdog

import (
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// A new tunnel whose node the proxy's own urltest shows failing since the
// connect, while our probes fail too, is given up after a few seconds, not
// after the whole data-plane timeout: the next node is up in seconds.
func TestConnectGivesUpOnANodeTheProxyCannotReach(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		wd.urltest = []string{"auto"}
		s := testSettings(t) // shipped defaults: Phase2Timeout 60 s, Phase2Poll 3 s
		h := start(t, s, wd, withPairs(wd))
		h.advance(time.Minute)
		wd.set(func(w *world) { w.dead["Dallas"] = true })
		for h.logged("Health check failed on Dallas: PROXY_BROKEN (3/4)") == 0 {
			h.advance(time.Second)
		}
		// Los Angeles dies now: too few urltest errors by the rotation for
		// log health to mark it dead, so the rotation still tries it.
		wd.set(func(w *world) {
			w.dead["Los Angeles"] = true
			w.pairs["Los Angeles via auto"] = pairErr{n: 1, last: time.Now()}
		})
		var took time.Duration
		for start := time.Now(); ; {
			h.advance(time.Second)
			if st := h.w.Status(); st.State == StateHealthy && st.Node != "Dallas" {
				took = time.Since(start)
				break
			}
			if time.Since(start) > 5*time.Minute {
				t.Fatalf("not healthy on another node after 5 min\n%s", strings.Join(h.logs(), "\n"))
			}
		}
		if got, want := h.connects(), []string{"Dallas", "Los Angeles", "Chicago"}; !slices.Equal(got, want) {
			t.Errorf("connects = %q, want %q", got, want)
		}
		// The last check (up to a degraded interval), then a failed
		// connect of a few probes, not of the 60 s data-plane timeout.
		if st := h.w.Status(); st.Node != "Chicago" {
			t.Errorf("healthy on %s, want Chicago", st.Node)
		}
		if took > 30*time.Second {
			t.Errorf("healthy on Chicago %s after Los Angeles died, want well under the 60 s data-plane timeout\n%s", took, strings.Join(h.logs(), "\n"))
		}
		h.stop()
	})
}

// Without urltest evidence a failing new tunnel gets the whole data-plane
// timeout, as before: the proof alone is not given up on early.
func TestConnectWithoutUrltestEvidenceWaitsTheTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		s := testSettings(t)
		h := start(t, s, wd) // counts-only log health: no pair reporter
		h.advance(time.Minute)
		wd.set(func(w *world) { w.dead["Los Angeles"], w.dead["Dallas"] = true, true })
		for h.logged("Node rotation: Dallas -> Los Angeles") == 0 {
			h.advance(time.Second)
		}
		rotated := time.Now()
		for h.w.Status().State != StateHealthy || h.w.Status().Node == "Los Angeles" {
			h.advance(time.Second)
		}
		// Los Angeles twice (a retry: nothing blames the node), each
		// waiting out the data-plane timeout.
		if got, want := h.connects(), []string{"Dallas", "Los Angeles", "Los Angeles", "Chicago"}; !slices.Equal(got, want) {
			t.Errorf("connects = %q, want %q", got, want)
		}
		if took := time.Since(rotated); took < 2*s.Phase2Timeout {
			t.Errorf("Chicago healthy %s after the rotation, want two whole data-plane timeouts (%s)", took, 2*s.Phase2Timeout)
		}
		h.stop()
	})
}
