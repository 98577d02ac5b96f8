package firewall

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// An idle Guard reads nothing back on its periodic passes (issue 19: those
// reads were most of an idle daemon's CPU), yet a drift that only the
// periodic pass repairs — a rule added to a chain of ours, a change the
// event filter lets by — is still repaired within a pass or two, and a
// change outside nftables (the routing layer's ip rule) still is too.
func TestGuardIdlePassesSkipReadsButRepairQuietDrift(t *testing.T) {
	tp := newTopo(t)
	ns := tp.router
	fw := newFW(ns, WithGuardInterval(50*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	spec := func() Spec { s := labSpec(); s.RouteLayer = true; return s }
	go func() { done <- fw.Guard(ctx, spec) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Guard: %v", err)
		}
	})
	if _, ok := waitTable(ns, "inet", TableKillSwitch, 2*time.Second); !ok {
		t.Fatal("Guard did not apply at start")
	}
	if !eventually(3*time.Second, func() bool { return fw.GuardSkips() >= 3 }) {
		t.Fatalf("an idle guard read everything back on every pass (%d skipped)", fw.GuardSkips())
	}
	if n, ok := fw.NFTEvents(); !ok || n == 0 {
		t.Fatalf("NFTEvents = %d, %v while the guard's monitor runs", n, ok)
	}

	// Quiet drift: a rule slipped in front of a chain of ours. Its event
	// is no reason for an immediate re-apply; the periodic pass must see
	// that nftables changed and read everything back.
	chain := firstChain(t, ns.nft("list", "table", "inet", TableKillSwitch))
	select { // what the start's own batch left pending
	case <-fw.NFTChanged():
	default:
	}
	ns.nft("insert", "rule", "inet", TableKillSwitch, chain, "counter", "accept", "comment", `"drift"`)
	select { // a reader waiting for changes (strict direct's server ports) wakes
	case <-fw.NFTChanged():
	case <-time.After(2 * time.Second):
		t.Fatal("NFTChanged did not fire for a rule added by someone else")
	}
	if !eventually(2*time.Second, func() bool {
		return !strings.Contains(ns.nft("list", "chain", "inet", TableKillSwitch, chain), "drift")
	}) {
		t.Fatalf("a rule added to chain %s was not removed by the periodic pass:\n%s", chain,
			ns.nft("list", "chain", "inet", TableKillSwitch, chain))
	}

	// Outside nftables: the routing layer's rules are still checked on
	// every pass, event or not.
	rules := ipRules(t, ns, "-4")
	var prio string
	for _, l := range strings.Split(rules, "\n") {
		if p, _, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(p) != "0" && !strings.Contains(l, "lookup local") &&
			!strings.Contains(l, "lookup main") && !strings.Contains(l, "lookup default") {
			prio = strings.TrimSpace(p)
			break
		}
	}
	if prio == "" {
		t.Fatalf("no routing-layer rule to remove:\n%s", rules)
	}
	// Idle again (a repair is followed by a full pass) before the change.
	skips := fw.GuardSkips()
	if !eventually(2*time.Second, func() bool { return fw.GuardSkips() >= skips+2 }) {
		t.Fatal("the guard did not go back to idle passes after the repair")
	}
	skips = fw.GuardSkips()
	if out, err := exec.Command("ip", "-n", ns.name, "-4", "rule", "del", "priority", prio).CombinedOutput(); err != nil {
		t.Fatalf("ip rule del: %v\n%s", err, out)
	}
	if !eventually(2*time.Second, func() bool { return ipRules(t, ns, "-4") == rules }) {
		t.Fatalf("the routing layer's rule %s was not restored:\nwant\n%s\nhave\n%s", prio, rules, ipRules(t, ns, "-4"))
	}
	t.Logf("ip rule %s restored; idle passes meanwhile: %d", prio, fw.GuardSkips()-skips)
}

// firstChain is the name of the first chain in an `nft list table` output.
func firstChain(t *testing.T, table string) string {
	t.Helper()
	for _, l := range strings.Split(table, "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "chain" {
			return f[1]
		}
	}
	t.Fatalf("no chain in:\n%s", table)
	return ""
}
