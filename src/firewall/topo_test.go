package firewall

import (
	"net"
	"net/netip"
	"testing"

	"github.com/vishvananda/netlink"
)

// Addresses of the test topology (lab plan ranges, DESIGN §6):
//
//	lan (eth0 198.18.1.10, fd00:1::10) — br-lan(router) … wan(router) 198.18.2.2 — gw(inet) 198.18.2.1
//
// The inet namespace holds the "internet" hosts on its lo.
const (
	lanMAC     = "02:00:00:00:01:0a"
	lanClient  = "198.18.1.10"
	lanClient6 = "fd00:1::10"
	routerLAN  = "198.18.1.1"
	routerWAN  = "198.18.2.2"
	gateway    = "198.18.2.1"

	echoHost    = "198.18.30.1" // a foreign web host
	foreignDNS  = "198.18.50.1"
	domesticWeb = "198.19.0.10" // inside cn_direct
	relayHost   = "198.18.10.1"
	echoHost6   = "fd00:30::1"
)

type topo struct {
	lan, router, inet *testNS
}

func newTopo(t testing.TB) *topo {
	t.Helper()
	return newTopoPrefix(t, nsPrefix)
}

// newTopoPrefix is newTopo with another namespace name prefix.
func newTopoPrefix(t testing.TB, prefix string) *topo {
	t.Helper()
	tp := &topo{lan: newNSPrefix(t, prefix, "lan"), router: newNSPrefix(t, prefix, "rtr"), inet: newNSPrefix(t, prefix, "inet")}
	r := tp.router

	// LAN: the client's eth0 is a port of the router's br-lan bridge.
	veth(t, tp.lan, "eth0", r, "lanp", lanMAC)
	// No multicast snooping: IPv6 neighbour solicitations must not wait for
	// MLD reports, which the kernel delays by up to a second.
	snooping := false
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br-lan"}, MulticastSnooping: &snooping}
	if err := r.nl.LinkAdd(br); err != nil {
		t.Fatalf("bridge: %v", err)
	}
	port, _ := r.nl.LinkByName("lanp")
	if err := r.nl.LinkSetMaster(port, br); err != nil {
		t.Fatal(err)
	}
	r.linkUp("br-lan")
	r.addAddr("br-lan", routerLAN+"/24")
	r.addAddr("br-lan", "fd00:1::1/64")
	tp.lan.addAddr("eth0", lanClient+"/24")
	tp.lan.addAddr("eth0", lanClient6+"/64")
	tp.lan.route("0.0.0.0/0", routerLAN)
	tp.lan.route("::/0", "fd00:1::1")

	// WAN.
	veth(t, r, "wan", tp.inet, "gw", "")
	r.addAddr("wan", routerWAN+"/24")
	r.addAddr("wan", "fd00:2::2/64")
	r.route("0.0.0.0/0", gateway)
	r.route("::/0", "fd00:2::1")
	r.sysctl("net.ipv4.ip_forward", "1")
	r.sysctl("net.ipv6.conf.all.forwarding", "1")
	// This kernel has br_netfilter built in and new namespaces default to
	// passing bridged frames through the IP hooks; OpenWrt does not (no
	// kmod-br-netfilter), and with it on, tproxy's socket assignment made at
	// the bridge layer is dropped before IP delivery (the SYN gets a RST).
	r.sysctl("net.bridge.bridge-nf-call-iptables", "0")
	r.sysctl("net.bridge.bridge-nf-call-ip6tables", "0")

	in := tp.inet
	in.addAddr("gw", gateway+"/24")
	in.addAddr("gw", "fd00:2::1/64")
	for _, a := range []string{echoHost, foreignDNS, domesticWeb, relayHost} {
		in.addAddr("lo", a+"/32")
	}
	in.addAddr("lo", echoHost6+"/128")
	in.route("198.18.1.0/24", routerWAN)
	in.route("fd00:1::/64", "fd00:2::2")
	return tp
}

// labSpec is the Spec the packet tests start from.
func labSpec() Spec {
	s := DefaultSpec()
	s.Relays = []netip.Prefix{netip.MustParsePrefix(relayHost + "/32")}
	s.APIEndpoints = []netip.Prefix{netip.MustParsePrefix("198.18.40.1/32")}
	s.CNDirect4 = []netip.Prefix{netip.MustParsePrefix("198.19.0.0/16")}
	s.DNSDirect = []netip.Addr{netip.MustParseAddr("198.19.0.53")}
	s.BlockedDoH = []netip.Prefix{netip.MustParsePrefix("198.18.50.2/32")}
	s.ForeignDNS = []netip.Addr{netip.MustParseAddr(foreignDNS)}
	s.TunnelDoH = []netip.Addr{netip.MustParseAddr("198.18.50.2")}
	return s
}

func mustMAC(s string) net.HardwareAddr {
	m, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}
