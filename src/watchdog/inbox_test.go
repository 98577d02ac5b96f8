package watchdog

import (
	"testing"
	"testing/synctest"
	"time"
)

// A request never blocks the detector that makes it: one waits in the
// inbox, and the ones after it are covered by it.
func TestInboxNeverBlocks(t *testing.T) {
	i := NewInbox()
	if !i.RequestCheck("first") {
		t.Fatal("the first request was refused")
	}
	if i.RequestCheck("second") {
		t.Error("a second request was queued behind the first; it should be covered by it")
	}
	if r := <-i.requests(); r.Reason != "first" {
		t.Errorf("the engine got %q, want the first request", r.Reason)
	}
	if !i.RequestCheck("third") {
		t.Error("a request after the engine took the last one was refused")
	}
	var none *Inbox
	if none.RequestCheck("x") || none.requests() != nil {
		t.Error("a nil inbox must refuse quietly and never be ready")
	}
}

// The detectors ask through the inbox, made before the engine; the engine
// alone decides: a request while it supervises a healthy tunnel starts a
// check at once (long before the next scheduled one), a request during a
// storm cooldown starts nothing.
func TestInboxRequestStartsACheckOnlyWhileSupervising(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		s := testSettings(t)
		s.Candidates = []string{"Dallas", "Miami"}
		inbox := NewInbox()
		h := start(t, s, wd, func(d *Deps) { d.Inbox = inbox })
		h.advance(time.Second)
		h.requireState(StateHealthy)

		checks := wd.get().checks
		inbox.RequestCheck("early detector: test")
		h.advance(time.Second) // a check takes 200 ms; the next scheduled one is CheckInterval away
		if got := wd.get().checks; got != checks+1 {
			t.Fatalf("checks %d -> %d after a request while healthy, want one more", checks, got)
		}

		wd.set(func(w *world) { w.dead["Dallas"], w.dead["Miami"] = true, true })
		h.advance(6 * time.Minute)
		h.requireState(StateCooldown)
		checks = wd.get().checks
		n := len(h.connects())
		inbox.RequestCheck("503 storm: test")
		h.advance(time.Second)
		if got := wd.get().checks; got != checks || len(h.connects()) != n {
			t.Errorf("a request during the cooldown acted: checks %d -> %d, connects %q", checks, got, h.connects())
		}
		h.requireState(StateCooldown)
		h.stop()
	})
}
