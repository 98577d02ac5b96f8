package lab

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A 503 storm with the vendor's urltest at stock sing-box's 3 min: no
// urltest line can see it in time, our own 503 probe does. The daemon
// reconnects the node once (ADR-0001), then rotates away from it, and the
// node it lands on is not overridden for the old one's storm.
func TestStorm503ProbeWithoutURLTest(t *testing.T) {
	l := upDaemonVendor(t, []string{"urltest_interval=180"})
	ctx := context.Background()
	st, err := l.WaitDaemon(ctx, 20*time.Second, DaemonState.Healthy)
	if err != nil {
		t.Fatal(err)
	}
	bad := st.Node
	t0 := time.Now()
	if err := l.Fault(ctx, Fault503, true, bad); err != nil {
		t.Fatal(err)
	}
	// 60 s is far below the 180 s urltest and the 300 s window of the
	// urltest count: only the probe can do it in time.
	st, err = l.WaitDaemon(ctx, 60*time.Second, func(s DaemonState) bool { return s.Healthy() && s.Node != bad })
	if err != nil {
		t.Fatalf("no rotation away from the 503-ing %s: %v", bad, err)
	}
	took := time.Since(t0)
	log := l.DaemonLog()
	for _, want := range []string{
		"STORM503_PROBE: the exit of " + bad,
		"G2: 503 storm override on " + bad,
		"Reconnecting to " + bad,
		"persists after a reconnect; rotating",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("%q not in the daemon log", want)
		}
	}
	t.Logf("503 on %s: healthy on %s after %s", bad, st.Node, took.Round(time.Millisecond))
	time.Sleep(5 * time.Second) // two more probe rounds on the new node
	if i := strings.Index(l.DaemonLog(), "G2: 503 storm override on "+st.Node); i >= 0 {
		t.Errorf("the healthy %s was overridden for %s's storm", st.Node, bad)
	}
}
