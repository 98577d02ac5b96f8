package lab

import (
	"context"
	"strings"
	"testing"
	"time"
)

// e2eSets are the daemon's lab overrides for end-to-end tests: short
// intervals so a node-down is detected and rotated within seconds.
var e2eSets = []string{
	"surflare.main.check_interval=2",
	"surflare.main.degraded_interval=1",
	"surflare.main.fail_threshold=2",
	"surflare.main.probe_timeout=2",
	"surflare.main.domestic_confirm=1",
	"surflare.main.connect_dataplane_timeout=15",
	"surflare.main.heartbeat_interval=0",
}

// upDaemon brings up a lab and starts the daemon in it, registering the
// daemon's log to be shown if the test fails.
func upDaemon(t *testing.T, sets ...string) *Lab {
	t.Helper()
	l := upFull(t, Options{Clients: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", tail(l.DaemonLog(), 80))
		}
	})
	if _, err := l.StartDaemon(ctx, append(append([]string(nil), e2eSets...), sets...)...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if l.DaemonRunning() {
			l.StopDaemon(context.Background())
		}
	})
	return l
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func TestDaemonBringsTunnelUp(t *testing.T) {
	l := upDaemon(t)
	ctx := context.Background()
	t0 := time.Now()
	st, err := l.WaitDaemon(ctx, 30*time.Second, DaemonState.Healthy)
	if err != nil {
		t.Fatalf("%v\nstatus: %s", err, st.Raw)
	}
	t.Logf("healthy after %s on %s, exit %s", time.Since(t0).Round(time.Millisecond), st.Node, st.Exit.IP)
	e, err := l.ClientEcho(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if ExitName(e.IP) != "Dallas" {
		t.Errorf("LAN client exits at %s (%s), want Dallas", e.IP, ExitName(e.IP))
	}
	t.Logf("status: %s", st.Raw)
}
