package firewall

import (
	"context"
	"testing"
	"time"

	"surflare-watchdog/src/loopguard/nflog"
)

// The counter wake-up: the router's traffic the kill switch drops
// (blocked_out) and an RST from a relay (rst_in) each log to
// CounterWakeLogGroup, still counted and with their verdicts unchanged
// (the drop still drops, the RST still reaches the dialer), while traffic
// the kill switch lets through (the proxy's own relay connection, a
// tunnel-free accept) logs nothing: an idle healthy tunnel wakes nobody.
func TestCounterWakeLogsWhatTheWatchedCountersCount(t *testing.T) {
	ctx := context.Background()
	tp := newTopo(t)
	serveTCP(t, tp.inet, "tcp4", relayHost+":8443", "relay", false)
	serveTCP(t, tp.inet, "tcp4", echoHost+":80", "echo", false)
	fw := apply(t, tp.router, labSpec())

	var sub *nflog.Sub
	var err error
	tp.router.run(func() { sub, err = nflog.Subscribe(ctx, CounterWakeLogGroup) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Close)

	// Accepted traffic: the proxy's own connection to a relay.
	if got, err := dialTCP(tp.router, "tcp4", relayHost+":8443", int(MarkDirect)); got != "relay" {
		t.Fatalf("relay: %q %v", got, err)
	}
	// The logged packets come through one socket in order, so a sentinel
	// (a drop after the bucket refilled) bounds what came before it.
	time.Sleep(time.Second/counterWakeRate + 100*time.Millisecond)
	if n := sub.Events(); n != 0 {
		t.Fatalf("a working relay connection logged %d counter wake-ups, want none", n)
	}

	// An RST from a relay (a closed port): counted, logged, and the dialer
	// still sees the refusal.
	if _, err := dialTCP(tp.router, "tcp4", relayHost+":9", int(MarkDirect)); !isRefused(err) {
		t.Fatalf("closed relay port: %v, want refused (the wake-up must not change the verdict)", err)
	}
	if !eventually(2*time.Second, func() bool { return sub.Events() >= 1 }) {
		t.Fatal("an RST from a relay logged no counter wake-up")
	}
	m, err := fw.MoatCounters(ctx)
	if err != nil || m.RstIn != 1 {
		t.Fatalf("moat = %+v, %v; want 1 RST counted", m, err)
	}

	// The router's own traffic outside the tunnel: dropped and counted as
	// before, and logged.
	time.Sleep(time.Second/counterWakeRate + 100*time.Millisecond)
	n := sub.Events()
	if got, err := dialTCP(tp.router, "tcp4", echoHost+":80", 0); err == nil {
		t.Fatalf("unmarked router traffic got through the kill switch: %q", got)
	}
	if !eventually(2*time.Second, func() bool { return sub.Events() > n }) {
		t.Fatal("a packet the kill switch dropped logged no counter wake-up")
	}
	cs, err := fw.KillSwitchCounters(ctx)
	if err != nil || cs[CounterBlockedOut] == 0 {
		t.Fatalf("kill switch counters = %v, %v; want blocked_out > 0", cs, err)
	}
}
