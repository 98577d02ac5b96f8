package daemon

import (
	"strings"
	"testing"
	"time"

	"surflare-watchdog/src/detectors"
)

// The burst that asks for the check also corroborates its failure, so a
// connfail-detected node-down rotates on the first failed check; one dead
// website, another node's failures, an old burst or one from before the
// node came back never do.
func TestConnFailCorroboratesABurstAgainstTheNodeInUse(t *testing.T) {
	node := "Dallas"
	w, _, now := newTestConnFail(t, &node)
	if why, ok := w.Corroborate(*now, "Dallas", "auto"); ok {
		t.Fatalf("nothing read yet, yet corroborated: %s", why)
	}
	w.observe(failLine112("Dallas", "a.example:443"))
	w.observe(failLine112("Dallas", "b.example:443"))
	if why, ok := w.Corroborate(*now, "Dallas", "auto"); ok {
		t.Fatalf("two failures are below the burst (%d), yet corroborated: %s", connFailMin, why)
	}
	w.observe(failLine111("198.18.30.1:443"))
	why, ok := w.Corroborate(*now, "Dallas", "auto")
	if !ok || !strings.Contains(why, "CONN_FAIL: 3 LAN connections to 3 destinations failed via Dallas") {
		t.Fatalf("a burst to 3 destinations: corroborated=%v %q", ok, why)
	}
	// The engine asks through AnyEvidence, as daemon.corroborator wires it.
	if _, ok := (detectors.AnyEvidence{w}).Corroborate(*now, "Dallas", "auto"); !ok {
		t.Fatal("not corroborated through AnyEvidence")
	}
	if why, ok := w.Corroborate(*now, "Chicago", "auto"); ok {
		t.Fatalf("Dallas' burst names Chicago broken: %s", why)
	}
	if why, ok := w.Corroborate(now.Add(connFailWindow+time.Second), "Dallas", "auto"); ok {
		t.Fatalf("a burst older than %s still corroborates: %s", connFailWindow, why)
	}
}

func TestConnFailEvidenceIgnoresOneDeadSiteAndANodeWeCameBackTo(t *testing.T) {
	node := "Dallas"
	w, _, now := newTestConnFail(t, &node)
	for range 10 {
		w.observe(failLine112("Dallas", "dead.example:443"))
	}
	if why, ok := w.Corroborate(*now, "Dallas", "auto"); ok {
		t.Fatalf("one dead website corroborates: %s", why)
	}
	for _, d := range []string{"a:443", "b:443", "c:443"} {
		w.observe(failLine112("Dallas", d))
	}
	if _, ok := w.Corroborate(*now, "Dallas", "auto"); !ok {
		t.Fatal("Dallas failing to 4 destinations does not corroborate")
	}
	// Rotated to Chicago, and back to Dallas within the window before any
	// new line: Dallas' failures were judged when they happened.
	node = "Chicago"
	w.observe(failLine112("Chicago", "x.example:443")) // the watch learns the node change from a line
	node = "Dallas"
	if why, ok := w.Corroborate(*now, "Dallas", "auto"); ok {
		t.Fatalf("Dallas' old burst corroborates after the node changed: %s", why)
	}
}

// The check's own probes go through the proxy too, and their failures are
// logged like any LAN connection's: as of the check's start they do not
// count, so one failed check is never its own evidence.
func TestConnFailEvidenceAsOfTheCheckStart(t *testing.T) {
	node := "Dallas"
	w, _, now := newTestConnFail(t, &node)
	w.observe(failLine112("Dallas", "a.example:443")) // a LAN failure before the check
	checkStart := *now
	*now = now.Add(200 * time.Millisecond)
	w.observe(failLine112("Dallas", "198.18.30.21:80")) // the check's probes
	w.observe(failLine112("Dallas", "198.18.30.1:80"))
	w.observe(failLine112("Dallas", "198.18.31.1:80"))
	if _, ok := w.Corroborate(*now, "Dallas", "auto"); !ok {
		t.Fatal("as of now, 4 failures to 4 destinations do not corroborate")
	}
	if why, ok := w.CorroborateAsOf(checkStart, *now, "Dallas", "auto"); ok {
		t.Fatalf("the check's own failures corroborate it: %s", why)
	}
	w.observe(failLine112("Dallas", "b.example:443"))
	w.observe(failLine112("Dallas", "c.example:443"))
	if _, ok := w.CorroborateAsOf(*now, *now, "Dallas", "auto"); !ok {
		t.Fatal("a burst before the next check's start does not corroborate it")
	}
}

// An idle probe's miss on the node in use is evidence for the confirming
// check it asks for, not for one that started before it, nor for another
// node, nor once it is old.
func TestIdleMissEvidence(t *testing.T) {
	e := &idleMissEvidence{}
	t0 := time.Unix(5000, 0)
	if _, ok := e.Corroborate(t0, "Dallas", "auto"); ok {
		t.Fatal("no miss yet, yet evidence")
	}
	e.record(t0, "Dallas", "search: i/o timeout")
	if why, ok := e.CorroborateAsOf(t0.Add(time.Millisecond), t0.Add(2*time.Second), "Dallas", "auto"); !ok || !strings.Contains(why, "IDLE_PROBE: no answer through the idle tunnel on Dallas") {
		t.Fatalf("the confirming check after the miss: %v %q", ok, why)
	}
	if _, ok := e.CorroborateAsOf(t0.Add(-time.Second), t0.Add(time.Second), "Dallas", "auto"); ok {
		t.Error("a check that started before the miss is corroborated by it")
	}
	if _, ok := e.Corroborate(t0.Add(time.Second), "Los Angeles", "auto"); ok {
		t.Error("Dallas's miss names Los Angeles")
	}
	if _, ok := e.Corroborate(t0.Add(idleMissMemory+time.Second), "Dallas", "auto"); ok {
		t.Error("an old miss is still evidence")
	}
}
