package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
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
	"surflare.detector=detector",
	"surflare.detector.interval=1",
}

// upDaemon brings up a lab and starts the daemon in it, registering the
// daemon's log to be shown if the test fails.
func upDaemon(t *testing.T, sets ...string) *Lab {
	t.Helper()
	return upDaemonVendor(t, nil, sets...)
}

// fastURLTest is the fake proxy's old 5 s urltest cadence, for tests whose
// point is what the daemon does with urltest data (log health, the 503
// storm monitor): at the default 30 s they would only wait longer. The
// bench measures detection at each cadence; these tests do not.
var fastURLTest = []string{"urltest_interval=5"}

// upDaemonVendor is upDaemon with vendor knobs (fakes.Knobs) for the lab.
func upDaemonVendor(t *testing.T, vendor []string, sets ...string) *Lab {
	t.Helper()
	l := upFull(t, Options{Clients: 1, Vendor: vendor})
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
	// Los Angeles must be marked dead by urltest errors before the rotation.
	l := upDaemonVendor(t, fastURLTest, "surflare.loghealth=loghealth", "surflare.loghealth.threshold=2")
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

// rawField digs a value out of the status JSON by path.
func rawField(raw []byte, path ...string) any {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil
	}
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

// kill -9 in the middle of a connect leaves the vendor's proxy, its table
// and our tables behind; the kill switch stays armed (kernel state), and a
// restarted daemon cleans up and brings the tunnel back.
func TestDaemonRecoversFromKill9DuringConnect(t *testing.T) {
	l := upDaemon(t)
	ctx := context.Background()
	if _, err := l.ResetLeaks(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := l.WaitDaemon(ctx, 20*time.Second, DaemonState.Healthy); err != nil {
		t.Fatal(err)
	}
	// Slow Dallas down so a reconnect's data-plane proof takes a while.
	if err := l.Fault(ctx, FaultLatency, true, "Dallas", "1200"); err != nil {
		t.Fatal(err)
	}
	oldProxy := l.ProcsByComm(RoleRouter, "surflare-proxy")
	// reconnect waits for its outcome: leave it waiting, the kill ends it.
	reconnect := l.CommandContext(ctx, RoleRouter, l.DaemonBinary(), "reconnect", "--config", l.DaemonConfigPath())
	if err := reconnect.Start(); err != nil {
		t.Fatalf("reconnect: %v", err)
	}
	defer reconnect.Wait()
	// Kill once the new proxy runs and the data plane is being proven.
	st, err := l.WaitDaemon(ctx, 5*time.Second, func(s DaemonState) bool {
		ps := l.ProcsByComm(RoleRouter, "surflare-proxy")
		return s.State == "connecting" && len(ps) == 1 && (len(oldProxy) == 0 || ps[0] != oldProxy[0])
	})
	if err != nil {
		t.Fatalf("never saw connecting with a new proxy: %v", err)
	}
	if err := l.KillDaemon(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed with SIGKILL while %s", st.State)
	if !killSwitchArmed(ctx, l) {
		t.Fatal("kill switch gone after kill -9")
	}
	if _, err := exitOf(ctx, l); err == nil {
		t.Log("note: the client still works through the orphaned proxy (tables left in place)")
	}
	if err := l.Fault(ctx, FaultLatency, false, "Dallas"); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if _, err := l.StartDaemon(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err = l.WaitDaemon(ctx, 20*time.Second, DaemonState.Healthy); err != nil {
		t.Fatalf("restart did not recover: %v\n%s", err, st.Raw)
	}
	if name, err := waitClient(ctx, l, 10*time.Second, func(n string) bool { return n == st.Node }); err != nil {
		t.Fatalf("client after restart: %v (%q)", err, name)
	}
	t.Logf("restart -> healthy and client served in %s", time.Since(t0).Round(time.Millisecond))
	if !strings.Contains(l.DaemonLog(), "Killed stale proxy processes") {
		t.Error("the restart did not clean up the orphaned proxy")
	}
	if n := len(l.ProcsByComm(RoleRouter, "surflare-proxy")); n != 1 {
		t.Errorf("%d proxies running after the restart, want 1", n)
	}
	if lc, err := l.Leaks(ctx); err != nil || lc.Total() != 0 {
		t.Errorf("leaks: %v %v", lc, err)
	}
}

// A fault only the LAN path has — LAN TCP dropped on its way into the
// router, while the router's own traffic still goes through the tunnel — is
// seen by probe 7 (from the probe namespace on br-lan) and by nothing else.
func TestProbe7SeesLANOnlyFault(t *testing.T) {
	l := upDaemon(t, "surflare.main.fail_threshold=100")
	ctx := context.Background()
	if _, err := l.WaitDaemon(ctx, 20*time.Second, DaemonState.Healthy); err != nil {
		t.Fatal(err)
	}
	nft := func(args ...string) {
		t.Helper()
		if out, err := l.Exec(ctx, RoleRouter, append([]string{"nft"}, args...)...); err != nil {
			t.Fatalf("nft %v: %v %s", args, err, out)
		}
	}
	nft("add", "table", "ip", "k1_lanfault")
	nft("add", "chain", "ip", "k1_lanfault", "pre", "{ type filter hook prerouting priority -300; }")
	nft("add", "rule", "ip", "k1_lanfault", "pre", "iifname", "br-lan", "tcp", "dport", "80", "drop")
	t.Cleanup(func() { l.Exec(context.Background(), RoleRouter, "nft", "delete", "table", "ip", "k1_lanfault") })

	st, err := l.WaitDaemon(ctx, 15*time.Second, func(s DaemonState) bool {
		return rawField(s.Raw, "last_check", "outcome") == "PROXY_BROKEN"
	})
	if err != nil {
		t.Fatalf("probe 7 did not see the LAN fault: %v\n%s", err, st.Raw)
	}
	if up := rawField(st.Raw, "last_check", "tunnel_up"); up != true {
		t.Errorf("tunnel probes failed too (tunnel_up=%v): the fault was meant for the LAN path only", up)
	}
	if ok := rawField(st.Raw, "last_check", "proxy", "ok"); ok != false {
		t.Errorf("probe 7 ok = %v, want false", ok)
	}
	t.Logf("reason: %v", rawField(st.Raw, "last_check", "reason"))
}

// Signals and reload: SIGUSR2 toggles diag, SIGUSR1 checks now, SIGHUP with
// a broken config keeps the last good one and names FILE:LINE, and status
// --json shows the detectors, the proxy's descriptors, conntrack and nft.
func TestDaemonSignalsReloadAndStatus(t *testing.T) {
	l := upDaemon(t, "surflare.main.check_interval=60")
	ctx := context.Background()
	st, err := l.WaitDaemon(ctx, 20*time.Second, DaemonState.Healthy)
	if err != nil {
		t.Fatal(err)
	}
	checks := st.Counters.Checks
	if err := l.SignalDaemon(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if _, err := l.WaitDaemon(ctx, 5*time.Second, func(s DaemonState) bool { return s.Counters.Checks > checks }); err != nil {
		t.Errorf("SIGUSR1 ran no check: %v", err)
	}
	l.SignalDaemon(syscall.SIGUSR2)
	if _, err := l.WaitDaemon(ctx, 3*time.Second, func(s DaemonState) bool { return s.State == "diag" }); err != nil {
		t.Errorf("SIGUSR2 did not enter diag: %v", err)
	}
	l.SignalDaemon(syscall.SIGUSR2)
	if _, err := l.WaitDaemon(ctx, 3*time.Second, func(s DaemonState) bool { return s.State != "diag" }); err != nil {
		t.Errorf("second SIGUSR2 did not leave diag: %v", err)
	}

	cfg, err := os.ReadFile(l.DaemonConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	bad := string(cfg) + "\nconfig surflare 'main'\n\toption check_interval 'soon'\n"
	if err := os.WriteFile(l.DaemonConfigPath(), []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	l.SignalDaemon(syscall.SIGHUP)
	time.Sleep(500 * time.Millisecond)
	log := l.DaemonLog()
	if !strings.Contains(log, "keeping the last good config") || !strings.Contains(log, l.DaemonConfigPath()+":") {
		t.Errorf("a broken reload must log FILE:LINE and keep the last good config; log:\n%s", tail(log, 10))
	}
	if st, err = l.DaemonStatus(ctx); err != nil || st.State == "stopped" {
		t.Fatalf("daemon after a bad reload: %v %s", err, st.State)
	}
	os.WriteFile(l.DaemonConfigPath(), cfg, 0o600)
	l.SignalDaemon(syscall.SIGHUP)
	time.Sleep(500 * time.Millisecond)
	if !strings.Contains(l.DaemonLog(), "Configuration reloaded") {
		t.Error("a good reload was not applied")
	}

	st, err = l.DaemonStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range [][]string{
		{"daemon", "keepalive", "active"}, {"daemon", "loopguard", "enabled"}, {"daemon", "early_detector", "threshold"},
		{"daemon", "log_health", "lines_read"}, {"daemon", "storm_503", "threshold"}, {"daemon", "proxy", "nofile"},
		{"daemon", "conntrack", "entries"}, {"daemon", "wan", "device"}, {"signals", "detectors"},
	} {
		if rawField(st.Raw, p...) == nil {
			t.Errorf("status --json has no %s", strings.Join(p, "."))
		}
	}
	if fds, _ := rawField(st.Raw, "daemon", "proxy", "fds").(float64); fds <= 0 {
		t.Errorf("proxy fds = %v", rawField(st.Raw, "daemon", "proxy"))
	}
	if !strings.Contains(string(st.Raw), `"inet killswitch"`) || !strings.Contains(string(st.Raw), `"loopguard_block"`) {
		t.Error("status --json lacks the nft table sizes")
	}
	// The relays the proxy uses are learned from its connections and
	// watched by the moat.
	if _, err := l.WaitDaemon(ctx, 8*time.Second, func(s DaemonState) bool {
		exitOf(ctx, l) // traffic, so the proxy holds relay connections
		var v struct {
			Daemon struct {
				NFT []struct {
					Name string         `json:"name"`
					Sets map[string]int `json:"sets"`
				} `json:"nft"`
			} `json:"daemon"`
		}
		json.Unmarshal(s.Raw, &v)
		for _, t := range v.Daemon.NFT {
			if t.Name == "inet surflare_moat" && t.Sets["relays4"] > 0 {
				return true
			}
		}
		return false
	}); err != nil {
		t.Errorf("no relay learned into the moat: %v", err)
	}
}

// SIGTERM while a login hangs still ends the daemon within 5 s (the login
// is killed), with the kill switch armed; a second daemon is refused while
// one runs.
func TestDaemonStopsDuringHungLoginAndHoldsItsLock(t *testing.T) {
	l := upFull(t, Options{Clients: 1})
	ctx := context.Background()
	if err := l.Fault(ctx, FaultLoginHang, true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", tail(l.DaemonLog(), 40))
		}
	})
	if _, err := l.StartDaemon(ctx, e2eSets...); err != nil {
		t.Fatal(err)
	}
	if _, err := l.WaitDaemon(ctx, 10*time.Second, func(s DaemonState) bool { return s.State == "auth_wait" }); err != nil {
		t.Fatalf("never waited for the login: %v", err)
	}
	out, err := l.Exec(ctx, RoleRouter, l.DaemonBinary(), "run", "--config", l.DaemonConfigPath())
	if err == nil || !strings.Contains(out, "another surflare-watchdog is running") {
		t.Errorf("a second daemon was not refused: %v\n%s", err, out)
	}
	took, err := l.StopDaemon(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("SIGTERM during a hung login -> exit in %s", took.Round(time.Millisecond))
	if !killSwitchArmed(ctx, l) {
		t.Error("kill switch not armed after the stop")
	}
	if n := len(l.ProcsByComm(RoleRouter, "surflare")); n != 0 {
		t.Errorf("%d vendor CLI processes left after the stop", n)
	}
}

// --open-on-exit: the user stops the service on purpose and asks for an
// open network; the kill switch goes too.
func TestDaemonOpenOnExitRemovesTheKillSwitch(t *testing.T) {
	l := upFull(t, Options{Clients: 1})
	ctx := context.Background()
	if _, err := l.StartDaemonArgs(ctx, []string{"--open-on-exit"}, e2eSets...); err != nil {
		t.Fatal(err)
	}
	if _, err := l.WaitDaemon(ctx, 20*time.Second, DaemonState.Healthy); err != nil {
		t.Fatal(err)
	}
	if _, err := l.StopDaemon(ctx); err != nil {
		t.Fatal(err)
	}
	if killSwitchArmed(ctx, l) {
		t.Error("kill switch still armed after a stop with --open-on-exit")
	}
}

// A black-holed exit (packets vanish, nothing is refused) is the slow case:
// the probes must time out. The early detector and the probe timeout bound
// detection; the client recovers on the next node.
func TestDaemonNodeBlackholeRecovers(t *testing.T) {
	l := upDaemon(t)
	ctx := context.Background()
	if _, err := l.ResetLeaks(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := l.WaitDaemon(ctx, 20*time.Second, DaemonState.Healthy); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := l.Fault(ctx, FaultNodeBlackhole, true, "Dallas"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.WaitDaemon(ctx, 20*time.Second, func(s DaemonState) bool { return s.Counters.FailedChecks > 0 }); err != nil {
		t.Fatalf("black hole not detected: %v", err)
	}
	detected := time.Since(t0)
	st, err := l.WaitDaemon(ctx, 25*time.Second, func(s DaemonState) bool { return s.Healthy() && s.Node != "Dallas" })
	if err != nil {
		t.Fatalf("no recovery: %v\n%s", err, st.Raw)
	}
	recovered := time.Since(t0)
	name, err := waitClient(ctx, l, 10*time.Second, func(n string) bool { return n == st.Node })
	if err != nil {
		t.Fatalf("client did not recover: %v (%q)", err, name)
	}
	t.Logf("node-blackhole: detected after %s, healthy on %s after %s, client after %s",
		detected.Round(time.Millisecond), st.Node, recovered.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))
	if lc, err := l.Leaks(ctx); err != nil || lc.Total() != 0 {
		t.Errorf("leaks: %v %v", lc, err)
	}
}
