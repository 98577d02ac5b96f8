// Package lab builds a simulated Surflare world in network namespaces: LAN
// clients, a router that runs the watchdog and fake vendor binaries, and an
// "internet" with relays, exit nodes, probe targets, the account API and DNS.
// It never touches the host's own interfaces: namespaces are joined only by
// veth pairs the lab creates, and the host namespace is reached only through
// user-space relays on 127.0.0.1.
//
// This file is the address plan, shared by the topology code, the fake vendor
// binaries and the internet-side servers. Everything lives in 198.18.0.0/15
// (RFC 2544 benchmark range) and fd00::/8 so nothing in the lab can be mistaken
// for a real host.
package lab

import (
	"fmt"
	"net/netip"
)

// Namespace roles; the real names are Prefix + role (e.g. "swl3a-router").
const (
	RoleLAN      = "lan"
	RoleRouter   = "router"
	RoleInternet = "internet"
	// RoleSwitch is the LAN switch of a lab whose router is OpenWrt
	// (Options.OpenWrt): the clients' bridge, outside netifd's reach.
	RoleSwitch = "lansw"
)

// Link addressing.
var (
	// LANNet is the household LAN behind the router's br-lan.
	LANNet    = netip.MustParsePrefix("198.18.1.0/24")
	LANRouter = netip.MustParseAddr("198.18.1.1") // br-lan
	LANClient = []netip.Addr{                     // lan namespace hosts (one veth each, or aliases)
		netip.MustParseAddr("198.18.1.10"),
		netip.MustParseAddr("198.18.1.11"),
		netip.MustParseAddr("198.18.1.12"),
	}
	LANNet6    = netip.MustParsePrefix("fd00:1::/64")
	LANRouter6 = netip.MustParseAddr("fd00:1::1")
	LANClient6 = netip.MustParseAddr("fd00:1::10")

	// WANNet joins the router's pppoe-wan to the ISP side of the internet.
	WANNet     = netip.MustParsePrefix("198.18.2.0/24")
	WANRouter  = netip.MustParseAddr("198.18.2.2") // pppoe-wan: the household's ISP address (country CN)
	WANGateway = netip.MustParseAddr("198.18.2.1") // the ISP's gateway, in the internet namespace
	WANNet6    = netip.MustParsePrefix("fd00:2::/64")
	WANRouter6 = netip.MustParseAddr("fd00:2::2")
	WANGw6     = netip.MustParseAddr("fd00:2::1")
)

// Relay is a transit the proxy connects to; it forwards to an exit node.
type Relay struct {
	Name string
	Addr netip.Addr
}

// Relays: the proxy reaches exits only through one of these (transit "auto"
// means the first one that answers).
var Relays = []Relay{
	{"Tokyo", netip.MustParseAddr("198.18.10.1")},
	{"Singapore", netip.MustParseAddr("198.18.10.2")},
}

// RelayPort is the TCP port every relay listens on.
const RelayPort = 8443

// Node is an exit node: it dials destinations from its own address.
type Node struct {
	Name    string
	Addr    netip.Addr
	Country string
}

// Nodes are the seed's six exits, in candidate order.
var Nodes = []Node{
	{"Dallas", netip.MustParseAddr("198.18.20.1"), "US"},
	{"Los Angeles", netip.MustParseAddr("198.18.20.2"), "US"},
	{"Chicago", netip.MustParseAddr("198.18.20.3"), "US"},
	{"New York", netip.MustParseAddr("198.18.20.4"), "US"},
	{"Atlanta", netip.MustParseAddr("198.18.20.5"), "US"},
	{"Miami", netip.MustParseAddr("198.18.20.6"), "US"},
}

// ExtraExits are exits beyond the seed's six that the evidence names
// (E1: Tokyo is an exit, country JP, as well as a relay). The internet
// serves them always; the vendor knob `exits` decides whether the fake
// client offers them. They are not daemon candidates in the lab config.
var ExtraExits = []Node{
	{"Tokyo", netip.MustParseAddr("198.18.20.7"), "JP"},
}

// Exits are every exit the lab's internet serves: Nodes, then ExtraExits.
var Exits = append(append([]Node(nil), Nodes...), ExtraExits...)

// ExitPort is the TCP port every exit node listens on (for relays).
const ExitPort = 8444

// Probe targets (all HTTP on port 80).
var (
	// IPEcho hosts answer GET / with JSON {"ip":"…","country":"US"}.
	IPEcho = []netip.Addr{
		netip.MustParseAddr("198.18.30.1"),
		netip.MustParseAddr("198.18.30.2"),
		netip.MustParseAddr("198.18.30.3"),
	}
	// CDNTrace hosts answer GET /cdn-cgi/trace with "ip=…\nloc=US\n" lines.
	CDNTrace = []netip.Addr{
		netip.MustParseAddr("198.18.30.11"),
		netip.MustParseAddr("198.18.30.12"),
	}
	// Search answers GET / with 200 and GET /generate_204 with 204 (the urltest target).
	Search = netip.MustParseAddr("198.18.30.21")
	// AccountAPI is the Surflare account service (HTTP on port 80).
	AccountAPI = netip.MustParseAddr("198.18.40.1")
	// ForeignDNS is a "public" resolver (UDP/TCP 53) and DoH is a DoH endpoint (TCP 443).
	ForeignDNS = netip.MustParseAddr("198.18.50.1")
	DoH        = netip.MustParseAddr("198.18.50.2")
	// Internet6 is an IPv6 echo host, for leak tests.
	Internet6 = netip.MustParseAddr("fd00:30::1")
)

// Domestic ("cn_direct") servers: the lab's chnroute contains exactly DomesticNet.
var (
	DomesticNet    = netip.MustParsePrefix("198.19.0.0/16")
	DomesticWeb    = netip.MustParseAddr("198.19.0.10") // HTTP 80, echoes caller like IPEcho
	DomesticDNS    = netip.MustParseAddr("198.19.0.53") // domestic resolver (UDP/TCP 53)
	DomesticDNSDoT = netip.MustParseAddr("198.19.0.54") // reserved for a DoT resolver
)

// CountryOf maps a source address as seen by an internet host to a country:
// exits are US, the household's WAN address is CN. Echo hosts report it.
func CountryOf(a netip.Addr) string {
	for _, n := range Exits {
		if n.Addr == a {
			return n.Country
		}
	}
	if WANNet.Contains(a) || WANNet6.Contains(a) || DomesticNet.Contains(a) {
		return "CN"
	}
	return "ZZ"
}

// Vendor-side constants the fakes implement (SURFLARE-CONTRACT.md).
const (
	ProxyPort   = 10800 // surflare-proxy's tproxy listener
	MarkTunnel  = 0x1   // routed via table 100 to lo, i.e. into the proxy
	MarkDirect  = 0xff  // the proxy's own outbound sockets
	TunnelTable = 100
)

// ClientAddr6 is LAN client i's IPv6 address: LANClient6 for client 0, then
// the following addresses (fd00:1::11, …) for the others.
func ClientAddr6(i int) netip.Addr {
	a := LANClient6
	for range i {
		a = a.Next()
	}
	return a
}

// ClientMAC is LAN client i's fixed, locally administered MAC address, so
// tests can configure bypass-by-MAC before the lab exists.
func ClientMAC(i int) string {
	return fmt.Sprintf("02:5f:1a:00:00:%02x", 0x10+i)
}

// InternetHosts lists every address the internet namespace answers on:
// relays, exits, probe targets, the account API, resolvers and the domestic
// servers (IPv4 and IPv6).
func InternetHosts() []netip.Addr {
	var out []netip.Addr
	for _, r := range Relays {
		out = append(out, r.Addr)
	}
	for _, n := range Exits {
		out = append(out, n.Addr)
	}
	out = append(out, IPEcho...)
	out = append(out, CDNTrace...)
	out = append(out, Search, AccountAPI, ForeignDNS, DoH, Internet6,
		DomesticWeb, DomesticDNS, DomesticDNSDoT)
	return out
}
