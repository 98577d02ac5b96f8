package watchdog

import (
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// fakeCorroborator names Dallas broken while broken is set, and records
// what it was asked.
type fakeCorroborator struct {
	broken *atomic.Bool
	asked  *atomic.Int32
}

func (c fakeCorroborator) Corroborate(_ time.Time, node, transit string) (string, bool) {
	c.asked.Add(1)
	if node == "Dallas" && transit == "auto" && c.broken.Load() {
		return "urltest failed for Dallas via Tokyo, auto", true
	}
	return "", false
}

// A failed check with corroborating evidence rotates at once; the same
// failure without it waits for the threshold, as before.
func TestCorroboratedFailureRotatesAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name       string
		evidence   bool
		wantRotate bool
	}{
		{"corroborated", true, true},
		{"uncorroborated", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				wd := newWorld()
				s := testSettings(t)
				var broken atomic.Bool
				var asked atomic.Int32
				broken.Store(tc.evidence)
				h := start(t, s, wd, func(d *Deps) { d.Corroborator = fakeCorroborator{&broken, &asked} })
				h.requireState(StateHealthy)
				h.advance(time.Minute)
				wd.set(func(w *world) { w.dead["Dallas"] = true })
				if err := h.w.Check(t.Context()); err != nil {
					t.Fatal(err)
				}
				h.advance(time.Second) // one check, far below the threshold's 4
				got := h.connects()
				rotated := len(got) >= 2 && got[1] == "Los Angeles"
				if rotated != tc.wantRotate {
					t.Fatalf("connects = %q after one failed check (evidence %v); want rotation %v\n%s",
						got, tc.evidence, tc.wantRotate, strings.Join(h.logs(), "\n"))
				}
				if asked.Load() == 0 {
					t.Fatal("the corroborator was never asked")
				}
				if tc.wantRotate {
					if h.logged("Fast recovery: failed check on Dallas corroborated (urltest failed for Dallas via Tokyo, auto)") != 1 {
						t.Errorf("fast recovery not logged:\n%s", strings.Join(h.logs(), "\n"))
					}
					h.advance(5 * time.Second)
					h.requireState(StateHealthy)
				} else {
					h.requireState(StateDegraded)
				}
				h.stop()
			})
		})
	}
}

// Evidence alone (no failed check) never rotates: checks started while
// the evidence names the node are confirming ones, and a working tunnel
// passes them.
func TestEvidenceAloneNeverRotates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		s := testSettings(t)
		var broken atomic.Bool
		var asked atomic.Int32
		broken.Store(true)
		h := start(t, s, wd, func(d *Deps) { d.Corroborator = fakeCorroborator{&broken, &asked} })
		h.requireState(StateHealthy)
		for range 5 {
			h.w.Check(t.Context())
			h.advance(s.CheckInterval)
		}
		if got := h.connects(); len(got) != 1 {
			t.Fatalf("connects = %q with healthy checks and evidence, want only the first", got)
		}
		if n := h.logged("Confirming check on Dallas"); n == 0 {
			t.Errorf("no confirming check logged while the evidence named Dallas:\n%s", strings.Join(h.logs(), "\n"))
		}
		h.requireState(StateHealthy)
		h.stop()
	})
}

// A black-holed node (probes hang until their timeout) is confirmed by a
// check bounded by ConfirmProbeTimeout when evidence names it, so the
// rotation comes after ~2 s instead of the 5 s probe timeout; without
// evidence the check waits the full timeout and counts one failure.
func TestConfirmingCheckIsBoundedByConfirmTimeout(t *testing.T) {
	for _, tc := range []struct {
		name     string
		evidence bool
	}{{"evidence", true}, {"no evidence", false}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				wd := newWorld()
				s := testSettings(t)
				var broken atomic.Bool
				var asked atomic.Int32
				broken.Store(tc.evidence)
				h := start(t, s, wd, func(d *Deps) { d.Corroborator = fakeCorroborator{&broken, &asked} })
				h.requireState(StateHealthy)
				h.advance(time.Minute)
				wd.set(func(w *world) { w.blackhole["Dallas"] = true })
				if err := h.w.Check(t.Context()); err != nil {
					t.Fatal(err)
				}
				h.advance(s.ConfirmProbeTimeout + 500*time.Millisecond)
				got := h.connects()
				rotated := len(got) >= 2 && got[1] == "Los Angeles"
				if rotated != tc.evidence {
					t.Fatalf("%s after the confirm timeout: connects = %q, want rotation %v\n%s",
						s.ConfirmProbeTimeout+500*time.Millisecond, got, tc.evidence, strings.Join(h.logs(), "\n"))
				}
				if !tc.evidence {
					h.requireState(StateHealthy) // the 5 s check is still running
					h.advance(fakeProbeTimeout)
					h.requireState(StateDegraded)
				}
				h.stop()
			})
		})
	}
}

// A check that started before the evidence (the early detector asks for
// one on its first sight of unanswered flows) becomes a confirming one when
// a request arrives with the evidence: its probes end ConfirmProbeTimeout
// after its own start, and the failure rotates then. The old rule ignored
// a request while a check ran, so that check waited the full probe
// timeout. Without evidence the request changes nothing.
func TestCheckInFlightBecomesConfirming(t *testing.T) {
	for _, tc := range []struct {
		name     string
		evidence bool
	}{{"evidence", true}, {"no evidence", false}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				wd := newWorld()
				s := testSettings(t)
				var broken atomic.Bool
				var asked atomic.Int32
				inbox := NewInbox()
				h := start(t, s, wd, func(d *Deps) {
					d.Corroborator = fakeCorroborator{&broken, &asked}
					d.Inbox = inbox
				})
				h.requireState(StateHealthy)
				h.advance(time.Minute)
				wd.set(func(w *world) { w.blackhole["Dallas"] = true })
				inbox.RequestCheck("suspect: flows waiting") // no evidence yet: an ordinary check
				h.advance(1500 * time.Millisecond)
				if n := h.logged("Confirming check on Dallas"); n != 0 {
					t.Fatalf("the first check was a confirming one without evidence:\n%s", strings.Join(h.logs(), "\n"))
				}
				broken.Store(tc.evidence)
				inbox.RequestCheck("EARLY_WARN_TRIGGERED: silent flows") // the evidence arrives mid-check
				// 1.5 s + 0.7 s: past ConfirmProbeTimeout (2 s) from the check's start.
				h.advance(s.ConfirmProbeTimeout - 1500*time.Millisecond + 700*time.Millisecond)
				got := h.connects()
				rotated := len(got) >= 2 && got[1] == "Los Angeles"
				if rotated != tc.evidence {
					t.Fatalf("2.2 s after the check started: connects = %q, want rotation %v\n%s",
						got, tc.evidence, strings.Join(h.logs(), "\n"))
				}
				if tc.evidence {
					if h.logged("Check on Dallas in flight becomes a confirming one") != 1 {
						t.Errorf("promotion not logged:\n%s", strings.Join(h.logs(), "\n"))
					}
				} else {
					h.requireState(StateHealthy) // the 5 s check is still running
					h.advance(fakeProbeTimeout)
					h.requireState(StateDegraded)
				}
				h.stop()
			})
		})
	}
}

// midCheckEvidence is evidence that only came up while the check ran and
// that the check could have fed itself (AsOfCorroborator): named now, not
// as of the check's start.
type midCheckEvidence struct{ fed *atomic.Bool }

func (e midCheckEvidence) Corroborate(time.Time, string, string) (string, bool) {
	if e.fed.Load() {
		return "CONN_FAIL: failed connections since the check began", true
	}
	return "", false
}

func (e midCheckEvidence) CorroborateAsOf(time.Time, time.Time, string, string) (string, bool) {
	return "", false
}

// Evidence the check's own probes could have fed does not make the check
// in flight a confirming one: the promotion asks it as of the check's
// start, as the rotation would, so the check keeps its full probe timeout.
func TestCheckInFlightNotPromotedByItsOwnEvidence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		s := testSettings(t)
		var fed atomic.Bool
		inbox := NewInbox()
		h := start(t, s, wd, func(d *Deps) {
			d.Corroborator = midCheckEvidence{&fed}
			d.Inbox = inbox
		})
		h.requireState(StateHealthy)
		h.advance(time.Minute)
		wd.set(func(w *world) { w.blackhole["Dallas"] = true })
		inbox.RequestCheck("suspect: flows waiting")
		h.advance(1500 * time.Millisecond)
		fed.Store(true)
		inbox.RequestCheck("CONN_FAIL burst")
		h.advance(time.Second)
		if n := h.logged("in flight becomes a confirming one"); n != 0 {
			t.Fatalf("promoted by evidence from after the check's start:\n%s", strings.Join(h.logs(), "\n"))
		}
		h.requireState(StateHealthy) // the 5 s check is still running
		h.advance(fakeProbeTimeout)
		h.requireState(StateDegraded)
		h.stop()
	})
}
