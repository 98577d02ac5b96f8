package firewall

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// An idle guard reads neither nftables nor the routing layer back on its
// periodic passes, yet every change to what the layer reads or owns comes
// with an rtnetlink message, so it is still followed on the next pass: a
// new LAN prefix gets its rule, a deleted rule of ours comes back. (No
// full pass in this test: only the events can make a pass look.)
func TestGuardIdlePassesSkipTheRoutingLayerButFollowItsChanges(t *testing.T) {
	tp := newTopo(t)
	ns := tp.router
	fw := newFW(ns, WithGuardInterval(50*time.Millisecond), withGuardFullEvery(1<<30))
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
	idle := func(what string) {
		t.Helper()
		skips := fw.RouteSkips()
		if !eventually(5*time.Second, func() bool { return fw.RouteSkips() >= skips+3 }) {
			t.Fatalf("%s: idle passes still read the routing layer back (%d skipped)", what, fw.RouteSkips()-skips)
		}
	}
	if _, ok := waitTable(ns, "inet", TableKillSwitch, 2*time.Second); !ok {
		t.Fatal("Guard did not apply at start")
	}
	idle("at start")

	// A second LAN prefix: the layer must let it through (layerSpec reads
	// the LAN's prefixes), and the address's message says it changed.
	before := ipRules(t, ns, "-4")
	if strings.Contains(before, "198.18.7.0/24") {
		t.Fatalf("the new prefix is there before it is added:\n%s", before)
	}
	ns.addAddr("br-lan", "198.18.7.1/24")
	if !eventually(3*time.Second, func() bool { return strings.Contains(ipRules(t, ns, "-4"), "198.18.7.0/24") }) {
		t.Fatalf("a LAN prefix added while the guard idled got no rule:\nbefore\n%s\nnow\n%s", before, ipRules(t, ns, "-4"))
	}
	idle("after the new prefix")

	// One of our rules deleted by someone else.
	rules := ipRules(t, ns, "-4")
	var prio string
	for _, l := range strings.Split(rules, "\n") {
		if p, _, ok := strings.Cut(l, ":"); ok && strings.Contains(l, "198.18.7.0/24") {
			prio = strings.TrimSpace(p)
			break
		}
	}
	if prio == "" {
		t.Fatalf("no rule of the new prefix:\n%s", rules)
	}
	if out, err := exec.Command("ip", "-n", ns.name, "-4", "rule", "del", "priority", prio).CombinedOutput(); err != nil {
		t.Fatalf("ip rule del: %v\n%s", err, out)
	}
	// Rules of one priority may come back in another order.
	sorted := func(s string) string { l := strings.Split(s, "\n"); slices.Sort(l); return strings.Join(l, "\n") }
	if !eventually(3*time.Second, func() bool { return sorted(ipRules(t, ns, "-4")) == sorted(rules) }) {
		t.Fatalf("rule %s deleted while the guard idled was not restored:\nwant\n%s\nhave\n%s", prio, rules, ipRules(t, ns, "-4"))
	}
	idle("after the repair")
}
