package firewall

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"
)

// The router's own DNS (docs/dns.md). The local resolver (dnsmasq on :53,
// forwarding to SmartDNS on :6053) asks two kinds of upstreams:
//
//   - foreign resolvers (UDP/TCP 53) and DoH endpoints (TCP 443): these must
//     travel inside the tunnel, so a route-type output chain marks them
//     MarkTunnel and the kernel re-routes them through the vendor's
//     `fwmark 0x1 lookup 100` to lo, where the vendor's tproxy hands them to
//     the proxy. Without the policy route (vendor down, failover) the marked
//     packets hit the kill switch's postrouting guard and are dropped: a
//     foreign query never leaves outside the tunnel.
//   - domestic upstreams (DNSDirect: plain 53, DoT 853, DoH 443): these go
//     direct through the ISP. The vendor's route chain marks all of the
//     router's TCP (SURFLARE-CONTRACT), so the same chain clears the mark
//     again for them, and the kill switch accepts them.
//
// The chain lives in the kill switch table on purpose: a daemon restart
// (Teardown with keepKillSwitch) keeps it, so DNS steering does not lapse
// while the daemon is away. LAN clients are handled by the LAN tables: their
// port-53 traffic is redirected to the local resolver (dns_enforce) and their
// DoH to BlockedDoH endpoints is reset at the head of the tproxy chain.

// Set names of the router's own DNS steering (kill switch table).
const (
	SetForeignDNS4 = "foreign_dns4"
	SetForeignDNS6 = "foreign_dns6"
	SetTunnelDoH4  = "doh_tunnel4"
	SetTunnelDoH6  = "doh_tunnel6"
)

// ChainDNSRoute is the kill switch table's route-type output chain that
// steers the router's own DNS.
const ChainDNSRoute = "dns_route"

// PrioDNSRoute runs just after the vendor's route chain (-150): the vendor
// has marked the router's TCP by then, so clearing the mark of domestic DNS
// sticks, and the kill switch (PrioKillSwitch) sees the final mark.
const PrioDNSRoute = -149

// DNS ports.
const (
	PortDNS = 53  // plain DNS, UDP and TCP
	PortDoT = 853 // DNS over TLS
	PortDoH = 443 // DNS over HTTPS
)

// markNone is "no mark": the main routing table, i.e. direct.
const markNone = 0

// dnsSets are the kill switch's sets for the router's own DNS.
func dnsSets(s Spec, v6 bool) []setSpec {
	if v6 {
		return []setSpec{
			{name: SetForeignDNS6, kind: kindIPv6, addrs: hostAddrs(s.ForeignDNS, true)},
			{name: SetTunnelDoH6, kind: kindIPv6, addrs: hostAddrs(s.TunnelDoH, true)},
		}
	}
	return []setSpec{
		{name: SetForeignDNS4, kind: kindIPv4, addrs: hostAddrs(s.ForeignDNS, false)},
		{name: SetTunnelDoH4, kind: kindIPv4, addrs: hostAddrs(s.TunnelDoH, false)},
	}
}

// dnsFamilies are the families the router's DNS is steered in: IPv6 only
// under the proxy policy (otherwise the kill switch drops all of it).
func dnsFamilies(s Spec) []bool {
	if s.IPv6 == IPv6Proxy {
		return []bool{false, true}
	}
	return []bool{false}
}

// directDNSPorts are how the router may reach a domestic upstream directly.
var directDNSPorts = []struct {
	proto byte
	port  uint16
	id    string
}{
	{unix.IPPROTO_UDP, PortDNS, "udp"},
	{unix.IPPROTO_TCP, PortDNS, "tcp"},
	{unix.IPPROTO_TCP, PortDoT, "dot"},
	{unix.IPPROTO_TCP, PortDoH, "doh"},
}

// dnsDirectAccepts are the kill switch output accepts for domestic upstreams.
func dnsDirectAccepts(v6 bool) []rule {
	set, fam := SetDNSDirect4, "4"
	if v6 {
		set, fam = SetDNSDirect6, "6"
	}
	var out []rule
	for _, p := range directDNSPorts {
		out = append(out, newRule(famInet, "out-dns-direct"+fam+"-"+p.id).
			addrLookup(v6, false, set).port(p.proto, false, p.port).accept())
	}
	return out
}

// dnsRouteChain marks the router's foreign DNS and DoH into the tunnel and
// keeps its domestic DNS direct. It is a route chain: a changed mark makes
// the kernel look the route up again, which is what moves the packet into
// (or out of) table 100.
func dnsRouteChain(s Spec) chainSpec {
	r := func(id string) *ruleBuilder { return newRule(famInet, id) }
	// The proxy's own sockets (0xff) are never re-marked: that would loop
	// the proxy into itself.
	rules := []rule{r("dns-proxy-own").mark(MarkDirect).ret()}
	for _, v6 := range dnsFamilies(s) {
		direct, foreign, doh, fam := SetDNSDirect4, SetForeignDNS4, SetTunnelDoH4, "4"
		if v6 {
			direct, foreign, doh, fam = SetDNSDirect6, SetForeignDNS6, SetTunnelDoH6, "6"
		}
		for _, p := range directDNSPorts {
			rules = append(rules, r("dns-direct"+fam+"-"+p.id).addrLookup(v6, false, direct).
				port(p.proto, false, p.port).setMark(markNone).ret())
		}
		rules = append(rules,
			r("dns-foreign"+fam+"-udp").addrLookup(v6, false, foreign).port(unix.IPPROTO_UDP, false, PortDNS).setMark(MarkTunnel).ret(),
			r("dns-foreign"+fam+"-tcp").addrLookup(v6, false, foreign).port(unix.IPPROTO_TCP, false, PortDNS).setMark(MarkTunnel).ret(),
			r("dns-doh"+fam).addrLookup(v6, false, doh).port(unix.IPPROTO_TCP, false, PortDoH).setMark(MarkTunnel).ret(),
		)
	}
	return chainSpec{name: ChainDNSRoute, typ: nftables.ChainTypeRoute, hook: hook(nftables.ChainHookOutput),
		prio: PrioDNSRoute, policy: nftables.ChainPolicyAccept, rules: rules}
}

// dnsProblems checks the DNS part of a Spec: plain addresses, and no
// upstream that is both domestic (direct) and foreign (tunnelled) — the
// direct rule would win and the "foreign" resolver would be asked outside
// the tunnel.
func dnsProblems(s Spec) error {
	var errs []error
	check := func(what string, as []netip.Addr) {
		for _, a := range as {
			if !a.IsValid() || a.Zone() != "" {
				errs = append(errs, fmt.Errorf("%s %v is not a plain address", what, a))
			}
		}
	}
	check("foreign DNS resolver", s.ForeignDNS)
	check("tunnelled DoH endpoint", s.TunnelDoH)
	direct := map[netip.Addr]bool{}
	for _, a := range s.DNSDirect {
		direct[a.Unmap()] = true
	}
	for _, l := range []struct {
		what string
		as   []netip.Addr
	}{{"foreign DNS resolver", s.ForeignDNS}, {"tunnelled DoH endpoint", s.TunnelDoH}} {
		for _, a := range l.as {
			if direct[a.Unmap()] {
				errs = append(errs, fmt.Errorf("%s %s is also a domestic upstream: it would be queried outside the tunnel", l.what, a))
			}
		}
	}
	return errors.Join(errs...)
}
