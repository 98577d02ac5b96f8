package boxtest

import (
	"context"
	"strings"
	"testing"
	"time"

	"surflare-watchdog/src/lab"
)

// testRestartKeepsTunnel is E11 on real procd: `/etc/init.d/surflare-watchdog
// restart` over a healthy tunnel hands it over (the init script's
// stop_service writes the handover request before procd's SIGTERM), and
// the new instance adopts it: the same proxy, no connect, and not one LAN
// request lost while the LAN and the router keep fetching.
func testRestartKeepsTunnel(t *testing.T, ctx context.Context, l *lab.Lab) {
	waitStatus(t, ctx, l, 60*time.Second, "healthy", func(m map[string]any) bool { return field(m, "state") == "healthy" })
	before, err := servicePID(ctx, l)
	if err != nil || before == 0 {
		t.Fatalf("daemon not running before the restart (pid %d, %v)", before, err)
	}
	proxy := strings.TrimSpace(sh(t, ctx, l, "pidof surflare-proxy || true"))
	if proxy == "" {
		t.Fatal("no surflare-proxy in the box before the restart")
	}
	since := time.Now()
	tr := startTraffic(ctx, l)
	time.Sleep(time.Second) // traffic before the restart too
	sh(t, ctx, l, "/etc/init.d/surflare-watchdog restart")
	var after int
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if after, err = servicePID(ctx, l); err == nil && after > 0 && after != before {
			break
		}
	}
	if after == 0 || after == before {
		tr.stop()
		t.Fatalf("restart: procd did not start a new instance (pid %d -> %d, %v)", before, after, err)
	}
	st := waitStatus(t, ctx, l, 60*time.Second, "healthy after the restart", func(m map[string]any) bool { return field(m, "state") == "healthy" })
	time.Sleep(2 * time.Second) // and after it
	tr.stop()
	check(t, "restart: pid %d -> %d, healthy on %s", before, after, field(st, "node"))

	if now := strings.TrimSpace(sh(t, ctx, l, "pidof surflare-proxy || true")); now != proxy {
		t.Errorf("restart replaced the proxy (pid %s -> %s): the tunnel was not adopted", proxy, now)
	} else {
		check(t, "restart kept the proxy (pid %s)", proxy)
	}
	if n, err := l.CountVendorCalls(since, "connect"); err != nil {
		t.Errorf("reading the fake CLI's calls: %v", err)
	} else if n != 0 {
		t.Errorf("restart called `surflare connect` %d times, want 0 (adopt the healthy tunnel)", n)
	} else {
		check(t, "restart: no `surflare connect`")
	}
	lanOK, lanErr := tr.lanOK.Load(), tr.lanErr.Load()
	if lanOK == 0 || lanErr != 0 {
		t.Errorf("LAN across the restart: %d requests ok, %d failed; want all ok", lanOK, lanErr)
	} else {
		check(t, "LAN across the restart: %d requests ok, 0 failed", lanOK)
	}
	if rOK, rErr := tr.routerOK.Load(), tr.routerEr.Load(); rErr != 0 {
		t.Logf("router's own fetches across the restart: %d ok, %d failed", rOK, rErr)
	}
}
