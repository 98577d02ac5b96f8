package firewall

import (
	"net"
	"net/netip"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"
)

// Set names. Each table has its own copy of a set it matches against (nft
// sets are per table); the sync code keeps the copies equal.
const (
	SetEndpoints4     = "endpoints4"
	SetEndpoints6     = "endpoints6"
	SetDNSDirect4     = "dns_direct4"
	SetDNSDirect6     = "dns_direct6"
	SetCNDirect4      = "cn_direct4"
	SetCNDirect6      = "cn_direct6"
	SetDomestic       = "domestic_domain_ips" // SmartDNS nftset target, ipv4, timeout
	SetBypassDevices  = "bypass_devices"      // ether_addr
	SetBypassSrc      = "bypass_src"          // addresses of bypass devices
	SetVPNBypass      = "vpn_bypass"          // the same addresses, in dns_enforce
	SetPrivate        = "private"
	SetPrivate4       = "private4"
	SetPrivate6       = "private6"
	SetCNDirect       = "cn_direct"
	SetBlockedDoH     = "blocked_doh"
	SetRelays4        = "relays4"
	SetRelays6        = "relays6"
	SetVendorCNDirect = "sw_cn_direct4" // added to the vendor's table in global mode
	SetVendorCN6      = "sw_cn_direct6"
)

// Named counters of the kill switch: what it blocked, by reason.
const (
	CounterBlockedOut   = "blocked_out"   // router traffic with no reason to leave
	CounterBlockedFwd   = "blocked_fwd"   // LAN traffic that was neither proxied nor direct
	CounterBlockedV6    = "blocked_v6"    // IPv6 under the block policy
	CounterUnroutedMark = "unrouted_mark" // tunnel-marked packets leaving for a real interface
)

// Named counters of the moat (relay paths).
const (
	CounterSynOut   = "syn_out"   // our SYNs to relays
	CounterSynAckIn = "synack_in" // their SYN-ACKs: synack_in/syn_out is the SYN ratio
	CounterSynIn    = "syn_in"    // unsolicited SYNs from relays (anomaly)
	CounterRstIn    = "rst_in"    // RSTs from relays (injection shows up here)
	CounterFinIn    = "fin_in"    // FINs from relays
)

var (
	loopback4 = netip.MustParseAddr("127.0.0.1")
	loopback6 = netip.IPv6Loopback()
)

const (
	famInet = nftables.TableFamilyINet
	famIP   = nftables.TableFamilyIPv4
	famIP6  = nftables.TableFamilyIPv6
)

// buildTables is the whole desired state for a Spec, in creation order.
// The vendor extension (global mode) is built separately: it depends on the
// chains the vendor created.
func buildTables(s Spec) []tableSpec {
	ts := []tableSpec{killSwitchTable(s), moatTable(s)}
	if s.router() {
		ts = append(ts, tproxyTable(s, false), dnsTable(s))
		if s.IPv6 == IPv6Proxy {
			ts = append(ts, tproxyTable(s, true))
		}
	}
	return ts
}

// ownedTables are every table Apply may create (Teardown removes them).
var ownedTables = []struct {
	fam  nftables.TableFamily
	name string
}{
	{famInet, TableKillSwitch}, {famIP, TableTProxy}, {famIP6, TableTProxy6},
	{famIP, TableDNS}, {famInet, TableMoat},
}

func hook(h *nftables.ChainHook) nftables.ChainHook { return *h }

func prefixesOf(ps []netip.Prefix, v6 bool) []addrRange { return mergeRanges(ps, v6) }

func bypassMACs(s Spec) []net.HardwareAddr {
	var ms []net.HardwareAddr
	for _, d := range s.Bypass {
		if d.MAC != nil {
			ms = append(ms, d.MAC)
		}
	}
	return uniqueMACs(ms)
}

func bypassAddrs(s Spec, v6 bool) []netip.Addr {
	var as []netip.Addr
	for _, d := range s.Bypass {
		as = append(as, d.IPs...)
	}
	return hostAddrs(as, v6)
}

// killSwitchTable: output (and, on a router, forward) with policy drop. What
// may leave without the tunnel is listed explicitly; everything else is
// counted and dropped. It stays as it is through reconnects: relays and the
// account API are in endpoints4/6, so a failover needs no hole.
func killSwitchTable(s Spec) tableSpec {
	v6 := s.IPv6 == IPv6Proxy
	t := tableSpec{family: famInet, name: TableKillSwitch,
		counters: []string{CounterBlockedOut, CounterBlockedV6, CounterUnroutedMark}}
	t.sets = []setSpec{
		{name: SetEndpoints4, kind: kindIPv4, interval: true, ranges: prefixesOf(append(append([]netip.Prefix(nil), s.Relays...), s.APIEndpoints...), false)},
		{name: SetPrivate4, kind: kindIPv4, interval: true, ranges: prefixesOf(s.Private, false)},
		{name: SetDNSDirect4, kind: kindIPv4, addrs: hostAddrs(s.DNSDirect, false)},
		{name: SetCNDirect4, kind: kindIPv4, interval: true, ranges: prefixesOf(s.CNDirect4, false)},
		{name: SetDomestic, kind: kindIPv4, timeout: DomesticTimeout, synced: true},
		loopGuardSet(),
	}
	t.sets = append(t.sets, dnsSets(s, false)...)
	if v6 {
		t.sets = append(t.sets,
			setSpec{name: SetEndpoints6, kind: kindIPv6, interval: true, ranges: prefixesOf(append(append([]netip.Prefix(nil), s.Relays...), s.APIEndpoints...), true)},
			setSpec{name: SetPrivate6, kind: kindIPv6, interval: true, ranges: prefixesOf(s.Private, true)},
			setSpec{name: SetDNSDirect6, kind: kindIPv6, addrs: hostAddrs(s.DNSDirect, true)},
			setSpec{name: SetCNDirect6, kind: kindIPv6, interval: true, ranges: prefixesOf(s.CNDirect6, true)},
		)
		t.sets = append(t.sets, dnsSets(s, true)...)
	}
	if s.router() {
		t.counters = append(t.counters, CounterBlockedFwd)
		t.sets = append(t.sets,
			setSpec{name: SetBypassDevices, kind: kindEther, macs: bypassMACs(s)},
			setSpec{name: SetBypassSrc, kind: kindIPv4, addrs: bypassAddrs(s, false)},
		)
	}
	r := func(id string) *ruleBuilder { return newRule(famInet, id) }

	// output: the router's (or laptop's) own traffic.
	// The loop guard's reset comes first: a looping proxy's packets are
	// bound for lo by the time they get here (loopguard.go).
	out := []rule{loopGuardRule()}
	out = append(out, loopGuardEventRules(s.LoopGuardGate)...)
	out = append(out, r("out-loopback").oifname("lo", false).accept())
	if s.router() {
		// Traffic to the LAN never leaves the house; this includes the tproxy
		// socket's replies to LAN clients, which carry mark 0 (DESIGN §9).
		out = append(out, r("out-lan").oifname(s.LANIf, false).accept())
	}
	// judgedOut is the part of the output chain that depends on the packet
	// alone, not on its route: the routing layer's release chain (permit.go)
	// asks the same questions before it releases a held packet.
	var judgedOut []rule
	if !v6 {
		judgedOut = append(judgedOut, ipv6LinkControl(famInet)...)
		judgedOut = append(judgedOut, r("out-block-v6").nfproto(true).counterNamed(CounterBlockedV6).drop())
	}
	judgedOut = append(judgedOut, r("out-mark-tunnel").mark(MarkTunnel).accept())
	judgedOut = append(judgedOut, directAccepts(s)...) // strict.go
	judgedOut = append(judgedOut, r("out-endpoints4").addrLookup(false, false, SetEndpoints4).accept())
	if v6 {
		judgedOut = append(judgedOut, r("out-endpoints6").addrLookup(true, false, SetEndpoints6).accept())
	}
	// Private destinations are the local network (a laptop's printer, the
	// router's modem): not the internet, nothing to leak to.
	judgedOut = append(judgedOut, r("out-private4").addrLookup(false, false, SetPrivate4).accept())
	if v6 {
		judgedOut = append(judgedOut, r("out-private6").addrLookup(true, false, SetPrivate6).accept())
	}
	judgedOut = append(judgedOut,
		r("out-dhcp-client").nfproto(false).port(unix.IPPROTO_UDP, true, 68).port(unix.IPPROTO_UDP, false, 67).accept(),
		r("out-ntp").port(unix.IPPROTO_UDP, false, 123).accept(),
	)
	judgedOut = append(judgedOut, dnsDirectAccepts(false)...)
	if v6 {
		judgedOut = append(judgedOut, dnsDirectAccepts(true)...)
	}
	judgedOut = append(judgedOut, r("out-cn-direct4").addrLookup(false, false, SetCNDirect4).accept())
	if v6 {
		judgedOut = append(judgedOut, r("out-cn-direct6").addrLookup(true, false, SetCNDirect6).accept())
	}
	judgedOut = append(judgedOut, r("out-domestic").addrLookup(false, false, SetDomestic).accept())
	out = append(out, judgedOut...)
	// Everything still here is refused and counted below (direct_blocked,
	// blocked_out): wake the counter signal first (counterwake.go).
	out = append(out, counterWakeRule(famInet, "out-counter-wake"))
	out = append(out, directRejects(s)...) // strict.go
	out = append(out, r("out-blocked").counterNamed(CounterBlockedOut).drop())
	if s.narrowsDirect() {
		t.counters = append(t.counters, CounterDirectBlocked)
	}
	t.chains = append(t.chains, chainSpec{name: "output", typ: nftables.ChainTypeFilter,
		hook: hook(nftables.ChainHookOutput), prio: PrioKillSwitch, policy: nftables.ChainPolicyDrop, rules: out})

	var judgedFwd []rule
	if s.router() {
		// Traffic to the LAN (replies, LAN to LAN) is judged by its
		// outgoing interface; the rest (judgedFwd) by the packet alone,
		// which is what the routing layer's release chain asks too.
		fwd := []rule{
			r("fwd-lan-lan").iifname(s.LANIf, false).oifname(s.LANIf, false).accept(),
			r("fwd-replies").oifname(s.LANIf, false).ctEstablishedRelated().accept(),
		}
		judgedFwd = []rule{
			r("fwd-port-forwards").ctDNAT().accept(),
			r("fwd-bypass-mac").etherSaddrLookup(SetBypassDevices).accept(),
			r("fwd-bypass-src").addrLookup(false, true, SetBypassSrc).accept(),
		}
		if !v6 {
			judgedFwd = append(judgedFwd, r("fwd-block-v6").nfproto(true).counterNamed(CounterBlockedV6).drop())
		}
		judgedFwd = append(judgedFwd, r("fwd-cn-direct4").iifname(s.LANIf, false).addrLookup(false, false, SetCNDirect4).accept())
		if v6 {
			judgedFwd = append(judgedFwd, r("fwd-cn-direct6").iifname(s.LANIf, false).addrLookup(true, false, SetCNDirect6).accept())
		}
		judgedFwd = append(judgedFwd, r("fwd-domestic").iifname(s.LANIf, false).addrLookup(false, false, SetDomestic).accept())
		fwd = append(fwd, judgedFwd...)
		fwd = append(fwd, r("fwd-blocked").counterNamed(CounterBlockedFwd).drop())
		t.chains = append(t.chains, chainSpec{name: "forward", typ: nftables.ChainTypeFilter,
			hook: hook(nftables.ChainHookForward), prio: PrioKillSwitch, policy: nftables.ChainPolicyDrop, rules: fwd})
	}

	t.chains = append(t.chains, dnsRouteChain(s))
	t.chains = append(t.chains, permitChains(s, judgedOut, judgedFwd)...) // permit.go

	// postrouting: a tunnel-marked packet must be delivered locally (to the
	// proxy). If it is about to leave through a real interface, the policy
	// rule is missing (vendor disconnected, crash) and it would leak: drop.
	t.chains = append(t.chains, chainSpec{name: "postrouting", typ: nftables.ChainTypeFilter,
		hook: hook(nftables.ChainHookPostrouting), prio: PrioKillSwitch, policy: nftables.ChainPolicyAccept,
		rules: []rule{r("post-unrouted-mark").mark(MarkTunnel).oifname("lo", true).counterNamed(CounterUnroutedMark).drop()}})
	return t
}

// ipv6LinkControl is the IPv6 the router needs on its links even when IPv6
// is blocked: neighbour discovery, router solicitation and the DHCPv6 client.
// None of it carries user traffic or leaves the link.
func ipv6LinkControl(fam nftables.TableFamily) []rule {
	r := func(id string) *ruleBuilder { return newRule(fam, id) }
	return []rule{
		r("out-v6-router-solicit").icmpv6Type(133, "nd-router-solicit").accept(),
		r("out-v6-neighbor-solicit").icmpv6Type(135, "nd-neighbor-solicit").accept(),
		r("out-v6-neighbor-advert").icmpv6Type(136, "nd-neighbor-advert").accept(),
		r("out-v6-dhcp-client").nfproto(true).port(unix.IPPROTO_UDP, true, 546).port(unix.IPPROTO_UDP, false, 547).accept(),
	}
}

// tproxyTable sends LAN TCP to the proxy (ip table, or ip6 with v6). Private,
// bypassed, domestic and DTLS traffic returns untouched; QUIC is rejected so
// browsers fall back to TCP, which is proxied; DoH endpoints are reset so
// clients fall back to plain DNS, which dns_enforce catches.
func tproxyTable(s Spec, v6 bool) tableSpec {
	fam, name, kind, lo, cn := famIP, TableTProxy, kindIPv4, loopback4, s.CNDirect4
	if v6 {
		fam, name, kind, lo, cn = famIP6, TableTProxy6, kindIPv6, loopback6, s.CNDirect6
	}
	t := tableSpec{family: fam, name: name}
	t.sets = []setSpec{
		{name: SetPrivate, kind: kind, interval: true, ranges: prefixesOf(s.Private, v6)},
		{name: SetBypassDevices, kind: kindEther, macs: bypassMACs(s)},
		{name: SetBypassSrc, kind: kind, addrs: bypassAddrs(s, v6)},
		{name: SetCNDirect, kind: kind, interval: true, ranges: prefixesOf(cn, v6)},
		{name: SetBlockedDoH, kind: kind, interval: true, ranges: prefixesOf(s.BlockedDoH, v6)},
	}
	if !v6 {
		t.sets = append(t.sets, setSpec{name: SetDomestic, kind: kindIPv4, timeout: DomesticTimeout, synced: true})
	}
	r := func(id string) *ruleBuilder { return newRule(fam, id) }
	rules := []rule{
		r("not-lan").iifname(s.LANIf, true).ret(),
		// The router's own addresses (LuCI, SSH, its DNS) are never proxied,
		// whether or not the LAN's range is a private one.
		r("router-local").fibDaddrLocal().ret(),
		r("private").addrLookup(v6, false, SetPrivate).ret(),
		r("bypass-mac").etherSaddrLookup(SetBypassDevices).ret(),
		r("bypass-src").addrLookup(v6, true, SetBypassSrc).ret(),
		// Blocked DoH is reset before anything could let it pass (cn_direct,
		// domestic, the proxy): the client falls back to plain DNS at once.
		r("blocked-doh").addrLookup(v6, false, SetBlockedDoH).port(unix.IPPROTO_TCP, false, PortDoH).rejectReset(),
		r("cn-direct").addrLookup(v6, false, SetCNDirect).ret(),
	}
	if !v6 {
		rules = append(rules,
			r("domestic").addrLookup(false, false, SetDomestic).ret(),
			// LAN DNS over TCP is dns_enforce's (nat, after this chain):
			// tproxied, it would reach the client's own resolver through the
			// tunnel instead of the router's.
			r("dns-tcp").port(unix.IPPROTO_TCP, false, PortDNS).ret(),
		)
	}
	rules = append(rules,
		// DTLS (WebRTC, some VPN-in-browser) records carry version 0xfefd at
		// UDP payload bytes 1-2; QUIC long headers never do.
		r("dtls").port(unix.IPPROTO_UDP, false, 443).thPayload(72, 16, 0xfefd).ret(),
		r("quic").port(unix.IPPROTO_UDP, false, 443).rejectPort(),
	)
	rules = append(rules, probeRules(s, v6)...)
	if s.ProxyDown {
		// Tombstone: the proxy is not listening; reset LAN TCP at once
		// rather than letting it time out against a closed port.
		rules = append(rules, r("tombstone").l4proto(unix.IPPROTO_TCP).rejectReset())
	} else {
		rules = append(rules, lanWakeRule(fam), // wakes the early detector (lanwake.go)
			r("tproxy").l4proto(unix.IPPROTO_TCP).tproxy(lo, s.ProxyPort).setMark(MarkTunnel).accept())
	}
	t.chains = []chainSpec{{name: "prerouting", typ: nftables.ChainTypeFilter, hook: hook(nftables.ChainHookPrerouting),
		prio: PrioTProxy, policy: nftables.ChainPolicyAccept, rules: rules}}
	return t
}

// dnsTable redirects every LAN DNS query, whatever resolver it was sent to,
// to the router's local resolver; bypass devices keep their own DNS.
func dnsTable(s Spec) tableSpec {
	t := tableSpec{family: famIP, name: TableDNS}
	t.sets = []setSpec{
		{name: SetBypassDevices, kind: kindEther, macs: bypassMACs(s)},
		{name: SetVPNBypass, kind: kindIPv4, addrs: bypassAddrs(s, false)},
	}
	r := func(id string) *ruleBuilder { return newRule(famIP, id) }
	t.chains = []chainSpec{{name: "prerouting", typ: nftables.ChainTypeNAT, hook: hook(nftables.ChainHookPrerouting),
		prio: PrioDNS, policy: nftables.ChainPolicyAccept, rules: []rule{
			r("not-lan").iifname(s.LANIf, true).ret(),
			r("bypass-mac").etherSaddrLookup(SetBypassDevices).ret(),
			r("bypass-src").addrLookup(false, true, SetVPNBypass).ret(),
			r("dns-udp").port(unix.IPPROTO_UDP, false, 53).redirect(s.LocalResolverPort).done(),
			r("dns-tcp").port(unix.IPPROTO_TCP, false, 53).redirect(s.LocalResolverPort).done(),
		}}}
	return t
}

// moatTable counts TCP control packets on the relay paths. Injected RSTs, a
// SYN-ACK shortfall or unexpected SYNs show interference with the tunnel
// before connections visibly fail.
func moatTable(s Spec) tableSpec {
	t := tableSpec{family: famInet, name: TableMoat,
		counters: []string{CounterSynOut, CounterSynAckIn, CounterSynIn, CounterRstIn, CounterFinIn}}
	t.sets = []setSpec{
		{name: SetRelays4, kind: kindIPv4, interval: true, ranges: prefixesOf(s.Relays, false)},
		{name: SetRelays6, kind: kindIPv6, interval: true, ranges: prefixesOf(s.Relays, true)},
	}
	var out, in []rule
	for _, v6 := range []bool{false, true} {
		set, sfx := SetRelays4, "4"
		if v6 {
			set, sfx = SetRelays6, "6"
		}
		r := func(id string) *ruleBuilder { return newRule(famInet, id+sfx) }
		out = append(out, r("syn-out").addrLookup(v6, false, set).tcpFlags(tcpSYN|tcpACK, tcpSYN).counterNamed(CounterSynOut).done())
		in = append(in,
			r("synack-in").addrLookup(v6, true, set).tcpFlags(tcpSYN|tcpACK, tcpSYN|tcpACK).counterNamed(CounterSynAckIn).done(),
			r("syn-in").addrLookup(v6, true, set).tcpFlags(tcpSYN|tcpACK, tcpSYN).counterNamed(CounterSynIn).done(),
			r("rst-in").addrLookup(v6, true, set).tcpFlags(tcpRST, tcpRST).counterNamed(CounterRstIn).done(),
			// Its own rule, so a kernel without NFLOG loses only the wake-up (nflog.go).
			counterWake(r("rst-in-wake").addrLookup(v6, true, set).tcpFlags(tcpRST, tcpRST)).done(), // counterwake.go
			r("fin-in").addrLookup(v6, true, set).tcpFlags(tcpFIN, tcpFIN).counterNamed(CounterFinIn).done(),
		)
	}
	t.chains = []chainSpec{
		{name: "output", typ: nftables.ChainTypeFilter, hook: hook(nftables.ChainHookOutput), prio: PrioMoat,
			policy: nftables.ChainPolicyAccept, rules: out},
		{name: "prerouting", typ: nftables.ChainTypeFilter, hook: hook(nftables.ChainHookPrerouting), prio: PrioMoat,
			policy: nftables.ChainPolicyAccept, rules: in},
	}
	return t
}
