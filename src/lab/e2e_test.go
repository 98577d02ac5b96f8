package lab

import (
	"context"
	"fmt"
	"os"
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
		if t.Failed() || os.Getenv("E2E_LOG") != "" {
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

// exitOf fetches the IP echo from client 0 and names the exit ("" on error).
func exitOf(ctx context.Context, l *Lab) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	e, err := l.ClientEcho(cctx, 0)
	if err != nil {
		return "", err
	}
	return ExitName(e.IP), nil
}

// waitClient polls the LAN client until its exit satisfies ok.
func waitClient(ctx context.Context, l *Lab, timeout time.Duration, ok func(string) bool) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		name, err := exitOf(ctx, l)
		if err == nil && ok(name) {
			return name, nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("client exits at %q", name)
			}
			return name, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func killSwitchArmed(ctx context.Context, l *Lab) bool {
	_, err := l.Exec(ctx, RoleRouter, "nft", "list", "table", "inet", "killswitch")
	return err == nil
}

// The main story: the daemon brings the tunnel up on the preferred
// node; the node goes down; the daemon detects it, rotates past a node that
// log health marks dead, and the LAN client recovers on a live node — with
// zero packets leaked throughout. SIGTERM then ends it within 5 s with the
// kill switch armed, and nothing leaks after the stop either.
func TestDaemonNodeDownRotatesWithoutLeaks(t *testing.T) {
	l := upDaemon(t, "surflare.loghealth=loghealth", "surflare.loghealth.threshold=2")
	ctx := context.Background()
	if _, err := l.ResetLeaks(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := l.WaitDaemon(ctx, 20*time.Second, DaemonState.Healthy)
	if err != nil {
		t.Fatalf("%v\nstatus: %s", err, st.Raw)
	}
	if name, err := waitClient(ctx, l, 10*time.Second, func(n string) bool { return n == "Dallas" }); err != nil {
		t.Fatalf("client before the fault: %v (exit %q)", err, name)
	}

	// Los Angeles, the next candidate, has been failing its urltests: log
	// health must mark it dead before Dallas goes down.
	if err := l.Fault(ctx, FaultNodeDown, true, "Los Angeles"); err != nil {
		t.Fatal(err)
	}
	if st, err = l.WaitDaemon(ctx, 25*time.Second, func(s DaemonState) bool {
		for _, c := range s.Candidates {
			if c.Node == "Los Angeles" && c.Dead {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("Los Angeles never marked dead by log health: %v\nstatus: %s", err, st.Raw)
	}

	rot0 := st.Counters.Rotations
	t0 := time.Now()
	if err := l.Fault(ctx, FaultNodeDown, true, "Dallas"); err != nil {
		t.Fatal(err)
	}
	st, err = l.WaitDaemon(ctx, 20*time.Second, func(s DaemonState) bool { return !s.Healthy() || s.Counters.FailedChecks > 0 })
	if err != nil {
		t.Fatalf("node-down not detected: %v", err)
	}
	detected := time.Since(t0)
	st, err = l.WaitDaemon(ctx, 25*time.Second, func(s DaemonState) bool { return s.Healthy() && s.Node != "Dallas" })
	if err != nil {
		t.Fatalf("no recovery on another node: %v\nstatus: %s", err, st.Raw)
	}
	recovered := time.Since(t0)
	if st.Node != "Chicago" {
		t.Errorf("recovered on %s, want Chicago (Los Angeles is dead by log health)", st.Node)
	}
	if st.Counters.Rotations <= rot0 {
		t.Errorf("rotations %d -> %d", rot0, st.Counters.Rotations)
	}
	name, err := waitClient(ctx, l, 10*time.Second, func(n string) bool { return n == st.Node })
	if err != nil {
		t.Fatalf("client did not recover: %v (exit %q)", err, name)
	}
	clientBack := time.Since(t0)
	t.Logf("node-down: detected after %s, daemon healthy on %s after %s, client through %s after %s",
		detected.Round(time.Millisecond), st.Node, recovered.Round(time.Millisecond), name, clientBack.Round(time.Millisecond))
	if !strings.Contains(l.DaemonLog(), "LOG_HEALTH: skipping Los Angeles") {
		t.Error("the log does not say Los Angeles was skipped")
	}

	// Stop: within 5 s, kill switch armed, nothing leaks afterwards.
	took, err := l.StopDaemon(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("SIGTERM -> exit in %s", took.Round(time.Millisecond))
	if took > 5*time.Second {
		t.Errorf("stop took %s, want < 5 s", took)
	}
	if !killSwitchArmed(ctx, l) {
		t.Error("kill switch not armed after SIGTERM")
	}
	if _, err := exitOf(ctx, l); err == nil {
		t.Error("the LAN client still reaches the internet after the daemon stopped")
	}
	lc, err := l.Leaks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lc.Total() != 0 {
		t.Errorf("leaked: %s", lc)
	}
}
