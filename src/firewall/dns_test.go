package firewall

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"surflare-watchdog/src/route"
)

const domesticDNS = "198.19.0.53" // labSpec's DNSDirect, inside cn_direct

// The router's own foreign DNS goes into the tunnel (UDP and TCP), its
// domestic DNS goes direct even though the vendor marks all of its TCP, and
// with the vendor's policy route gone nothing of the foreign DNS leaves.
func TestRouterDNSSteering(t *testing.T) {
	ctx := context.Background()
	tp := newTopo(t)
	tp.inet.addAddr("lo", domesticDNS+"/32")
	tp.inet.addAddr("lo", "198.18.50.2/32")
	foreignUDP := serveUDP(t, tp.inet, "udp4", foreignDNS+":53", "foreign", false)
	foreignTCP := serveTCP(t, tp.inet, "tcp4", foreignDNS+":53", "foreign", false)
	doh := serveTCP(t, tp.inet, "tcp4", "198.18.50.2:443", "doh", false)
	dot := serveTCP(t, tp.inet, "tcp4", domesticDNS+":853", "dot", false)
	domUDP := serveUDP(t, tp.inet, "udp4", domesticDNS+":53", "domestic", false)

	fw := apply(t, tp.router, labSpec())
	// Before the tunnel is up, UDP to the foreign resolver is marked, finds no
	// policy route and is dropped by the postrouting guard: it never leaves.
	if got, err := exchangeUDP(tp.router, "udp4", foreignDNS+":53", []byte("q")); err == nil {
		t.Errorf("foreign DNS left without the tunnel: %q", got)
	}
	cs, err := fw.KillSwitchCounters(ctx)
	if err != nil || cs[CounterUnroutedMark] == 0 {
		t.Errorf("counters %v, %v: want the foreign query counted as unrouted_mark", cs, err)
	}

	addFakeVendor(t, tp.router)
	addLoopbackUDPTProxy(t, tp.router)
	tunnelRouting(t, tp.router, route.IPv4)
	proxyTCP := serveTCP(t, tp.router, "tcp4", "127.0.0.1:10800", "proxy", true)
	proxyUDP := serveUDP(t, tp.router, "udp4", "127.0.0.1:10800", "uproxy", true)

	// Foreign UDP 53: only the route chain marks it (the vendor's marks TCP).
	exchangeUDP(tp.router, "udp4", foreignDNS+":53", []byte("q"))
	if !eventually(dialTimeout, func() bool { return len(proxyUDP.conns()) == 1 }) {
		t.Fatalf("router's UDP query to the foreign resolver did not reach the proxy: %v", proxyUDP.conns())
	}
	if got, err := dialTCP(tp.router, "tcp4", foreignDNS+":53", 0); got != "proxy" {
		t.Errorf("router's TCP query to the foreign resolver must reach the proxy: %q, %v", got, err)
	}
	if got, err := dialTCP(tp.router, "tcp4", "198.18.50.2:443", 0); got != "proxy" {
		t.Errorf("router's DoH must reach the proxy: %q, %v", got, err)
	}
	if n := len(foreignUDP.conns()) + len(foreignTCP.conns()) + len(doh.conns()); n != 0 {
		t.Errorf("the foreign resolver/DoH endpoint was reached directly %d times", n)
	}

	// Domestic DoT: the vendor marks it, the route chain clears the mark, it
	// goes direct from the router's WAN address.
	if got, err := dialTCP(tp.router, "tcp4", domesticDNS+":853", 0); got != "dot" {
		t.Fatalf("domestic DoT must go direct: %q, %v", got, err)
	}
	if c := dot.conns(); len(c) != 1 || !strings.HasPrefix(c[0].remote, routerWAN+":") {
		t.Errorf("domestic DoT server saw %+v, want the router's WAN address", c)
	}
	if got, err := exchangeUDP(tp.router, "udp4", domesticDNS+":53", []byte("q")); got != "domestic:q" {
		t.Errorf("domestic UDP DNS must go direct: %q, %v", got, err)
	}
	if len(domUDP.conns()) != 1 {
		t.Errorf("domestic resolver saw %v", domUDP.conns())
	}
	if n := len(proxyTCP.conns()); n != 2 {
		t.Errorf("proxy got %d TCP connections, want 2 (foreign DNS and DoH; DoT is direct)", n)
	}

	// A daemon restart keeps the kill switch table, and with it the steering.
	if _, err := fw.Teardown(ctx, true); err != nil {
		t.Fatal(err)
	}
	tunnelRouting(t, tp.router, route.IPv4) // Teardown removed our copy of the route
	exchangeUDP(tp.router, "udp4", foreignDNS+":53", []byte("r"))
	if !eventually(dialTimeout, func() bool { return len(proxyUDP.conns()) == 2 }) {
		t.Errorf("while the daemon is away, foreign UDP DNS must still go to the tunnel: %v", proxyUDP.conns())
	}
	if n := len(foreignUDP.conns()); n != 0 {
		t.Errorf("foreign resolver reached directly during the restart")
	}
}

// addLoopbackUDPTProxy stands in for a vendor that also tproxies the
// router's marked UDP (the contract only promises TCP; a UDP-capable proxy
// shows the marks are right).
func addLoopbackUDPTProxy(t *testing.T, ns *testNS) {
	t.Helper()
	runNFTScript(t, ns, `table ip test_vendor_udp {
	chain prerouting {
		type filter hook prerouting priority -150; policy accept;
		iifname "lo" meta mark 0x1 meta l4proto udp tproxy to 127.0.0.1:10800 accept
	}
}
`)
}

// Blocked DoH is reset at the head of the LAN chain, even for an endpoint
// that cn_direct would otherwise let go direct, and at once.
func TestBlockedDoHResetFirst(t *testing.T) {
	tp := newTopo(t)
	doh := serveTCP(t, tp.inet, "tcp4", domesticWeb+":443", "doh", false)
	s := labSpec()
	s.BlockedDoH = append(s.BlockedDoH, netip.MustParsePrefix(domesticWeb+"/32"))
	apply(t, tp.router, s)
	start := time.Now()
	_, err := dialTCP(tp.lan, "tcp4", domesticWeb+":443", 0)
	if !isRefused(err) {
		t.Fatalf("DoH to a blocked endpoint inside cn_direct: %v, want a reset", err)
	}
	if d := time.Since(start); d > 200*time.Millisecond {
		t.Errorf("the reset took %v; a client must fail over at once", d)
	}
	if n := len(doh.conns()); n != 0 {
		t.Errorf("blocked DoH endpoint was reached %d times", n)
	}
}

func TestDNSSpecValidation(t *testing.T) {
	s := labSpec()
	s.ForeignDNS = append(s.ForeignDNS, netip.MustParseAddr(domesticDNS))
	err := s.Validate()
	if err == nil || !strings.Contains(err.Error(), "also a domestic upstream") {
		t.Errorf("a resolver both foreign and domestic must be refused, got %v", err)
	}
	s = labSpec()
	s.TunnelDoH = []netip.Addr{{}}
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "tunnelled DoH endpoint") {
		t.Errorf("an invalid DoH address must be refused, got %v", err)
	}
}

// The DNS steering follows the mode matrix: the router's own DNS rules in
// every role, LAN DNS rules only on a router, IPv6 ones only with the proxy
// policy.
func TestDNSModeMatrix(t *testing.T) {
	specs := goldenSpecs()
	for name, s := range specs {
		p, err := Render(s)
		if err != nil {
			t.Fatal(err)
		}
		has := func(x string) bool { return strings.Contains(p, x) }
		if !has("chain "+ChainDNSRoute) || !has("ip daddr @foreign_dns4 udp dport 53 meta mark set 0x00000001") ||
			!has("ip daddr @dns_direct4 tcp dport 853 accept") {
			t.Errorf("%s: router's own DNS steering missing", name)
		}
		lan := s.Role == RoleRouter
		if has("@blocked_doh") != lan || has("table ip "+TableDNS) != lan {
			t.Errorf("%s: LAN DNS rules present=%v, want %v", name, has("@blocked_doh"), lan)
		}
		if has("@foreign_dns6") != (s.IPv6 == IPv6Proxy) {
			t.Errorf("%s: IPv6 DNS steering present=%v with policy %s", name, has("@foreign_dns6"), s.IPv6)
		}
	}
}

// LAN DNS over TCP is answered by the router even while a proxy listens:
// the tproxy chain (mangle) runs before dns_enforce (nat) and must leave
// port 53 to it.
func TestLANTCPDNSIsRedirectedNotProxied(t *testing.T) {
	tp := newTopo(t)
	serveTCP(t, tp.inet, "tcp4", foreignDNS+":53", "foreign", false)
	serveTCP(t, tp.router, "tcp4", "0.0.0.0:53", "local", false)
	proxy := serveTCP(t, tp.router, "tcp4", "127.0.0.1:10800", "proxy", true)
	tunnelRouting(t, tp.router, route.IPv4)
	apply(t, tp.router, labSpec())
	if got, err := dialTCP(tp.lan, "tcp4", foreignDNS+":53", 0); got != "local" {
		t.Errorf("LAN TCP DNS to an outside resolver: %q, %v; want the router's resolver", got, err)
	}
	if n := len(proxy.conns()); n != 0 {
		t.Errorf("the proxy got %d LAN DNS connections", n)
	}
}
