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
