package firewall

import (
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"

	"surflare-watchdog/src/route"
)

// Addresses of the flush tests, beside the topology's.
const (
	bypassClient = "198.18.1.11" // a second address of the LAN client: a bypass device by address
	mgmtPort     = "2222"        // the router's management service (SSH, LuCI) on its LAN address
)

// wanTap counts, in the internet namespace, every IP packet that arrives
// from the router's WAN, by class. What is neither the proxy's, nor a
// bypass device's, nor direct (cn_direct) traffic, nor link control, is a
// leak; the leak counters are split by sender so each path is seen.
const wanTap = `table inet wan_tap {
	counter proxy {
	}
	counter bypass {
	}
	counter direct {
	}
	counter leak_lan4 {
	}
	counter leak_lan6 {
	}
	counter leak_router4 {
	}
	counter leak_router6 {
	}
	counter leak_other {
	}

	set other4 {
		type ipv4_addr . inet_proto
		flags dynamic
	}

	set other6 {
		type ipv6_addr . inet_proto
		flags dynamic
	}

	chain in {
		type filter hook prerouting priority -500; policy accept;
		iifname != "gw" accept
		icmpv6 type { nd-router-solicit, nd-neighbor-solicit, nd-neighbor-advert, mld-listener-report, mld2-listener-report } accept
		ip protocol igmp accept
		ip daddr 198.18.10.1 counter name proxy accept
		ip saddr 198.18.1.11 counter name bypass accept
		ip daddr 198.19.0.10 counter name direct accept
		ip saddr 198.18.1.10 counter name leak_lan4 accept
		ip6 saddr fd00:1::10 counter name leak_lan6 accept
		ip saddr 198.18.2.2 counter name leak_router4 accept
		ip6 saddr fd00:2::2 counter name leak_router6 accept
		meta nfproto ipv4 add @other4 { ip saddr . meta l4proto }
		meta nfproto ipv6 add @other6 { ip6 saddr . meta l4proto }
		counter name leak_other
	}
}
`

type tapCounts map[string]uint64

func (c tapCounts) leaks() uint64 {
	return c["leak_lan4"] + c["leak_lan6"] + c["leak_router4"] + c["leak_router6"] + c["leak_other"]
}

func (c tapCounts) minus(o tapCounts) tapCounts {
	d := tapCounts{}
	for k, v := range c {
		d[k] = v - o[k]
	}
	return d
}

func readTap(t *testing.T, ns *testNS) tapCounts {
	t.Helper()
	var out struct {
		Nftables []struct {
			Counter *struct {
				Name    string `json:"name"`
				Packets uint64 `json:"packets"`
			} `json:"counter"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal([]byte(ns.nft("-j", "list", "counters", "table", "inet", "wan_tap")), &out); err != nil {
		t.Fatal(err)
	}
	c := tapCounts{}
	for _, o := range out.Nftables {
		if o.Counter != nil {
			c[o.Counter.Name] = o.Counter.Packets
		}
	}
	return c
}

// flood sends UDP datagrams from ns to raddr (from laddr, with an SO_MARK
// when mark != 0) every gap until ctx ends, ignoring send errors: the kill
// switch's drops answer the router's own sends with EPERM. It returns how
// many it tried to send.
func flood(ctx context.Context, wg *sync.WaitGroup, ns *testNS, network, laddr, raddr string, mark int, gap time.Duration) *atomic.Int64 {
	sent := new(atomic.Int64)
	wg.Add(1)
	go func() {
		defer wg.Done()
		ns.run(func() {
			d := net.Dialer{}
			if laddr != "" {
				d.LocalAddr = &net.UDPAddr{IP: net.ParseIP(laddr)}
			}
			if mark != 0 {
				d.Control = func(_, _ string, c syscall.RawConn) error {
					var serr error
					c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, mark) })
					return serr
				}
			}
			c, err := d.Dial(network, raddr)
			if err != nil {
				ns.t.Errorf("flood %s → %s: %v", laddr, raddr, err)
				return
			}
			defer c.Close()
			payload := []byte("flood")
			for ctx.Err() == nil {
				c.Write(payload)
				sent.Add(1)
				time.Sleep(gap)
			}
		})
	}()
	return sent
}

// flushRun is one run of the flush scenario: the kill switch (with or
// without the routing layer) on a router, traffic of every class from the
// LAN and from the router itself, then `nft flush ruleset` as fw4 does it.
// With guard the firewall guard restores the tables; without it nothing
// does for window (a daemon killed -9), then Apply restores them.
type flushResult struct {
	pre                   tapCounts        // before the flush
	before, during, after tapCounts        // up to the flush's end, while the tables were gone, after the restore
	sent                  map[string]int64 // per flood, over the whole run
	restoredIn            time.Duration
	mgmtErrs              []error // LAN → router management dials while the tables were gone
	layerArmed            bool    // the layer was still there while the tables were gone
}

func flushRun(t *testing.T, layer, guard bool, window time.Duration) flushResult {
	ctx := context.Background()
	tp := newTopoPrefix(t, flushNSPrefix)
	tp.lan.addAddr("eth0", bypassClient+"/24")
	runNFTScript(t, tp.inet, wanTap)
	serveTCP(t, tp.router, "tcp4", routerLAN+":"+mgmtPort, "mgmt", false)
	serveTCP(t, tp.router, "tcp6", "[fd00:1::1]:"+mgmtPort, "mgmt6", false)

	s := labSpec()
	s.RouteLayer = layer
	s.Bypass = []Device{{Name: "tv", IPs: []netip.Addr{mustAddr(bypassClient)}}}
	fw := newFW(tp.router, WithGuardInterval(time.Hour)) // only the flush's events repair
	if guard {
		gctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- fw.Guard(gctx, func() Spec { return s }) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Guard: %v", err)
			}
		})
		if _, ok := waitTable(tp.router, "inet", TableKillSwitch, 2*time.Second); !ok {
			t.Fatal("guard did not apply the kill switch")
		}
	} else if _, err := fw.Apply(ctx, s); err != nil {
		t.Fatal(err)
	}

	fctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	const fast, slow = 500 * time.Microsecond, 2 * time.Millisecond
	floods := map[string]*atomic.Int64{
		"lan4":    flood(fctx, &wg, tp.lan, "udp4", lanClient, echoHost+":9000", 0, fast),
		"lan6":    flood(fctx, &wg, tp.lan, "udp6", "", "["+echoHost6+"]:9000", 0, fast),
		"router4": flood(fctx, &wg, tp.router, "udp4", "", echoHost+":9001", 0, fast),
		"router6": flood(fctx, &wg, tp.router, "udp6", "", "["+echoHost6+"]:9001", 0, fast),
		"proxy":   flood(fctx, &wg, tp.router, "udp4", "", relayHost+":8443", int(MarkDirect), slow),
		"bypass":  flood(fctx, &wg, tp.lan, "udp4", bypassClient, echoHost+":9002", 0, slow),
		"lan-cn":  flood(fctx, &wg, tp.lan, "udp4", lanClient, domesticWeb+":9003", 0, slow),
		"rtr-cn":  flood(fctx, &wg, tp.router, "udp4", "", domesticWeb+":9004", 0, slow),
	}
	time.Sleep(300 * time.Millisecond)
	var r flushResult
	r.pre = readTap(t, tp.inet)
	tp.router.nft("flush", "ruleset")
	flushed := time.Now()
	// Read after the flush: what came before it, while the kill switch
	// was there, is "before".
	r.before = readTap(t, tp.inet)
	if guard {
		if !eventually(2*time.Second, func() bool { return hasTable(tp.router, TableKillSwitch) }) {
			t.Fatal("guard did not restore the kill switch within 2 s of the flush")
		}
		r.restoredIn = time.Since(flushed)
	} else {
		for time.Since(flushed) < window {
			for _, addr := range []string{routerLAN + ":" + mgmtPort, "[fd00:1::1]:" + mgmtPort} {
				if got, err := dialTCP(tp.lan, "tcp", addr, 0); got == "" {
					r.mgmtErrs = append(r.mgmtErrs, err)
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		if hasTable(tp.router, TableKillSwitch) {
			t.Fatal("something restored the kill switch: the window is not what the test thinks")
		}
	}
	st, err := fw.RouteLayer(ctx)
	r.layerArmed = err == nil && st.Armed()
	r.during = readTap(t, tp.inet).minus(r.before)
	if !guard {
		if _, err := fw.Apply(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	r.after = readTap(t, tp.inet).minus(r.before).minus(r.during)
	stop()
	wg.Wait()
	r.sent = map[string]int64{}
	for k, v := range floods {
		r.sent[k] = v.Load()
	}
	t.Logf("sent %v", r.sent)
	if r.before["leak_other"]+r.during["leak_other"]+r.after["leak_other"] > 0 {
		t.Logf("other packets at the WAN:\n%s%s", tp.inet.nft("list", "set", "inet", "wan_tap", "other4"), tp.inet.nft("list", "set", "inet", "wan_tap", "other6"))
	}
	t.Logf("at the WAN: before %v; while the tables were gone %v; after %v", r.before, r.during, r.after)
	return r
}

// hasTable asks the kernel through netlink (faster than the CLI, so the
// restore time is measured to the millisecond).
func hasTable(ns *testNS, name string) bool {
	c, err := nftables.New(nftables.WithNetNSFd(ns.fd()))
	if err != nil {
		return false
	}
	ts, err := c.ListTables()
	if err != nil {
		return false
	}
	for _, tb := range ts {
		if tb.Name == name && tb.Family == famInet {
			return true
		}
	}
	return false
}

// With the routing layer, `nft flush ruleset` while the LAN and the router
// send at a few kpps lets not one unmarked packet out, while the guard
// restores the tables; direct traffic is back right after.
func TestRouteLayerFlushLeaksNothing(t *testing.T) {
	r := flushRun(t, true, true, 0)
	t.Logf("guard restored the kill switch %v after the flush", r.restoredIn)
	for _, c := range []tapCounts{r.before, r.during, r.after} {
		if n := c.leaks(); n != 0 {
			t.Errorf("%d unmarked packets reached the WAN: %v", n, c)
		}
	}
	if !r.layerArmed {
		t.Error("the routing layer did not survive the flush")
	}
	if r.after["direct"] == 0 || r.after["proxy"] == 0 || r.after["bypass"] == 0 {
		t.Errorf("after the restore, direct, proxy and bypass traffic must flow: %v", r.after)
	}
	for k, n := range r.sent {
		if n < 20 { // about 300 at the intended pace; a loaded CI machine sends fewer
			t.Errorf("flood %s sent only %d datagrams: the run proves nothing", k, n)
		}
	}
}

// While nothing restores the tables (the daemon killed -9 just before a
// flush), the layer keeps holding: no leak, however long. The classes that
// must keep working do — the proxy's own sockets, bypass devices by
// address, LAN → router management over IPv4 and IPv6 — and direct
// traffic (cn_direct, from the LAN and from the router) pauses until the
// kill switch is back.
func TestRouteLayerClassesWhileNFTablesIsEmpty(t *testing.T) {
	r := flushRun(t, true, false, 300*time.Millisecond)
	if n := r.before.leaks() + r.during.leaks() + r.after.leaks(); n != 0 {
		t.Errorf("%d unmarked packets reached the WAN", n)
	}
	if !r.layerArmed {
		t.Error("the routing layer did not survive the flush")
	}
	if len(r.mgmtErrs) != 0 {
		t.Errorf("LAN → router management failed while the tables were gone: %v", r.mgmtErrs)
	}
	if r.during["proxy"] == 0 || r.during["bypass"] == 0 {
		t.Errorf("the proxy's and the bypass device's traffic must keep flowing: %v", r.during)
	}
	if r.during["direct"] != 0 {
		t.Errorf("direct traffic must pause while the kill switch is gone (no one judges it): %v", r.during)
	}
	if r.after["direct"] == 0 {
		t.Errorf("direct traffic did not resume after the restore: %v", r.after)
	}
}

// The control: the same run without the layer leaks on every path the
// layer closes, so the tests above can fail.
func TestFlushLeaksWithoutTheRouteLayer(t *testing.T) {
	r := flushRun(t, false, false, 300*time.Millisecond)
	if r.pre.leaks() != 0 {
		t.Fatalf("the kill switch leaked before the flush: %v", r.pre)
	}
	for _, k := range []string{"leak_lan4", "leak_lan6", "leak_router4", "leak_router6"} {
		if r.during[k] == 0 {
			t.Errorf("%s: no leak without the layer; the flood does not test that path: %v", k, r.during)
		}
	}
}

// Removing the layer (fail-open, a stop with --open-on-exit, the kill
// switch turned off) leaves nothing that blocks: no rule of the block, no
// hold device, and the LAN and the router reach the internet directly.
func TestRouteLayerRemovedWithTheKillSwitch(t *testing.T) {
	ctx := context.Background()
	tp := newTopoPrefix(t, flushNSPrefix)
	serveTCP(t, tp.inet, "tcp4", echoHost+":80", "echo", false)
	s := labSpec()
	s.RouteLayer = true
	fw := newFW(tp.router)
	if _, err := fw.Apply(ctx, s); err != nil {
		t.Fatal(err)
	}
	if ch, err := fw.Apply(ctx, s); err != nil || !ch.Empty() {
		t.Fatalf("second Apply = %v, %v; want no changes", ch, err)
	}
	// A stop that keeps the kill switch keeps the layer.
	if _, err := fw.Teardown(ctx, true); err != nil {
		t.Fatal(err)
	}
	if st, _ := fw.RouteLayer(ctx); !st.Armed() {
		t.Fatalf("Teardown(keep kill switch) removed the layer: %+v", st)
	}
	if _, err := fw.Teardown(ctx, false); err != nil {
		t.Fatal(err)
	}
	st, err := fw.RouteLayer(ctx)
	if err != nil || st.Rules4+st.Rules6 != 0 || st.Device {
		t.Fatalf("after Teardown: %+v, %v", st, err)
	}
	for _, ns := range []*testNS{tp.lan, tp.router} {
		if got, err := dialTCP(ns, "tcp4", echoHost+":80", 0); got != "echo" {
			t.Errorf("%s: without the kill switch traffic must go direct: %q, %v", ns.name, got, err)
		}
	}
	// Apply without the layer removes it too (the kill switch turned down
	// to nftables only).
	if _, err := fw.Apply(ctx, s); err != nil {
		t.Fatal(err)
	}
	s.RouteLayer = false
	if _, err := fw.Apply(ctx, s); err != nil {
		t.Fatal(err)
	}
	if st, _ := fw.RouteLayer(ctx); st.Rules4+st.Rules6 != 0 || st.Device {
		t.Fatalf("Apply without the layer left %+v", st)
	}
}

// With the layer on and the tables in place, every class of the kill
// switch behaves as without it: the vendor's route chain re-routes the
// router's TCP into the tunnel (past the hold device), the router's
// domestic DNS has its mark cleared and leaves direct, the proxy's 0xff and
// the relay endpoints leave, LAN TCP is proxied, and unmarked router
// traffic to anywhere else is still dropped by the kill switch.
func TestRouteLayerKeepsTheKillSwitchClasses(t *testing.T) {
	tp := newTopoPrefix(t, flushNSPrefix)
	tp.inet.addAddr("lo", domesticDNS+"/32")
	echo := serveTCP(t, tp.inet, "tcp4", echoHost+":80", "echo", false)
	serveTCP(t, tp.inet, "tcp4", relayHost+":8443", "relay", false)
	dot := serveTCP(t, tp.inet, "tcp4", domesticDNS+":853", "dot", false)
	s := labSpec()
	s.RouteLayer = true
	apply(t, tp.router, s)

	if _, err := dialTCP(tp.router, "tcp4", echoHost+":80", 0); err == nil {
		t.Error("unmarked router traffic passed the kill switch")
	}
	if got, err := dialTCP(tp.router, "tcp4", echoHost+":80", int(MarkDirect)); got != "echo" {
		t.Errorf("the proxy's own socket: %q, %v", got, err)
	}
	if got, err := dialTCP(tp.router, "tcp4", relayHost+":8443", 0); got != "relay" {
		t.Errorf("a released connection to a relay endpoint: %q, %v", got, err)
	}
	if c := echo.conns(); len(c) != 1 || !strings.HasPrefix(c[0].remote, routerWAN+":") {
		t.Errorf("echo saw %+v, want one connection from the WAN's address", c)
	}

	addFakeVendor(t, tp.router)
	tunnelRouting(t, tp.router, route.IPv4)
	proxy := serveTCP(t, tp.router, "tcp4", "127.0.0.1:10800", "proxy", true)
	if got, err := dialTCP(tp.router, "tcp4", echoHost+":80", 0); got != "proxy" {
		t.Errorf("router TCP marked by the vendor must reach the proxy: %q, %v", got, err)
	}
	if got, err := dialTCP(tp.router, "tcp4", domesticDNS+":853", 0); got != "dot" {
		t.Errorf("domestic DoT (mark cleared by dns_route) must go direct: %q, %v", got, err)
	}
	if c := dot.conns(); len(c) != 1 || !strings.HasPrefix(c[0].remote, routerWAN+":") {
		t.Errorf("DoT server saw %+v, want the WAN's address", c)
	}
	if got, err := dialTCP(tp.lan, "tcp4", echoHost+":80", 0); got != "proxy" {
		t.Errorf("LAN TCP must be proxied: %q, %v", got, err)
	}
	if n := len(proxy.conns()); n != 2 {
		t.Errorf("proxy saw %d connections, want the router's and the LAN's", n)
	}
}

// The same over IPv6 with the proxy policy: the router's own direct IPv6
// (cn_direct6) is held, released and re-routed (ip6_route_me_harder) and
// leaves from the WAN's IPv6 address; LAN IPv6 TCP is proxied.
func TestRouteLayerIPv6Proxy(t *testing.T) {
	const domestic6 = "fd00:19::10"
	tp := newTopoPrefix(t, flushNSPrefix)
	tp.inet.addAddr("lo", domestic6+"/128")
	dom := serveTCP(t, tp.inet, "tcp6", "["+domestic6+"]:80", "dom6", false)
	echo6 := serveTCP(t, tp.inet, "tcp6", "["+echoHost6+"]:80", "echo6", false)
	proxy6 := serveTCP(t, tp.router, "tcp6", "[::1]:10800", "proxy6", true)
	tunnelRouting(t, tp.router, route.IPv4, route.IPv6)
	s := labSpec()
	s.IPv6 = IPv6Proxy
	s.CNDirect6 = mustPrefixes("fd00:19::/32")
	s.Private = mustPrefixes("10.0.0.0/8", "fe80::/10", "ff00::/8") // the lab's fd00::/8 is not private here
	s.RouteLayer = true
	apply(t, tp.router, s)

	if got, err := dialTCP(tp.router, "tcp6", "["+domestic6+"]:80", 0); got != "dom6" {
		t.Fatalf("router's own IPv6 to cn_direct6: %q, %v", got, err)
	}
	if c := dom.conns(); len(c) != 1 || !strings.HasPrefix(c[0].remote, "[fd00:2::2]:") {
		t.Errorf("domestic IPv6 host saw %+v, want the WAN's IPv6 address", c)
	}
	if _, err := dialTCP(tp.router, "tcp6", "["+echoHost6+"]:80", 0); err == nil {
		t.Error("router's unmarked IPv6 to a foreign host passed the kill switch")
	}
	if got, err := dialTCP(tp.lan, "tcp6", "["+echoHost6+"]:80", 0); got != "proxy6" {
		t.Errorf("LAN IPv6 TCP must be proxied: %q, %v", got, err)
	}
	if n := len(echo6.conns()) + len(proxy6.conns()); n != 1 {
		t.Errorf("foreign host %v, proxy %v: want only the LAN's connection, at the proxy", echo6.conns(), proxy6.conns())
	}
}
