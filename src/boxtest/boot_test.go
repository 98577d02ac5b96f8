package boxtest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"surflare-watchdog/src/lab"
	"surflare-watchdog/src/owrtbox"
)

// TestBoot reboots a router with the package installed (a root that keeps
// what was written to it, as a router's flash does) while the LAN client
// and the router keep sending, and checks the boot order the init scripts
// promise: the boot lock (S18) is up before netifd brings the WAN up (S20),
// the daemon starts after both (S21) and removes the lock once its kill
// switch is armed, and nothing leaks from the LAN meanwhile.
func TestBoot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	root, _ := needBox(t)
	boxDir, _ := owrtbox.Locate(root)
	rootfs, err := owrtbox.UnpackRoot(ctx, boxDir, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l := upBox(t, ctx, lab.OpenWrt{Root: rootfs})
	waitStatus(t, ctx, l, 60*time.Second, "healthy", func(m map[string]any) bool { return field(m, "state") == "healthy" })
	check(t, "installed and healthy on a persistent root")

	lc, _ := powerCycle(t, ctx, l, true)
	if lc.Total() != 0 {
		t.Errorf("during the boot %s, want 0", lc)
	} else {
		check(t, "0 packets leaked from the LAN or the router during the boot (%s)", lc)
	}

	log := sh(t, ctx, l, "logread")
	// Two chains: the WAN comes up behind the boot lock, and the daemon
	// arms the kill switch before it removes the lock. netifd brings the
	// WAN up asynchronously, so whether the daemon (S21) starts before or
	// after "wan up" is not an order that matters: the lock holds either way.
	lockUp := struct{ what, line string }{"S18 boot lock up", "boot lock up"}
	for _, order := range [][]struct{ what, line string }{
		{lockUp, {"netifd: wan up", "Interface 'wan' is now up"}},
		{lockUp, {"S21 daemon starting", "surflare-watchdog starting"},
			{"kill switch armed", "inet killswitch: created"},
			{"boot lock removed by the daemon", "surflare_boot_lock: deleted"}},
	} {
		checkOrder(t, log, order)
	}
	if tb := tables(t, ctx, l); tb["inet surflare_boot_lock"] {
		t.Errorf("the boot lock is still loaded after the daemon is healthy")
	}

	// Control: a boot with neither the boot lock nor the daemon must show
	// leaks once netifd has the WAN up, or the check above could not have
	// failed. (With only the lock disabled the gap until the daemon's kill
	// switch is tens of milliseconds: 5 packets in one run, too few to
	// assert on without flaking.)
	sh(t, ctx, l, "/etc/init.d/surflare-bootlock disable; /etc/init.d/surflare-watchdog disable")
	if lc, _ := powerCycle(t, ctx, l, false); lc.Total() == 0 {
		t.Errorf("control: a boot without the boot lock and the daemon leaked nothing either; the boot check cannot tell")
	} else {
		check(t, "control: the same boot with S18 and S21 disabled leaks %d packets in its first second of WAN (%s)", lc.Total(), lc)
	}
}

// powerCycle shuts the box down, clears what a power cycle clears, boots it
// again while the LAN and the router send, and returns what leaked until
// the daemon was healthy and the LAN client got through again.
// Without the daemon (withDaemon false: a control) it counts one second
// of traffic after netifd has the WAN up.
func powerCycle(t *testing.T, ctx context.Context, l *lab.Lab, withDaemon bool) (lab.LeakCounts, lab.DaemonState) {
	t.Helper()
	b := l.Box()
	if err := b.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	check(t, "box shut down (procd poweroff: K scripts ran)")
	// A power cycle also loses the kernel's state, which here belongs to
	// the namespace and outlives the box: tables, rules, routes, addresses.
	out, err := l.Exec(ctx, lab.RoleRouter, "sh", "-c", `nft flush ruleset
ip -4 rule flush; ip -4 rule add pref 32766 lookup main; ip -4 rule add pref 32767 lookup default
ip -6 rule flush; ip -6 rule add pref 32766 lookup main
ip route flush table 100 2>/dev/null; ip -6 route flush table 100 2>/dev/null
ip addr flush dev br-lan; ip addr flush dev pppoe-wan
nft list ruleset | wc -l`)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(out) != "0" {
		t.Fatalf("router namespace still has nft rules after the flush: %s", out)
	}
	check(t, "router namespace cleared as a power cycle would (no table, rule, route or address)")
	if _, err := l.ResetLeaks(ctx); err != nil {
		t.Fatal(err)
	}
	tr := startTraffic(ctx, l)
	defer tr.stop()
	start := time.Now()
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	booted := time.Since(start)
	if !withDaemon {
		if err := l.WaitBoxInterfaces(ctx, 30*time.Second, "lan", "wan"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // the measurement window, not a wait
		tr.stop()
		lc, err := l.Leaks(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return lc, lab.DaemonState{}
	}
	st, err := l.WaitDaemon(ctx, 90*time.Second, lab.DaemonState.Healthy)
	if err != nil {
		t.Fatalf("after the reboot: %v", err)
	}
	healthy := time.Since(start)
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if _, err := l.WaitClientExit(wctx, 0, st.Exit.IP); err != nil {
		t.Errorf("after the reboot the LAN client does not get through the tunnel: %v", err)
	}
	tr.stop()
	lc, err := l.Leaks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	check(t, "rebooted: init complete after %s, daemon healthy (node %s) after %s; LAN fetches ok %d failed %d, router ok %d failed %d, %d datagrams",
		booted.Round(100*time.Millisecond), st.Node, healthy.Round(100*time.Millisecond),
		tr.lanOK.Load(), tr.lanErr.Load(), tr.routerOK.Load(), tr.routerEr.Load(), tr.datagrams.Load())
	return lc, st
}

// lineAt is the log line around byte offset i, shortened.
func lineAt(log string, i int) string {
	s := strings.LastIndex(log[:i], "\n") + 1
	e := strings.Index(log[i:], "\n")
	if e < 0 {
		e = len(log) - i
	}
	line := log[s : i+e]
	if len(line) > 140 {
		line = line[:140] + "…"
	}
	return fmt.Sprint(line)
}

// checkOrder checks that the lines of order appear in log in that order.
func checkOrder(t *testing.T, log string, order []struct{ what, line string }) {
	t.Helper()
	last, lastWhat := -1, ""
	for _, o := range order {
		i := strings.Index(log, o.line)
		if i < 0 {
			t.Errorf("logread after the reboot has no %q (%s)", o.line, o.what)
			continue
		}
		if i < last {
			t.Errorf("boot order: %q (%s) logged before %s", o.line, o.what, lastWhat)
		}
		check(t, "boot order: %-32s %s", o.what, lineAt(log, i))
		last, lastWhat = i, o.what
	}
}
