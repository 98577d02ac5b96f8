package daemon

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"surflare-watchdog/src/config"
	"surflare-watchdog/src/watchdog"
)

func failLine112(node, dest string) string {
	return fmt.Sprintf("+0000 2026-11-29 14:03:11 ERROR [2210337101 5.8s] connection: open connection to %s using outbound/vless[%s]: dial tcp 198.18.5.7:443: i/o timeout", dest, node)
}

func failLine111(dest string) string {
	return fmt.Sprintf("+0000 2026-11-29 14:03:11 ERROR [1820334452 5.0s] inbound/tproxy[tproxy-in]: process connection from 198.18.1.10:51234: dial tcp %s: i/o timeout", dest)
}

func newTestConnFail(t *testing.T, node *string) (*connFailWatch, *[]string, *time.Time) {
	t.Helper()
	var gen uint64
	return newTestConnFailGen(t, node, &gen)
}

// newTestConnFailGen is newTestConnFail with the tunnel's generation in
// the test's hands (a same-node reconnect moves it).
func newTestConnFailGen(t *testing.T, node *string, gen *uint64) (*connFailWatch, *[]string, *time.Time) {
	t.Helper()
	c := config.Default()
	c.Main.Candidates = []string{"Dallas", "Los Angeles", "Chicago"}
	var asked []string
	w, err := newConnFailWatch(c, func() tunnelID { return tunnelID{node: *node, gen: *gen} }, func(r string) { asked = append(asked, r) })
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(5000, 0)
	w.now = func() time.Time { return now }
	return w, &asked, &now
}

func TestConnFailAsksForACheckWhenTheNodeFailsEverywhere(t *testing.T) {
	node := "Dallas"
	w, asked, now := newTestConnFail(t, &node)
	w.observe(failLine112("Dallas", "a.example:443"))
	w.observe(failLine111("198.18.30.1:443")) // the old format: the node in use
	if len(*asked) != 0 {
		t.Fatalf("two failures asked already: %v", *asked)
	}
	*now = now.Add(time.Second)
	w.observe(failLine112("Dallas", "b.example:443"))
	if len(*asked) != 1 || !strings.Contains((*asked)[0], "CONN_FAIL: 3 LAN connections to 3 destinations failed via Dallas") {
		t.Fatalf("asked %v", *asked)
	}
	w.observe(failLine112("Dallas", "c.example:443"))
	if len(*asked) != 1 {
		t.Fatalf("asked again within the gap: %v", *asked)
	}
}

func TestConnFailIgnoresOneDeadSiteAndOtherNodes(t *testing.T) {
	node := "Dallas"
	w, asked, _ := newTestConnFail(t, &node)
	for i := 0; i < 10; i++ {
		w.observe(failLine112("Dallas", "dead.example:443")) // one website down
		w.observe(failLine112("Chicago", fmt.Sprintf("h%d:443", i)))
	}
	w.observe("+0000 2026-11-29 14:03:11 ERROR [1 0.1s] connection: open connection to x:443 using outbound/vless[Dallas]: context canceled")
	if len(*asked) != 0 {
		t.Fatalf("asked for one dead site or another node's failures: %v", *asked)
	}
	// After a rotation the new node starts clean, and a vendor tag that
	// names no candidate counts for the node in use.
	node = "Chicago"
	w.observe(failLine112("proxy", "a:443"))
	w.observe(failLine112("proxy", "b:443"))
	if len(*asked) != 0 {
		t.Fatalf("Chicago's earlier failures while another node was in use must not count twice: %v", *asked)
	}
}

func resetLine111(dest string) string {
	return fmt.Sprintf("+0000 2026-11-29 14:03:11 ERROR [1820334453 0.3s] inbound/tproxy[tproxy-in]: process connection from 198.18.1.10:51240: read tcp %s: connection reset by peer", dest)
}

// A same-node reconnect for a crashed proxy is a new tunnel: the resets
// the old proxy logged before it neither ask for a check nor corroborate
// one on the fresh tunnel (the chaos log's needless Dallas -> Los Angeles
// rotation 2 s after a reconnect); failures read after it count as ever.
func TestConnFailWindowStartsCleanOnANewTunnelOnTheSameNode(t *testing.T) {
	node := "Dallas"
	var gen uint64
	w, asked, now := newTestConnFailGen(t, &node, &gen)
	w.observe(resetLine111("198.18.30.1:80"))
	w.observe(resetLine111("198.18.30.11:443"))
	if len(*asked) != 0 {
		t.Fatalf("two failures asked already: %v", *asked)
	}

	gen++ // the reconnect to Dallas finished
	*now = now.Add(2 * time.Second)
	if why, ok := w.Corroborate(*now, "Dallas", "auto"); ok {
		t.Fatalf("before any line of the new tunnel, the old proxy's failures corroborate: %s", why)
	}
	w.observe(failLine111("198.18.30.21:443"))
	if len(*asked) != 0 {
		t.Fatalf("the old proxy's failures made the new tunnel's first one a burst: %v", *asked)
	}
	if why, ok := w.Corroborate(*now, "Dallas", "auto"); ok {
		t.Fatalf("one failure of the new tunnel corroborates with the old proxy's: %s", why)
	}
	w.observe(failLine111("198.18.30.1:443"))
	w.observe(failLine111("198.18.30.11:443"))
	if len(*asked) != 1 || !strings.Contains((*asked)[0], "CONN_FAIL: 3 LAN connections to 3 destinations failed via Dallas") {
		t.Fatalf("three failures of the new tunnel: asked %v", *asked)
	}
	if why, ok := w.Corroborate(*now, "Dallas", "auto"); !ok || !strings.Contains(why, "3 LAN connections") {
		t.Fatalf("the new tunnel's own burst: corroborated=%v %q", ok, why)
	}

	// A burst read in full before the reconnect: it asked then, and says
	// nothing of the tunnel after it.
	gen++
	*now = now.Add(connFailGap)
	for _, d := range []string{"a:443", "b:443", "c:443"} {
		w.observe(failLine112("Dallas", d))
	}
	if len(*asked) != 2 {
		t.Fatalf("a burst on the next tunnel did not ask: %v", *asked)
	}
	gen++
	if why, ok := w.Corroborate(*now, "Dallas", "auto"); ok {
		t.Fatalf("the previous tunnel's burst corroborates a check of the fresh one: %s", why)
	}
}

// The generation moves at the end of every connect, whatever its outcome,
// and at no other transition.
func TestIsNewTunnel(t *testing.T) {
	tr := func(from, to watchdog.State) watchdog.Event {
		return watchdog.Event{Type: watchdog.EventTransition, Transition: &watchdog.Transition{From: from, To: to}}
	}
	for _, c := range []struct {
		ev   watchdog.Event
		want bool
	}{
		{tr(watchdog.StateConnecting, watchdog.StateHealthy), true},
		{tr(watchdog.StateConnecting, watchdog.StateDisconnected), true},
		{tr(watchdog.StateHealthy, watchdog.StateConnecting), false},
		{tr(watchdog.StateHealthy, watchdog.StateDegraded), false},
		{watchdog.Event{Type: watchdog.EventHealth}, false},
	} {
		if got := isNewTunnel(c.ev); got != c.want {
			t.Errorf("isNewTunnel(%+v) = %v, want %v", c.ev.Transition, got, c.want)
		}
	}
	var f *fastDetectors
	f.newTunnel() // nil-safe: the fast signals may be off
}
