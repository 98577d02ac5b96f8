package firewall

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"surflare-watchdog/src/testenv"
	"testing"
	"time"

	"surflare-watchdog/src/route"
)

func newFW(ns *testNS, opts ...Option) *Firewall {
	return New(append([]Option{WithNetNS(ns.fd())}, opts...)...)
}

func ipRules(t *testing.T, ns *testNS, fam string) string {
	t.Helper()
	out, err := exec.Command("ip", "-n", ns.name, fam, "rule").CombinedOutput()
	if err != nil {
		t.Fatalf("ip rule: %v\n%s", err, out)
	}
	return string(out)
}

func TestTeardownRemovesEverythingOfOurs(t *testing.T) {
	ctx := context.Background()
	ns := newNS(t, "td")
	addFakeVendor(t, ns)
	vendorBefore := ns.nft("list", "table", "inet", "surflare")
	fw := newFW(ns)
	s := labSpec()
	s.Mode = ModeGlobal
	s.IPv6 = IPv6Proxy
	if _, err := fw.Apply(ctx, s); err != nil {
		t.Fatal(err)
	}
	if _, err := fw.EnsureRouting(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := fw.TraceStart(ctx, TraceFilter{}); err != nil {
		t.Fatal(err)
	}
	st, err := fw.Inspect(ctx)
	if err != nil || !st.VendorExtended || !st.TraceTable || len(st.Tables) != 6 {
		t.Fatalf("before teardown: %+v, %v", st, err)
	}

	ch, err := fw.Teardown(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if out := ns.nft("list", "tables"); !strings.Contains(out, "inet "+TableKillSwitch) || strings.Contains(out, TableTProxy) {
		t.Fatalf("Teardown(keepKillSwitch) left: %s (changes %v)", out, ch)
	}
	if _, err := fw.Teardown(ctx, false); err != nil {
		t.Fatal(err)
	}
	if out := ns.nft("list", "ruleset"); strings.TrimSpace(out) != strings.TrimSpace(vendorBefore) {
		t.Fatalf("after teardown the ruleset must be exactly the vendor's table:\n%s\n--- want\n%s", out, vendorBefore)
	}
	for _, fam := range []string{"-4", "-6"} {
		if out := ipRules(t, ns, fam); strings.Contains(out, "fwmark") {
			t.Fatalf("teardown left a fwmark rule:\n%s", out)
		}
	}
	if ch, err := fw.Teardown(ctx, false); err != nil || !ch.Empty() {
		t.Fatalf("second teardown = %v, %v; want nothing to do", ch, err)
	}
}

func TestInspectFindsCrashLeftovers(t *testing.T) {
	ctx := context.Background()
	ns := newNS(t, "insp")
	fw := newFW(ns)
	st, err := fw.Inspect(ctx)
	if err != nil || len(st.Problems()) != 0 || st.KillSwitch {
		t.Fatalf("clean namespace: %+v %v, problems %v", st, err, st.Problems())
	}
	s := labSpec()
	s.ProxyDown = true
	if _, err := fw.Apply(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := fw.TraceStart(ctx, TraceFilter{}); err != nil {
		t.Fatal(err)
	}
	// A half-finished vendor disconnect: two copies of its rule.
	for i := 0; i < 2; i++ {
		if out, err := exec.Command("ip", "-n", ns.name, "rule", "add", "fwmark", "0x1", "lookup", "100").CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	st, err = fw.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !st.KillSwitch || !st.TProxyTombstoned || !st.TraceTable || !st.Routing[0].Duplicated() {
		t.Fatalf("Inspect = %+v", st)
	}
	probs := strings.Join(st.Problems(), "\n")
	for _, want := range []string{"tombstoned", "trace table", "2 duplicated ipv4 fwmark", "table 100 has no local default route", "nothing listens on the proxy port 10800"} {
		if !strings.Contains(probs, want) {
			t.Errorf("Problems() lacks %q:\n%s", want, probs)
		}
	}
	h, err := route.Open(ns.h)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if n, err := h.Dedupe(ctx, route.IPv4); err != nil || n != 1 {
		t.Fatalf("Dedupe = %d, %v", n, err)
	}
	if err := fw.TraceStop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := fw.Apply(ctx, labSpec()); err != nil {
		t.Fatal(err)
	}
	st, _ = fw.Inspect(ctx)
	if st.TProxyTombstoned || st.TraceTable || st.Routing[0].Duplicated() {
		t.Fatalf("after repair: %+v", st)
	}
	// A proxy that listens (here on IPv6's wildcard only, as a dual-stack
	// listener does) is seen in the firewall's namespace, and a listener on
	// the proxy port of the caller's namespace is not.
	if host, err := net.Listen("tcp4", "127.0.0.1:10800"); err == nil {
		defer host.Close()
		if st, err = fw.Inspect(ctx); err != nil || st.ProxyListening {
			t.Fatalf("a listener outside the namespace counted: ProxyListening = %v, %v", st.ProxyListening, err)
		}
	}
	var ln net.Listener
	ns.run(func() { ln, _ = net.Listen("tcp6", "[::]:10800") })
	if ln == nil {
		t.Fatal("no listener on [::]:10800 in the namespace")
	}
	defer ln.Close()
	if st, err = fw.Inspect(ctx); err != nil || !st.ProxyListening {
		t.Fatalf("proxy listening in the namespace: ProxyListening = %v, %v", st.ProxyListening, err)
	}
	if probs := strings.Join(st.Problems(), "\n"); strings.Contains(probs, "nothing listens") {
		t.Errorf("Problems() with a listening proxy:\n%s", probs)
	}
}

func waitTable(ns *testNS, fam, name string, d time.Duration) (time.Duration, bool) {
	start := time.Now()
	ok := eventually(d, func() bool {
		_, err := ns.nftErr("list", "table", fam, name)
		return err == nil
	})
	return time.Since(start), ok
}

func TestGuardReappliesAfterWipe(t *testing.T) {
	ns := newNS(t, "guard")
	fw := newFW(ns, WithGuardInterval(time.Hour)) // only events may repair
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fw.Guard(ctx, labSpec) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Guard: %v", err)
		}
	})
	if _, ok := waitTable(ns, "inet", TableKillSwitch, 2*time.Second); !ok {
		t.Fatal("Guard did not apply at start")
	}
	before := normalizeJSON(t, ns.nft("-j", "list", "ruleset"))

	ns.nft("delete", "table", "inet", TableKillSwitch)
	took, ok := waitTable(ns, "inet", TableKillSwitch, time.Second)
	if !ok {
		t.Fatal("kill switch not re-applied within a second of its deletion")
	}
	t.Logf("kill switch back after %v", took)

	// fw4-style wipe of everything.
	ns.nft("flush", "ruleset")
	if !eventually(time.Second, func() bool {
		return normalizeJSON(t, ns.nft("-j", "list", "ruleset")) == before
	}) {
		t.Fatalf("ruleset not restored within a second of a flush:\n%s", ns.nft("list", "ruleset"))
	}
	// A rule deleted from a chain of ours is noticed too.
	out := ns.nft("-a", "list", "chain", "ip", TableTProxy, "prerouting")
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "tproxy to") {
			h := line[strings.LastIndex(line, "handle ")+len("handle "):]
			ns.nft("delete", "rule", "ip", TableTProxy, "prerouting", "handle", strings.TrimSpace(h))
		}
	}
	if !eventually(time.Second, func() bool {
		return strings.Contains(ns.nft("list", "chain", "ip", TableTProxy, "prerouting"), "tproxy to")
	}) {
		t.Fatal("deleted tproxy rule not restored")
	}
	// A boot lock that reappears (fw4 re-including it) is removed.
	runNFTScript(t, ns, "table inet "+TableBootLock+" {\n}\n")
	if !eventually(time.Second, func() bool {
		_, err := ns.nftErr("list", "table", "inet", TableBootLock)
		return err != nil
	}) {
		t.Fatal("boot lock not removed while the kill switch is up")
	}
}

func TestGlobalModeExtendsVendorTable(t *testing.T) {
	ctx := context.Background()
	tp := newTopo(t)
	domestic := serveTCP(t, tp.inet, "tcp4", domesticWeb+":80", "domestic", false)
	proxy := serveTCP(t, tp.router, "tcp4", "127.0.0.1:10800", "proxy", true)
	addFakeVendor(t, tp.router)
	tunnelRouting(t, tp.router, route.IPv4)
	fw := newFW(tp.router)
	rule := labSpec()
	if _, err := fw.Apply(ctx, rule); err != nil {
		t.Fatal(err)
	}
	// Rule mode: the (fake) vendor proxies the router's TCP to domestic hosts too.
	if got, _ := dialTCP(tp.router, "tcp4", domesticWeb+":80", 0); got != "proxy" {
		t.Fatalf("rule mode with the fake vendor: %q", got)
	}
	global := labSpec()
	global.Mode = ModeGlobal
	ch, err := fw.Apply(ctx, global)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ch.String(), "cn_direct accepts installed") {
		t.Fatalf("changes %v", ch)
	}
	for _, chain := range []string{"output", "prerouting"} {
		out := tp.router.nft("list", "chain", "inet", TableVendor, chain)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) < 4 || !strings.Contains(lines[3], "@"+SetVendorCNDirect) {
			t.Fatalf("vendor chain %s does not start with our accept:\n%s", chain, out)
		}
	}
	if got, _ := dialTCP(tp.router, "tcp4", domesticWeb+":80", 0); got != "domestic" {
		t.Fatalf("global mode: cn_direct destination must go direct, got %q", got)
	}
	if ch, err := fw.Apply(ctx, global); err != nil || !ch.Empty() {
		t.Fatalf("second global Apply = %v, %v", ch, err)
	}
	// The vendor reconnects (its table is recreated): Guard extends it again.
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go fw.Guard(gctx, func() Spec { return global })
	tp.router.nft("delete", "table", "inet", TableVendor)
	addFakeVendor(t, tp.router)
	if !eventually(time.Second, func() bool {
		return strings.Contains(tp.router.nft("list", "chain", "inet", TableVendor, "output"), SetVendorCNDirect)
	}) {
		t.Fatal("recreated vendor table not extended within a second")
	}
	cancel()
	// Back to rule mode: our additions leave the vendor's table.
	if _, err := fw.Apply(ctx, rule); err != nil {
		t.Fatal(err)
	}
	if out := tp.router.nft("list", "table", "inet", TableVendor); strings.Contains(out, "sw_cn") {
		t.Fatalf("rule mode left our additions in the vendor table:\n%s", out)
	}
	if len(domestic.conns()) != 1 || len(proxy.conns()) != 1 {
		t.Fatalf("domestic %v proxy %v", domestic.conns(), proxy.conns())
	}
}

func TestDomesticSyncMakesLANTrafficDirect(t *testing.T) {
	ctx := context.Background()
	tp := newTopo(t)
	echo := serveTCP(t, tp.inet, "tcp4", echoHost+":80", "echo", false)
	serveTCP(t, tp.router, "tcp4", "127.0.0.1:10800", "proxy", true)
	tunnelRouting(t, tp.router, route.IPv4)
	fw := newFW(tp.router)
	if _, err := fw.Apply(ctx, labSpec()); err != nil {
		t.Fatal(err)
	}
	if got, _ := dialTCP(tp.lan, "tcp4", echoHost+":80", 0); got != "proxy" {
		t.Fatalf("before SmartDNS resolved it: %q", got)
	}
	// SmartDNS resolves a domestic name to echoHost and adds it to its target.
	tp.router.nft("add", "element", "inet", TableKillSwitch, SetDomestic, "{ "+echoHost+" timeout 30m }")
	n, err := fw.SyncDomestic(ctx, DomesticSource)
	if err != nil || n != 1 {
		t.Fatalf("SyncDomestic = %d, %v; want 1", n, err)
	}
	out := tp.router.nft("list", "set", "ip", TableTProxy, SetDomestic)
	if !strings.Contains(out, echoHost+" timeout 30m") {
		t.Fatalf("copy lacks the element with its timeout:\n%s", out)
	}
	if n, err := fw.SyncDomestic(ctx, DomesticSource); err != nil || n != 0 {
		t.Fatalf("second SyncDomestic = %d, %v; want 0", n, err)
	}
	if got, _ := dialTCP(tp.lan, "tcp4", echoHost+":80", 0); got != "echo" {
		t.Fatalf("domestic address must go direct: %q", got)
	}
	if c := echo.conns(); len(c) != 1 || !strings.HasPrefix(c[0].remote, lanClient+":") {
		t.Fatalf("echo saw %+v", c)
	}
}

func TestMoatCountsRelayPathAnomalies(t *testing.T) {
	ctx := context.Background()
	tp := newTopo(t)
	serveTCP(t, tp.inet, "tcp4", relayHost+":8443", "relay", false)
	fw := newFW(tp.router)
	if _, err := fw.Apply(ctx, labSpec()); err != nil {
		t.Fatal(err)
	}
	if got, err := dialTCP(tp.router, "tcp4", relayHost+":8443", int(MarkDirect)); got != "relay" {
		t.Fatalf("relay: %q %v", got, err)
	}
	if _, err := dialTCP(tp.router, "tcp4", relayHost+":9", int(MarkDirect)); !isRefused(err) {
		t.Fatalf("closed relay port: %v", err)
	}
	m, err := fw.MoatCounters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m.SynOut != 2 || m.SynAckIn != 1 || m.RstIn != 1 || m.FinIn < 1 || m.SynIn != 0 {
		t.Fatalf("moat = %+v; want 2 SYN out, 1 SYN-ACK, 1 RST, FIN ≥ 1", m)
	}
	if r := m.SynRatio(); r != 0.5 {
		t.Fatalf("SynRatio = %v", r)
	}
}

func TestTraceShowsWhereThePacketWasDropped(t *testing.T) {
	ctx := context.Background()
	tp := newTopo(t)
	serveTCP(t, tp.inet, "tcp4", echoHost+":80", "echo", false)
	fw := newFW(tp.router)
	if _, err := fw.Apply(ctx, labSpec()); err != nil {
		t.Fatal(err)
	}
	if err := fw.TraceStart(ctx, TraceFilter{Addr: mustAddr(echoHost), Port: 80}); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	evs := make(chan TraceEvent, 256)
	done := make(chan error, 1)
	go func() {
		done <- fw.ReadTrace(rctx, func(e TraceEvent) {
			select {
			case evs <- e:
			default:
			}
		})
	}()
	time.Sleep(50 * time.Millisecond) // the reader joins the group
	dialTCP(tp.router, "tcp4", echoHost+":80", 0)
	found := false
	// The kernel dumps the packet's headers with the first event of each
	// chain only (the counter wake-up's log rule comes before the drop):
	// the drop is the SYN's if it carries that event's trace id.
	ids := map[uint32]bool{}
	deadline := time.After(2 * time.Second)
	for !found {
		select {
		case e := <-evs:
			t.Log(e)
			if e.Table == TableKillSwitch && e.Chain == "output" && e.Dst.String() == echoHost+":80" && e.Proto == 6 {
				ids[e.ID] = true
			}
			found = e.Table == TableKillSwitch && e.Chain == "output" && e.Verdict == "drop" && ids[e.ID]
		case <-deadline:
			t.Fatal("no trace event showing the kill switch dropping the SYN")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := fw.TraceStop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := tp.router.nftErr("list", "table", "inet", TableTrace); err == nil {
		t.Fatal("trace table still there after TraceStop")
	}
}

func repoRoot(t *testing.T) string { return testenv.RepoRoot(t) }

func TestBootLockHandsOverAndExpires(t *testing.T) {
	ctx := context.Background()
	lock, err := os.ReadFile(filepath.Join(repoRoot(t), "files", "usr", "share", "surflare", "boot-lock.nft"))
	if err != nil {
		t.Fatal(err)
	}
	tp := newTopo(t)
	echo := serveTCP(t, tp.inet, "tcp4", echoHost+":80", "echo", false)
	if got, _ := dialTCP(tp.lan, "tcp4", echoHost+":80", 0); got != "echo" {
		t.Fatal("baseline failed")
	}
	// Locked: neither the router nor the LAN reaches the internet.
	runNFTScript(t, tp.router, string(lock))
	if _, err := dialTCP(tp.router, "tcp4", echoHost+":80", 0); err == nil {
		t.Error("boot lock let the router out")
	}
	if _, err := dialTCP(tp.lan, "tcp4", echoHost+":80", 0); err == nil {
		t.Error("boot lock let the LAN out")
	}
	// The kill switch replaces it in one batch.
	fw := newFW(tp.router)
	ch, err := fw.Apply(ctx, labSpec())
	if err != nil || !strings.Contains(ch.String(), "surflare_boot_lock: deleted") {
		t.Fatalf("Apply = %v, %v; want the boot lock deleted with it", ch, err)
	}
	if _, err := tp.router.nftErr("list", "table", "inet", TableBootLock); err == nil {
		t.Fatal("boot lock still there")
	}
	if _, err := fw.Teardown(ctx, false); err != nil {
		t.Fatal(err)
	}
	// Without a daemon it unlocks itself: the same file with a 1 s lifetime.
	runNFTScript(t, tp.router, strings.ReplaceAll(string(lock), "timeout 120s", "timeout 1s"))
	if _, err := dialTCP(tp.lan, "tcp4", echoHost+":80", 0); err == nil {
		t.Error("boot lock let the LAN out")
	}
	if !eventually(3*time.Second, func() bool {
		got, _ := dialTCP(tp.lan, "tcp4", echoHost+":80", 0)
		return got == "echo"
	}) {
		t.Fatal("boot lock did not expire")
	}
	if n := len(echo.conns()); n != 2 {
		t.Fatalf("echo host saw %d connections, want the baseline and the one after expiry", n)
	}
}

func TestFW4MasqueradeDetectedAndReloaded(t *testing.T) {
	ctx := context.Background()
	ns := newNS(t, "fw4")
	fw4 := `table inet fw4 {
	chain srcnat {
		type nat hook postrouting priority srcnat; policy accept;
		oifname "wan" jump srcnat_wan
	}

	chain srcnat_wan {
		meta nfproto ipv4 masquerade
	}
}
`
	reloads := 0
	clk := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	fw := newFW(ns, WithClock(clk), WithRunner(func(ctx context.Context, name string, args ...string) ([]byte, error) {
		reloads++
		runNFTScript(t, ns, fw4) // what `fw4 reload` does: rewrite its table
		return nil, nil
	}))
	if st, err := fw.CheckMasquerade(ctx); err != nil || st.FW4Present {
		t.Fatalf("no fw4: %+v, %v", st, err)
	}
	runNFTScript(t, ns, fw4)
	if st, err := fw.CheckMasquerade(ctx); err != nil || !st.FW4Present || !st.Masquerade {
		t.Fatalf("fw4 with masquerade: %+v, %v", st, err)
	}
	if ok, err := fw.RecoverMasquerade(ctx); ok || err != nil || reloads != 0 {
		t.Fatalf("healthy fw4 was reloaded: %v %v %d", ok, err, reloads)
	}
	ns.nft("flush", "chain", "inet", "fw4", "srcnat_wan")
	st, _ := fw.Inspect(ctx)
	if !strings.Contains(strings.Join(st.Problems(), "\n"), "no masquerade") {
		t.Fatalf("Inspect problems %v", st.Problems())
	}
	if ok, err := fw.RecoverMasquerade(ctx); !ok || err != nil || reloads != 1 {
		t.Fatalf("RecoverMasquerade = %v, %v (reloads %d)", ok, err, reloads)
	}
	if st, _ := fw.CheckMasquerade(ctx); !st.Masquerade {
		t.Fatal("masquerade not back after the reload")
	}
	ns.nft("flush", "chain", "inet", "fw4", "srcnat_wan")
	clk.now = clk.now.Add(10 * time.Second)
	if ok, _ := fw.RecoverMasquerade(ctx); ok || reloads != 1 {
		t.Fatalf("second reload within the gap was not rate-limited (reloads %d)", reloads)
	}
}
