package fastsignal

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"surflare-watchdog/src/detectors/loghealth"
)

var labNodes = []string{"Dallas", "Los Angeles", "Chicago", "New York", "Atlanta", "Miami"}

// newTestLogWatch watches Dallas via transit and records the triggers.
func newTestLogWatch(t *testing.T, transit string) (*LogWatch, *[]string) {
	t.Helper()
	var fired []string
	w, err := NewLogWatch(LogOptions{
		Current: func() (string, string) { return "Dallas", transit },
		Nodes:   labNodes,
		Trigger: func(r string) { fired = append(fired, r) },
	})
	if err != nil {
		t.Fatal(err)
	}
	return w, &fired
}

func line(node, transit string) loghealth.Line {
	return loghealth.Line{Node: node, Transit: transit, Error: "context deadline exceeded"}
}

// A node-down round: the current node fails via every transit while the
// others pass. The first line alone is not enough; the second pair makes
// the node broken, triggers one check and corroborates.
func TestLogWatchNodeDownRoundTriggersAndCorroborates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, fired := newTestLogWatch(t, "auto")
		w.Observe(line("Dallas", "Tokyo"))
		if len(*fired) != 0 {
			t.Fatalf("one failed pair (could be the relay) triggered: %v", *fired)
		}
		w.Observe(line("Dallas", "auto"))
		w.Observe(line("Dallas", "Singapore"))
		if len(*fired) != 1 || !strings.HasPrefix((*fired)[0], "LOG_HEALTH_FAST: ") {
			t.Fatalf("triggers = %q, want exactly one LOG_HEALTH_FAST", *fired)
		}
		why, broken := w.NodeBroken("Dallas", "auto")
		if !broken || !strings.Contains(why, "Dallas via Singapore, Tokyo, auto") {
			t.Fatalf("NodeBroken = %q, %v; want broken naming the pairs", why, broken)
		}
		// The evidence is short-lived: after the window it is gone.
		time.Sleep(DefaultLogWindow + time.Second)
		if why, broken := w.NodeBroken("Dallas", "auto"); broken {
			t.Fatalf("still broken after the window: %s", why)
		}
	})
}

// A dead relay makes every node fail via it (and via auto, which tries it
// first): that is not the node's fault and must not corroborate a rotation.
func TestLogWatchRelayFaultIsNotTheNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, fired := newTestLogWatch(t, "auto")
		for _, n := range labNodes {
			w.Observe(line(n, "Tokyo"))
			w.Observe(line(n, "auto"))
		}
		if why, broken := w.NodeBroken("Dallas", "auto"); broken {
			t.Fatalf("relay fault blamed on the node: %s", why)
		}
		// The check it may have asked for is harmless, but there must be no
		// corroboration; and once the others are known clean, no trigger.
		if len(*fired) > 1 {
			t.Fatalf("triggers = %q", *fired)
		}
	})
}

// The current pair must be among the failures: Dallas failing via two
// relays the tunnel does not use says nothing about the tunnel.
func TestLogWatchCurrentPairRequired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, fired := newTestLogWatch(t, "Singapore")
		w.Observe(line("Dallas", "Tokyo"))
		w.Observe(line("Dallas", "auto"))
		if _, broken := w.NodeBroken("Dallas", "Singapore"); broken || len(*fired) != 0 {
			t.Fatalf("broken=%v triggers=%q without an error on Dallas via Singapore", broken, *fired)
		}
		w.Observe(line("Dallas", "Singapore"))
		if _, broken := w.NodeBroken("Dallas", "Singapore"); !broken || len(*fired) != 1 {
			t.Fatalf("broken=%v triggers=%q after Dallas via Singapore failed too", broken, *fired)
		}
	})
}

// Old lines (the tail read at start-up) are not evidence; errors of other
// nodes never trigger; triggers are at most one per gap.
func TestLogWatchOldLinesOtherNodesAndGap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, fired := newTestLogWatch(t, "auto")
		old := time.Now().Add(-time.Minute)
		for _, tr := range []string{"Tokyo", "auto"} {
			l := line("Dallas", tr)
			l.Time = old
			w.Observe(l)
		}
		if _, broken := w.NodeBroken("Dallas", "auto"); broken || len(*fired) != 0 {
			t.Fatalf("a minute-old round counted: broken=%v triggers=%q", broken, *fired)
		}
		w.Observe(line("Chicago", "Tokyo"))
		w.Observe(line("Chicago", "auto"))
		if len(*fired) != 0 {
			t.Fatalf("another node's errors triggered: %q", *fired)
		}
		for range 3 {
			w.Observe(line("Dallas", "Tokyo"))
			w.Observe(line("Dallas", "auto"))
			time.Sleep(time.Second)
		}
		if len(*fired) != 1 {
			t.Fatalf("triggers within the gap = %d, want 1", len(*fired))
		}
		time.Sleep(DefaultTriggerGap)
		w.Observe(line("Dallas", "Tokyo"))
		w.Observe(line("Dallas", "auto"))
		if len(*fired) != 2 {
			t.Fatalf("triggers after the gap = %d, want 2", len(*fired))
		}
	})
}

func line503(node, transit string) loghealth.Line {
	return loghealth.Line{Node: node, Transit: transit, Error: "unexpected status: 503 Service Unavailable"}
}

// One urltest round of 503s from the current node via two relays is an
// overloaded exit (Node503); timeouts are not 503s, one relay is not
// enough, and 503s from most nodes are the urltest target's, not the
// node's.
func TestLogWatchNode503ByBreadth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, _ := newTestLogWatch(t, "auto")
		w.Observe(line("Dallas", "Tokyo"))
		w.Observe(line("Dallas", "auto"))
		if why, ok := w.Node503("Dallas"); ok {
			t.Fatalf("timeouts counted as 503: %s", why)
		}
		w.Observe(line503("Dallas", "Tokyo"))
		if _, ok := w.Node503("Dallas"); ok {
			t.Fatal("one relay's 503 made the node overloaded")
		}
		w.Observe(line503("Dallas", "auto"))
		why, ok := w.Node503("Dallas")
		if !ok || !strings.Contains(why, "Dallas via Tokyo, auto") {
			t.Fatalf("Node503 = %q, %v after 503s via two relays", why, ok)
		}
		if _, ok := w.Node503("Chicago"); ok {
			t.Fatal("Dallas's 503s named Chicago")
		}
		time.Sleep(DefaultLogWindow + time.Second)
		if _, ok := w.Node503("Dallas"); ok {
			t.Fatal("503 evidence outlived the window")
		}

		for _, n := range labNodes[1:4] {
			w.Observe(line503(n, "auto"))
		}
		w.Observe(line503("Dallas", "Tokyo"))
		w.Observe(line503("Dallas", "auto"))
		if why, ok := w.Node503("Dallas"); ok {
			t.Fatalf("503s from 3 of 5 other nodes still blamed Dallas: %s", why)
		}
	})
}

// After NewTunnel the next broken verdict triggers at once instead of
// waiting out the trigger gap (a G2 reconnect is judged by the new proxy's
// first urltest round).
func TestLogWatchNewTunnelResetsTheGap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, fired := newTestLogWatch(t, "auto")
		w.Observe(line503("Dallas", "Tokyo"))
		w.Observe(line503("Dallas", "auto"))
		time.Sleep(time.Second)
		w.Observe(line503("Dallas", "Singapore"))
		if len(*fired) != 1 {
			t.Fatalf("triggers = %q, want one within the gap", *fired)
		}
		w.NewTunnel()
		w.Observe(line503("Dallas", "auto"))
		if len(*fired) != 2 {
			t.Fatalf("triggers = %q after NewTunnel, want a second at once", *fired)
		}
	})
}
