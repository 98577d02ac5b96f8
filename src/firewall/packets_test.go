package firewall

import (
	"context"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"surflare-watchdog/src/route"
)

func apply(t *testing.T, ns *testNS, s Spec) *Firewall {
	t.Helper()
	fw := New(WithNetNS(ns.fd()))
	if _, err := fw.Apply(context.Background(), s); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return fw
}

func tunnelRouting(t *testing.T, ns *testNS, fams ...route.Family) {
	t.Helper()
	h, err := route.Open(ns.h)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for _, f := range fams {
		if _, err := h.EnsureTunnel(context.Background(), f); err != nil {
			t.Fatal(err)
		}
	}
}

func TestKillSwitchRouterOutput(t *testing.T) {
	ctx := context.Background()
	tp := newTopo(t)
	echo := serveTCP(t, tp.inet, "tcp4", echoHost+":80", "echo", false)
	serveTCP(t, tp.inet, "tcp4", relayHost+":8443", "relay", false)
	serveTCP(t, tp.inet, "tcp4", domesticWeb+":80", "domestic", false)

	if got, err := dialTCP(tp.router, "tcp4", echoHost+":80", 0); got != "echo" {
		t.Fatalf("baseline: router cannot reach the echo host: %q, %v", got, err)
	}
	fw := apply(t, tp.router, labSpec())

	if got, err := dialTCP(tp.router, "tcp4", echoHost+":80", 0); err == nil {
		t.Errorf("unmarked router traffic must be blocked by the kill switch, got %q", got)
	}
	if got, err := dialTCP(tp.router, "tcp4", echoHost+":80", int(MarkDirect)); got != "echo" {
		t.Errorf("mark 0xff (the proxy's own sockets) must pass: %q, %v", got, err)
	}
	if got, err := dialTCP(tp.router, "tcp4", relayHost+":8443", 0); got != "relay" {
		t.Errorf("relay endpoints must pass while reconnecting: %q, %v", got, err)
	}
	if got, err := dialTCP(tp.router, "tcp4", domesticWeb+":80", 0); got != "domestic" {
		t.Errorf("cn_direct destinations must go direct: %q, %v", got, err)
	}

	// The vendor connects: its route chain marks the router's TCP 0x1, the
	// policy rule delivers it to lo, its tproxy hands it to the proxy. The
	// kill switch passes the marked traffic.
	addFakeVendor(t, tp.router)
	tunnelRouting(t, tp.router, route.IPv4)
	proxy := serveTCP(t, tp.router, "tcp4", "127.0.0.1:10800", "proxy", true)
	if got, err := dialTCP(tp.router, "tcp4", echoHost+":80", 0); got != "proxy" {
		t.Fatalf("marked router traffic must pass to the proxy: %q, %v", got, err)
	}
	if c := proxy.conns(); len(c) != 1 || c[0].local != echoHost+":80" {
		t.Fatalf("proxy saw %+v, want the original destination", c)
	}

	// The vendor crashes half-way: its table still marks, the policy rule is
	// gone, so the marked packets would leave through the WAN. They must not.
	h, err := route.Open(tp.router.h)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := h.RemoveTunnel(ctx, route.IPv4, true); err != nil {
		t.Fatal(err)
	}
	if got, err := dialTCP(tp.router, "tcp4", echoHost+":80", 0); err == nil {
		t.Errorf("tunnel-marked traffic without the policy route got through: %q", got)
	}
	cs, err := fw.KillSwitchCounters(ctx)
	if err != nil || cs[CounterUnroutedMark] == 0 || cs[CounterBlockedOut] == 0 {
		t.Errorf("counters = %v, %v; want unrouted_mark and blocked_out > 0", cs, err)
	}
	if n := len(echo.conns()); n != 2 { // the baseline and the 0xff dial
		t.Errorf("echo host saw %d connections from the router, want 2: %v", n, echo.conns())
	}
}

// addFakeVendor stands in for the table the vendor's `surflare connect`
// creates (SURFLARE-CONTRACT): a route-type output chain marking the router's
// TCP 0x1 except the proxy's own 0xff sockets, and a prerouting tproxy for
// what comes back in on lo.
func addFakeVendor(t *testing.T, ns *testNS) {
	t.Helper()
	runNFTScript(t, ns, `table inet surflare {
	set server_ports {
		type inet_service
	}

	chain output {
		type route hook output priority -150; policy accept;
		meta mark 0x000000ff return
		ip daddr { 127.0.0.0/8, 198.18.1.0/24 } return
		meta l4proto tcp meta mark set 0x00000001
	}

	chain prerouting {
		type filter hook prerouting priority -150; policy accept;
		iifname "lo" meta mark 0x00000001 meta l4proto tcp tproxy ip to 127.0.0.1:10800 accept
	}
}
`)
}

func TestLANTrafficTProxyQUICDTLS(t *testing.T) {
	tp := newTopo(t)
	echo := serveTCP(t, tp.inet, "tcp4", echoHost+":80", "echo", false)
	domestic := serveTCP(t, tp.inet, "tcp4", domesticWeb+":80", "domestic", false)
	udpEcho := serveUDP(t, tp.inet, "udp4", echoHost+":9000", "udp", false)
	serveUDP(t, tp.inet, "udp4", echoHost+":443", "udp443", false)

	if got, _ := dialTCP(tp.lan, "tcp4", echoHost+":80", 0); got != "echo" {
		t.Fatalf("baseline: LAN cannot reach the echo host: %q", got)
	}
	base := len(echo.conns())

	proxy := serveTCP(t, tp.router, "tcp4", "127.0.0.1:10800", "proxy", true)
	tunnelRouting(t, tp.router, route.IPv4)
	apply(t, tp.router, labSpec())

	got, err := dialTCP(tp.lan, "tcp4", echoHost+":80", 0)
	if got != "proxy" {
		t.Fatalf("LAN TCP must reach the tproxy listener: %q, %v", got, err)
	}
	pc := proxy.conns()
	if len(pc) != 1 || pc[0].local != echoHost+":80" || !strings.HasPrefix(pc[0].remote, lanClient+":") {
		t.Fatalf("tproxy listener saw %+v, want original destination %s:80 from %s", pc, echoHost, lanClient)
	}
	if n := len(echo.conns()); n != base {
		t.Fatalf("echo host was reached directly (%d connections, want %d)", n, base)
	}

	// cn_direct goes direct, with the client's own address.
	if got, err := dialTCP(tp.lan, "tcp4", domesticWeb+":80", 0); got != "domestic" {
		t.Fatalf("cn_direct destination: %q, %v", got, err)
	}
	if c := domestic.conns(); len(c) != 1 || !strings.HasPrefix(c[0].remote, lanClient+":") {
		t.Fatalf("domestic server saw %+v, want the LAN client directly", c)
	}

	// Other UDP is neither proxied nor allowed out.
	if _, err := exchangeUDP(tp.lan, "udp4", echoHost+":9000", []byte("x")); !isTimeout(err) {
		t.Errorf("LAN UDP to a foreign host must be dropped silently, got %v", err)
	}
	if n := len(udpEcho.conns()); n != 0 {
		t.Errorf("foreign UDP server received %d datagrams", n)
	}

	// QUIC (UDP 443, long header) is rejected at once...
	quic := []byte{0xc3, 0, 0, 0, 1, 8, 1, 2, 3, 4, 5, 6, 7, 8}
	if _, err := exchangeUDP(tp.lan, "udp4", echoHost+":443", quic); !isRefused(err) {
		t.Errorf("QUIC must be rejected (port unreachable), got %v", err)
	}
	// ...while DTLS passes the table on to the vendor's UDP tproxy, modelled
	// here by a stand-in table, and reaches the proxy's UDP socket.
	addVendorUDPTProxy(t, tp.router)
	udpProxy := serveUDP(t, tp.router, "udp4", "127.0.0.1:10800", "uproxy", true)
	dtls := []byte{0x16, 0xfe, 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}
	if _, err := exchangeUDP(tp.lan, "udp4", echoHost+":443", dtls); isRefused(err) {
		t.Errorf("DTLS must not be rejected, got %v", err)
	}
	if !eventually(dialTimeout, func() bool { return len(udpProxy.conns()) == 1 }) {
		t.Errorf("DTLS datagram did not reach the proxy's UDP socket")
	}

	// Tombstoned: the proxy is down, LAN TCP is reset at once.
	s := labSpec()
	s.ProxyDown = true
	apply(t, tp.router, s)
	if _, err := dialTCP(tp.lan, "tcp4", echoHost+":80", 0); !isRefused(err) {
		t.Errorf("tombstoned tproxy must reset LAN TCP, got %v", err)
	}
	if n := len(proxy.conns()); n != 1 {
		t.Errorf("tombstoned: proxy got %d connections, want still 1", n)
	}
}

// addVendorUDPTProxy stands in for the vendor's own prerouting tproxy of UDP
// (its table is created by the surflare binary, not by us).
func addVendorUDPTProxy(t *testing.T, ns *testNS) {
	t.Helper()
	script := `table ip test_vendor {
	chain prerouting {
		type filter hook prerouting priority -140; policy accept;
		iifname "br-lan" meta l4proto udp tproxy to 127.0.0.1:10800 meta mark set 0x1 accept
	}
}
`
	runNFTScript(t, ns, script)
}

func runNFTScript(t testing.TB, ns *testNS, script string) {
	t.Helper()
	path := t.TempDir() + "/s.nft"
	if err := writeFile(path, script); err != nil {
		t.Fatal(err)
	}
	ns.nft("-f", path)
}

func TestDNSRedirectedToLocalResolver(t *testing.T) {
	tp := newTopo(t)
	serveUDP(t, tp.inet, "udp4", foreignDNS+":53", "foreign", false)
	serveTCP(t, tp.inet, "tcp4", foreignDNS+":53", "foreign", false)
	serveUDP(t, tp.router, "udp4", "0.0.0.0:53", "local", false)
	serveTCP(t, tp.router, "tcp4", "0.0.0.0:53", "local", false)

	if got, _ := exchangeUDP(tp.lan, "udp4", foreignDNS+":53", []byte("q")); got != "foreign:q" {
		t.Fatalf("baseline: %q", got)
	}
	apply(t, tp.router, labSpec())
	if got, err := exchangeUDP(tp.lan, "udp4", foreignDNS+":53", []byte("q")); got != "local:q" {
		t.Errorf("UDP DNS to an outside resolver must be answered locally: %q, %v", got, err)
	}
	if got, err := dialTCP(tp.lan, "tcp4", foreignDNS+":53", 0); got != "local" {
		t.Errorf("TCP DNS to an outside resolver must be answered locally: %q, %v", got, err)
	}
	// A bypass device keeps its own resolver (matched by MAC alone).
	s := labSpec()
	s.Bypass = []Device{{Name: "client", MAC: mustMAC(lanMAC)}}
	apply(t, tp.router, s)
	if got, err := exchangeUDP(tp.lan, "udp4", foreignDNS+":53", []byte("q")); got != "foreign:q" {
		t.Errorf("bypass device's DNS must go direct: %q, %v", got, err)
	}
}

func TestBypassDeviceGoesDirect(t *testing.T) {
	for _, tc := range []struct {
		name string
		dev  Device
	}{
		// MAC matching works in prerouting (tproxy, nat) and forward on a
		// bridge port: a bypass device must match by MAC on both.
		{"by-mac", Device{Name: "client", MAC: mustMAC(lanMAC)}},
		{"by-ip", Device{Name: "client", IPs: []netip.Addr{mustAddr(lanClient)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp := newTopo(t)
			echo := serveTCP(t, tp.inet, "tcp4", echoHost+":80", "echo", false)
			proxy := serveTCP(t, tp.router, "tcp4", "127.0.0.1:10800", "proxy", true)
			tunnelRouting(t, tp.router, route.IPv4)
			s := labSpec()
			s.Bypass = []Device{tc.dev}
			apply(t, tp.router, s)
			if got, err := dialTCP(tp.lan, "tcp4", echoHost+":80", 0); got != "echo" {
				t.Fatalf("bypass device must reach the host directly: %q, %v", got, err)
			}
			if c := echo.conns(); len(c) != 1 || !strings.HasPrefix(c[0].remote, lanClient+":") {
				t.Fatalf("echo host saw %+v", c)
			}
			if n := len(proxy.conns()); n != 0 {
				t.Fatalf("bypass device was proxied (%d connections)", n)
			}
		})
	}
}

func TestIPv6NeverLeaks(t *testing.T) {
	t.Run("block", func(t *testing.T) {
		tp := newTopo(t)
		echo6 := serveTCP(t, tp.inet, "tcp6", "["+echoHost6+"]:80", "echo6", false)
		if !eventually(3*time.Second, func() bool {
			got, _ := dialTCP(tp.lan, "tcp6", "["+echoHost6+"]:80", 0)
			return got == "echo6"
		}) {
			t.Fatal("baseline: LAN cannot reach the IPv6 host")
		}
		tunnelRouting(t, tp.router, route.IPv4, route.IPv6)
		apply(t, tp.router, labSpec())
		if _, err := dialTCP(tp.lan, "tcp6", "["+echoHost6+"]:80", 0); err == nil {
			t.Error("LAN IPv6 TCP got through")
		}
		for _, mark := range []int{0, int(MarkDirect)} {
			if _, err := dialTCP(tp.router, "tcp6", "["+echoHost6+"]:80", mark); err == nil {
				t.Errorf("router IPv6 TCP with mark %#x got through", mark)
			}
		}
		if n := len(echo6.conns()); n != 1 {
			t.Errorf("IPv6 host saw %d connections, want only the baseline", n)
		}
	})
	t.Run("proxy", func(t *testing.T) {
		tp := newTopo(t)
		echo6 := serveTCP(t, tp.inet, "tcp6", "["+echoHost6+"]:80", "echo6", false)
		udp6 := serveUDP(t, tp.inet, "udp6", "["+echoHost6+"]:9000", "udp6", false)
		proxy6 := serveTCP(t, tp.router, "tcp6", "[::1]:10800", "proxy6", true)
		tunnelRouting(t, tp.router, route.IPv4, route.IPv6)
		s := labSpec()
		s.IPv6 = IPv6Proxy
		s.Private = mustPrefixes("10.0.0.0/8", "fe80::/10") // the lab's fd00::/8 is not private here
		apply(t, tp.router, s)
		if got, err := dialTCP(tp.lan, "tcp6", "["+echoHost6+"]:80", 0); got != "proxy6" {
			t.Fatalf("LAN IPv6 TCP must be proxied: %q, %v", got, err)
		}
		if c := proxy6.conns(); len(c) != 1 || c[0].local != "["+echoHost6+"]:80" {
			t.Fatalf("IPv6 tproxy saw %+v, want original destination", c)
		}
		if _, err := exchangeUDP(tp.lan, "udp6", "["+echoHost6+"]:9000", []byte("x")); err == nil {
			t.Error("LAN IPv6 UDP got an answer")
		}
		if len(echo6.conns())+len(udp6.conns()) != 0 {
			t.Errorf("IPv6 hosts were reached directly: %v %v", echo6.conns(), udp6.conns())
		}
	})
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o644) }
