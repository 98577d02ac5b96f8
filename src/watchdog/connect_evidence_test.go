package watchdog

import (
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// nodeEvidence names the nodes in dead broken, as the daemon's
// corroborator does for a node whose connections fail while it is in use.
type nodeEvidence struct {
	wd    *world
	asked *atomic.Int32
}

func (c nodeEvidence) Corroborate(_ time.Time, node, _ string) (string, bool) {
	c.asked.Add(1)
	c.wd.mu.Lock()
	defer c.wd.mu.Unlock()
	if c.wd.dead[node] {
		return "CONN_FAIL: 4 LAN connections to 3 destinations failed via " + node, true
	}
	return "", false
}

// A rotation onto a node that is dead too: the connect's data-plane proof
// gives up after two failed probes when the evidence names the node, and
// the engine moves on at once, with no urltest line at all (the vendor's
// cadence may be 3 min). Without evidence the proof waits Phase2Timeout
// and the same node is retried after degraded_interval, as before.
func TestDeadNextNodeIsLeftOnEvidence(t *testing.T) {
	for _, tc := range []struct {
		name     string
		evidence bool
	}{{"evidence", true}, {"no evidence", false}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				wd := newWorld()
				s := testSettings(t)
				s.Phase2Timeout, s.Phase2Poll = 60*time.Second, time.Second
				var asked atomic.Int32
				tweak := func(*Deps) {}
				if tc.evidence {
					tweak = func(d *Deps) { d.Corroborator = nodeEvidence{wd, &asked} }
				}
				h := start(t, s, wd, tweak)
				h.requireState(StateHealthy)
				h.advance(time.Minute)
				wd.set(func(w *world) { w.dead["Dallas"], w.dead["Los Angeles"] = true, true })
				for range s.FailThreshold { // enough failed checks to rotate with or without evidence
					if len(h.connects()) >= 2 {
						break // corroborated: rotated on the first
					}
					if err := h.w.Check(t.Context()); err != nil {
						t.Fatal(err)
					}
					h.advance(time.Second)
				}
				if got := h.connects(); len(got) < 2 || got[1] != "Los Angeles" {
					t.Fatalf("no rotation to Los Angeles: %q\n%s", got, strings.Join(h.logs(), "\n"))
				}
				h.advance(10 * time.Second)
				got := h.connects()
				reachedChicago := len(got) >= 3 && got[2] == "Chicago"
				if reachedChicago != tc.evidence {
					t.Fatalf("connects %q 10 s after the rotation onto a dead Los Angeles (evidence %v); want Chicago reached: %v\n%s",
						got, tc.evidence, tc.evidence, strings.Join(h.logs(), "\n"))
				}
				if tc.evidence {
					if h.logged("Cascade: Los Angeles via auto failed its probes with evidence against it; fast-rotating") != 1 {
						t.Errorf("no evidence cascade logged:\n%s", strings.Join(h.logs(), "\n"))
					}
					h.advance(5 * time.Second)
					h.requireState(StateHealthy)
				}
				h.stop()
			})
		})
	}
}

// checkFedEvidence is evidence the check itself feeds, as the proxy's
// failed-connection log is fed by the check's own probes: Corroborate (as
// of now) always names Dallas; as of the check's start only once evidence
// came before it.
type checkFedEvidence struct{ before *atomic.Bool }

func (c checkFedEvidence) Corroborate(time.Time, string, string) (string, bool) {
	return "CONN_FAIL: the check's own probes failed", true
}

func (c checkFedEvidence) CorroborateAsOf(_, _ time.Time, node, _ string) (string, bool) {
	if node == "Dallas" && c.before.Load() {
		return "CONN_FAIL: LAN connections failed before the check", true
	}
	return "", false
}

// One failed check never corroborates itself: evidence that only the
// check's own probes produced (the proxy logs them too) leaves the
// threshold in charge; evidence from before the check rotates at once.
func TestFailedCheckIsNotItsOwnEvidence(t *testing.T) {
	for _, before := range []bool{false, true} {
		t.Run(map[bool]string{false: "only the check's own", true: "from before the check"}[before], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				wd := newWorld()
				s := testSettings(t)
				var b atomic.Bool
				b.Store(before)
				h := start(t, s, wd, func(d *Deps) { d.Corroborator = checkFedEvidence{&b} })
				h.requireState(StateHealthy)
				h.advance(time.Minute)
				wd.set(func(w *world) { w.dead["Dallas"] = true })
				if err := h.w.Check(t.Context()); err != nil {
					t.Fatal(err)
				}
				h.advance(time.Second)
				got := h.connects()
				if rotated := len(got) >= 2; rotated != before {
					t.Fatalf("connects %q after one failed check (evidence from before it: %v)\n%s", got, before, strings.Join(h.logs(), "\n"))
				}
				h.stop()
			})
		})
	}
}
