package lab

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"

	"surflare-watchdog/src/lab/fakes"
)

// Issue 18 in the lab: the daemon against the fakes in the evidence's
// behaviour (E6 late proxy, E7 orphaned state, E9 tunnel-only account
// API) and in the old one.

// refreshOf digs the login refresh out of the status answer.
func refreshOf(s DaemonState) (outcome string, refreshes int) {
	o, _ := rawField(s.Raw, "signals", "auth", "refresh", "outcome").(string)
	n, _ := rawField(s.Raw, "signals", "auth", "refresh", "refreshes").(float64)
	return o, int(n)
}

// vendorLoginAt is when the fake CLI's token was issued.
func vendorLoginAt(t *testing.T, l *Lab) time.Time {
	t.Helper()
	li, err := l.VendorInfo()
	if err != nil {
		t.Fatal(err)
	}
	st, err := fakes.LoadState(li)
	if err != nil {
		t.Fatal(err)
	}
	return st.LoginAt
}

// The tunnel-only API scenario (E9). The account API answers only through
// the tunnel and the token lives tokenTTL. The node goes down after the
// first token would have expired. With the proactive refresh the token is
// fresh, the connect to the next node passes its account check and the LAN
// is back; without it the connect fails "Account check failed" and the
// daemon stays down, saying so. With api_access=any (the old behaviour) the
// daemon recovers even without the refresh: its fallback login reaches the
// API directly.
func TestDaemonTunnelOnlyAPIRecoversWithLoginRefresh(t *testing.T) {
	const tokenTTL = 25 * time.Second
	for _, tc := range []struct {
		name        string
		api         string
		refresh     string
		wantRecover bool
	}{
		{"tunnel api, refresh every 8 s", fakes.APITunnel, "8", true},
		{"tunnel api, no refresh", fakes.APITunnel, "0", false},
		{"any api, no refresh (old behaviour)", fakes.APIAny, "0", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The first login needs the API from outside the tunnel (the
			// household set the router up somewhere it answered): up with
			// api_access=any, switched once the tunnel is healthy.
			l := upDaemonVendor(t, []string{"api_access=any", fmt.Sprintf("token_ttl=%ds", int(tokenTTL/time.Second))},
				"surflare.main.login_refresh="+tc.refresh)
			ctx := context.Background()
			st, err := l.WaitDaemon(ctx, 30*time.Second, DaemonState.Healthy)
			if err != nil {
				t.Fatalf("%v\nstatus: %s", err, st.Raw)
			}
			first, connects := vendorLoginAt(t, l), st.Counters.ConnectAttempts
			if err := l.SetVendor("api_access=" + tc.api); err != nil {
				t.Fatal(err)
			}
			// Past the first token's lifetime, with a margin.
			time.Sleep(time.Until(first.Add(tokenTTL + 3*time.Second)))
			st, err = l.DaemonStatus(ctx)
			if err != nil {
				t.Fatal(err)
			}
			outcome, n := refreshOf(st)
			last := vendorLoginAt(t, l)
			t.Logf("before the fault: %s on %s, refresh %q x%d, token %s old", st.State, st.Node, outcome, n, time.Since(last).Round(time.Second))
			if !st.Healthy() || st.Node != "Dallas" || st.Counters.ConnectAttempts != connects {
				t.Fatalf("the refreshes disturbed the tunnel: %s on %s after %d connects (%d when healthy)\n%s", st.State, st.Node, st.Counters.ConnectAttempts, connects, st.Raw)
			}
			if tc.refresh != "0" && (outcome != "ok" || n < 2 || time.Since(last) > tokenTTL) {
				t.Fatalf("refresh %q x%d, token %s old: not kept fresh", outcome, n, time.Since(last))
			}
			if tc.refresh == "0" && !last.Equal(first) {
				t.Fatalf("token renewed without a refresh (%s -> %s)", first, last)
			}

			t0 := time.Now()
			if err := l.Fault(ctx, FaultNodeDown, true, "Dallas"); err != nil {
				t.Fatal(err)
			}
			const within = 45 * time.Second
			st, err = l.WaitDaemon(ctx, within, func(s DaemonState) bool { return s.Healthy() && s.Node != "Dallas" })
			log := l.DaemonLog()
			if !tc.wantRecover {
				if err == nil {
					t.Fatalf("recovered on %s with an expired token and no way to the API", st.Node)
				}
				if !strings.Contains(log, "Account check failed") || !strings.Contains(log, "the login token may have expired; trying a direct login") {
					t.Errorf("the log does not say why it stays down")
				}
				if line, _ := rawField(st.Raw, "why", "line").(string); !strings.Contains(line, "failed the account check") {
					t.Errorf("why line %q does not say the account check fails", line)
				}
				if name, err := exitOf(ctx, l); err == nil {
					t.Errorf("the LAN client reaches the internet (exit %s) while the tunnel is down", name)
				}
				t.Logf("no recovery within %s: %s, as expected; the daemon says: %s", within, st.State, rawField(st.Raw, "why", "line"))
				return
			}
			if err != nil {
				t.Fatalf("no recovery within %s: %v\nstatus: %s", within, err, st.Raw)
			}
			name, err := waitClient(ctx, l, 10*time.Second, func(n string) bool { return n == st.Node })
			if err != nil {
				t.Fatalf("client did not recover: %v (exit %q)", err, name)
			}
			t.Logf("recovered on %s, client through %s after %s", st.Node, name, time.Since(t0).Round(time.Millisecond))
		})
	}
}

// E6: `connect --daemon` returns seconds before the proxy listens. The
// daemon waits for it (phase 1, bounded by connect_local_timeout, 20 s)
// instead of probing a closed port: the first node comes up, no connect
// fails, nothing rotates. The data-plane budget is set shorter than the
// delay: proving the node must not pay for the proxy's start (before, a
// 5 s budget failed every node in turn).
func TestDaemonWaitsForALateProxy(t *testing.T) {
	for _, delay := range []string{"0", "8s"} {
		t.Run("proxy_delay="+delay, func(t *testing.T) {
			l := upDaemonVendor(t, []string{"proxy_delay=" + delay}, "surflare.main.connect_dataplane_timeout=5")
			t0 := time.Now()
			ctx := context.Background()
			st, err := l.WaitDaemon(ctx, 40*time.Second, DaemonState.Healthy)
			if err != nil {
				t.Fatalf("%v\nstatus: %s", err, st.Raw)
			}
			t.Logf("healthy on %s after %s", st.Node, time.Since(t0).Round(time.Millisecond))
			// Two connects: the lab's vendor is not logged in, so the first
			// one asks for a login and the second one is the tunnel.
			if st.Node != "Dallas" || st.Counters.ConnectAttempts != 2 || st.Counters.Rotations != 0 || st.Counters.FailedChecks != 0 {
				t.Errorf("healthy on %s after %d connects, %d rotations, %d failed checks; want Dallas after the login",
					st.Node, st.Counters.ConnectAttempts, st.Counters.Rotations, st.Counters.FailedChecks)
			}
			if took := time.Since(t0); delay != "0" && took < 8*time.Second {
				t.Errorf("healthy %s after the daemon started: the proxy was not late, the test proves nothing", took)
			}
			if strings.Contains(l.DaemonLog(), "Connect to Dallas failed") {
				t.Error("the late proxy was taken for a failed connect")
			}
			if name, err := waitClient(ctx, l, 10*time.Second, func(n string) bool { return n == "Dallas" }); err != nil {
				t.Fatalf("client: %v (exit %q)", err, name)
			}
		})
	}
}

// E7: a long-lived CLI killed with SIGKILL, and connects of a client whose
// disconnect fails half way, leave the vendor table, duplicated fwmark
// rules and table 100's route. The daemon drains them at startup and
// connects; when it stops and the vendor's disconnect fails (its proxy
// crashed), it removes the same leftovers itself.
func TestDaemonDrainsOrphanedVendorState(t *testing.T) {
	l := upFull(t, Options{Clients: 1, Vendor: []string{"disconnect=strict", "foreground=1"}})
	ctx := context.Background()
	if err := l.Login(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if out, err := l.Surflare(ctx, "connect", "--node", "Chicago", "--transit", fakes.TransitAuto, "--daemon"); err != nil {
			t.Fatalf("connect: %s %v", out, err)
		}
	}
	pid, err := l.Start("surflare-foreground", RoleRouter, l.Path(dirBin, fakes.CLIName), "connect", "--node", "Dallas", "--transit", fakes.TransitAuto)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for l.tunnelRules(ctx) < 3 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	syscall.Kill(pid, syscall.SIGKILL)
	l.Stop("surflare-foreground")
	planted := l.tunnelRules(ctx)
	if planted < 3 || !l.hasTable(nftables.TableFamilyINet, "surflare") {
		t.Fatalf("planting failed: %d rules, table %v", planted, l.hasTable(nftables.TableFamilyINet, "surflare"))
	}

	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", tail(l.DaemonLog(), 80))
		}
	})
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := l.StartDaemon(sctx, e2eSets...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if l.DaemonRunning() {
			l.StopDaemon(context.Background())
		}
	})
	st, err := l.WaitDaemon(ctx, 40*time.Second, DaemonState.Healthy)
	if err != nil {
		t.Fatalf("%v\nstatus: %s", err, st.Raw)
	}
	if n := l.tunnelRules(ctx); n != 1 {
		t.Errorf("%d fwmark rules while healthy (planted %d), want 1", n, planted)
	}
	t.Logf("planted %d fwmark rules and the vendor table; healthy on %s with 1 rule", planted, st.Node)
	if name, err := waitClient(ctx, l, 10*time.Second, func(n string) bool { return n == st.Node }); err != nil {
		t.Fatalf("client: %v (exit %q)", err, name)
	}

	// The proxy crashes; the vendor's disconnect at stop then fails and
	// leaves everything: the daemon must clear it.
	if err := l.Fault(ctx, FaultProxyCrash, true); err != nil {
		t.Fatal(err)
	}
	l.Fault(ctx, FaultProxyCrash, false)
	if _, err := l.StopDaemon(ctx); err != nil {
		t.Fatal(err)
	}
	route, _ := l.Exec(ctx, RoleRouter, "ip", "-4", "route", "show", "table", "100")
	if n := l.tunnelRules(ctx); n != 0 || l.hasTable(nftables.TableFamilyINet, "surflare") || strings.TrimSpace(route) != "" {
		t.Errorf("after stop: %d fwmark rules, vendor table %v, table 100 %q; want none", n, l.hasTable(nftables.TableFamilyINet, "surflare"), route)
	}
	if !strings.Contains(l.DaemonLog(), "Vendor disconnect failed; flushing its leftovers") {
		t.Error("the vendor's disconnect did not fail: the test proves nothing")
	}
}

// E10: a client with only one login form. The daemon's terminal login
// against a -p-only client stops at once and says which option to set;
// with that option it logs in. Its argv login against a prompt-only client
// goes ahead on the terminal.
func TestDaemonLoginForms(t *testing.T) {
	for _, tc := range []struct{ knob, mode, want string }{
		{"login=both", "pty", "healthy"},
		{"login=argv", "pty", "auth_failed"},
		{"login=argv", "argv", "healthy"},
		{"login=pty", "argv", "healthy"},
	} {
		t.Run(tc.knob+",login_mode="+tc.mode, func(t *testing.T) {
			l := upDaemonVendor(t, []string{tc.knob}, "surflare.auth=auth", "surflare.auth.login_mode="+tc.mode)
			st, err := l.WaitDaemon(context.Background(), 30*time.Second, func(s DaemonState) bool { return s.State == tc.want })
			if err != nil {
				t.Fatalf("%v\nstatus: %s", err, st.Raw)
			}
			if tc.want == "auth_failed" {
				if e, _ := rawField(st.Raw, "signals", "auth", "last_error").(string); !strings.Contains(e, "set auth.login_mode to 'argv'") {
					t.Errorf("login error %q does not say what to set", e)
				}
				if n := loginAttempts(st); n != 1 {
					t.Errorf("%d login attempts, want 1: a missing form is not retried", n)
				}
			}
		})
	}
}
