package firewall

import (
	"context"
	"strings"
	"testing"
	"time"

	"surflare-watchdog/src/loopguard/nflog"
	"surflare-watchdog/src/route"
)

// The LAN wake-up rule: the first new LAN connection into the tproxy logs
// one event at once, a flood logs no more than the token bucket lets
// through (one token, lanWakeRate a second), the router's own connections
// never log, and every connection still reaches the proxy (the rule only
// logs). Tombstoned, there is no proxy to wake for and no rule.
func TestLANWakeOneEventPerStartBoundedUnderFlood(t *testing.T) {
	ctx := context.Background()
	tp := newTopo(t)
	proxy := serveTCP(t, tp.router, "tcp4", "127.0.0.1:10800", "proxy", true)
	serveTCP(t, tp.inet, "tcp4", relayHost+":8443", "relay", false)
	tunnelRouting(t, tp.router, route.IPv4)
	apply(t, tp.router, labSpec())

	var sub *nflog.Sub
	var err error
	tp.router.run(func() { sub, err = nflog.Subscribe(ctx, LANWakeLogGroup) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Close)

	// The router's own connection (output, not prerouting) is not LAN
	// traffic.
	if got, err := dialTCP(tp.router, "tcp4", relayHost+":8443", 0); got != "relay" {
		t.Fatalf("router to relay: %q, %v", got, err)
	}
	// One LAN connection after a quiet spell: one event, at once.
	start := time.Now()
	if got, err := dialTCP(tp.lan, "tcp4", echoHost+":80", 0); got != "proxy" {
		t.Fatalf("LAN TCP must still reach the proxy: %q, %v", got, err)
	}
	if !eventually(2*time.Second, func() bool { return sub.Events() >= 1 }) {
		t.Fatalf("a LAN connection after a quiet spell logged no wake-up")
	}
	t.Logf("first wake-up %v after the dial began", time.Since(start))
	// sentinel waits for the bucket to refill and dials once more: the
	// event it logs comes after every earlier one (one socket, in order),
	// so the count before it is final.
	sentinel := func() uint64 {
		time.Sleep(time.Second/lanWakeRate + 100*time.Millisecond) // the bucket's refill, a kernel timer
		n := sub.Events()
		if got, err := dialTCP(tp.lan, "tcp4", echoHost+":80", 0); got != "proxy" {
			t.Fatalf("LAN TCP after the bucket refilled: %q, %v", got, err)
		}
		if !eventually(2*time.Second, func() bool { return sub.Events() > n }) {
			t.Fatalf("a LAN connection after the bucket refilled logged no wake-up (%d events)", n)
		}
		return n
	}
	if n := sentinel(); n != 1 {
		t.Fatalf("one LAN connection (and one of the router's own): %d wake-ups, want 1", n)
	}

	// A flood for 1.5 s, starting with a full bucket: every connection
	// reaches the proxy, the events stay within the bucket (the first at
	// once, then lanWakeRate a second).
	time.Sleep(time.Second/lanWakeRate + 100*time.Millisecond)
	before := sub.Events()
	flood := 0
	begin := time.Now()
	for time.Since(begin) < 1500*time.Millisecond {
		if got, err := dialTCP(tp.lan, "tcp4", echoHost+":80", 0); got != "proxy" {
			t.Fatalf("flood connection %d: %q, %v (the wake-up rule must not change the verdict)", flood, got, err)
		}
		flood++
	}
	took := time.Since(begin)
	n := sentinel() - before
	limit := uint64(lanWakeBurst + lanWakeRate*took.Seconds() + 1) // +1: the kernel's refills and our clock start apart
	t.Logf("flood of %d LAN connections in %v: %d wake-ups (limit %d)", flood, took, n, limit)
	if n < 1 || n > limit {
		t.Errorf("flood of %d LAN connections in %v: %d wake-ups, want 1..%d", flood, took, n, limit)
	}
	if got := len(proxy.conns()); got != flood+3 {
		t.Errorf("proxy saw %d connections, want %d", got, flood+3)
	}

	s := labSpec()
	s.ProxyDown = true
	apply(t, tp.router, s)
	if out := tp.router.nft("list", "table", "ip", TableTProxy); strings.Contains(out, "log group") {
		t.Errorf("tombstoned, the wake-up rule is still there:\n%s", out)
	}
}
