package main

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"surflare-watchdog/src/lab"
	"surflare-watchdog/src/lab/fakes"
)

// Names and priorities of the vendor's kernel state (SURFLARE-CONTRACT.md).
const (
	tableName       = "surflare"
	chainOutput     = "output"     // type route hook output: marks locally generated traffic
	chainPrerouting = "prerouting" // type filter hook prerouting: tproxy for marked traffic
	setServerPorts  = "server_ports"
	setBypass       = "bypass_v4"
	// chainPriority is mangle (-150): marking must happen before the
	// routing decision is redone for route-type chains, and before
	// filter-priority rules (kill switches) look at the mark.
	chainPriority = -150
)

// bypassV4 are the destinations the vendor's table never captures: the
// reserved/private ranges a real client excludes, plus the lab's directly
// connected LAN and WAN subnets. The relays are deliberately NOT excluded:
// only the proxy's SO_MARK 0xff keeps its relay traffic out of the tunnel,
// which is what makes the proxy_loop fault (mark lost) a real loop.
// Domestic (cn) destinations are not excluded either: in rule mode the
// proxy itself sends them direct; in global mode the watchdog adds its own.
var bypassV4 = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("224.0.0.0/4"),
	lab.LANNet,
	lab.WANNet,
}

// tunnelTable is the table surflare connect creates.
func tunnelTable() *nftables.Table {
	return &nftables.Table{Family: nftables.TableFamilyINet, Name: tableName}
}

// installTable (re)creates table inet surflare in one atomic batch:
//
//	set server_ports { type inet_service; elements = { relay port, exit port } }
//	set bypass_v4 { type ipv4_addr; flags interval; elements = bypassV4 }
//	chain output { type route hook output priority -150;
//	  meta mark 0xff return
//	  ip daddr @bypass_v4 return
//	  meta nfproto ipv4 meta l4proto icmp drop
//	  meta nfproto ipv4 meta l4proto tcp meta mark set 0x1 }
//	chain prerouting { type filter hook prerouting priority -150;
//	  meta mark 0x1 meta nfproto ipv4 meta l4proto tcp tproxy ip to 127.0.0.1:10800 }
//
// With the udp knob (E8, the default) UDP is marked and tproxied the same way:
//
//	chain output { …; meta nfproto ipv4 meta l4proto udp meta mark set 0x1 }
//	chain prerouting { …; meta mark 0x1 meta nfproto ipv4 meta l4proto udp tproxy ip to 127.0.0.1:10800 }
//
// With udp=0 only TCP is captured and UDP is left to routing, i.e. to the
// watchdog's kill switch and DNS enforcement (the old fake).
func installTable(c *nftables.Conn, udp bool) error {
	t := tunnelTable()
	c.AddTable(t)
	c.DelTable(t) // add+delete+add: a fresh table even if one was left behind
	c.AddTable(t)

	ports := &nftables.Set{Table: t, Name: setServerPorts, KeyType: nftables.TypeInetService}
	if err := c.AddSet(ports, []nftables.SetElement{
		{Key: binaryutil.BigEndian.PutUint16(lab.RelayPort)},
		{Key: binaryutil.BigEndian.PutUint16(lab.ExitPort)},
	}); err != nil {
		return fmt.Errorf("adding set %s: %w", setServerPorts, err)
	}
	bypass := &nftables.Set{Table: t, Name: setBypass, KeyType: nftables.TypeIPAddr, Interval: true}
	if err := c.AddSet(bypass, intervalElements(bypassV4)); err != nil {
		return fmt.Errorf("adding set %s: %w", setBypass, err)
	}

	prio := nftables.ChainPriority(chainPriority)
	out := c.AddChain(&nftables.Chain{Table: t, Name: chainOutput, Type: nftables.ChainTypeRoute,
		Hooknum: nftables.ChainHookOutput, Priority: &prio})
	pre := c.AddChain(&nftables.Chain{Table: t, Name: chainPrerouting, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPrerouting, Priority: &prio})

	for _, r := range [][]expr.Any{
		join(matchMark(lab.MarkDirect), verdict(expr.VerdictReturn)),
		{
			&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV4}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
			&expr.Lookup{SourceRegister: 1, SetName: bypass.Name, SetID: bypass.ID},
			&expr.Verdict{Kind: expr.VerdictReturn},
		},
		join(matchV4Proto(unix.IPPROTO_ICMP), verdict(expr.VerdictDrop)),
	} {
		c.AddRule(&nftables.Rule{Table: t, Chain: out, Exprs: r})
	}
	protos := []byte{unix.IPPROTO_TCP}
	if udp {
		protos = append(protos, unix.IPPROTO_UDP)
	}
	for _, proto := range protos {
		c.AddRule(&nftables.Rule{Table: t, Chain: out, Exprs: join(matchV4Proto(proto), []expr.Any{
			&expr.Immediate{Register: 1, Data: binaryutil.NativeEndian.PutUint32(lab.MarkTunnel)},
			&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1},
		})})
		c.AddRule(&nftables.Rule{Table: t, Chain: pre, Exprs: join(
			matchMark(lab.MarkTunnel),
			matchV4Proto(proto),
			[]expr.Any{
				&expr.Immediate{Register: 1, Data: net.IPv4(127, 0, 0, 1).To4()},
				&expr.Immediate{Register: 2, Data: binaryutil.BigEndian.PutUint16(lab.ProxyPort)},
				&expr.TProxy{Family: byte(nftables.TableFamilyIPv4), TableFamily: byte(nftables.TableFamilyINet), RegAddr: 1, RegPort: 2},
			},
		)})
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("creating table inet %s: %w", tableName, err)
	}
	return nil
}

// deleteTable removes table inet surflare; a missing table is success.
func deleteTable(c *nftables.Conn) error {
	c.DelTable(tunnelTable())
	if err := c.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("deleting table inet %s: %w", tableName, err)
	}
	return nil
}

func join(parts ...[]expr.Any) []expr.Any { return slices.Concat(parts...) }

func verdict(k expr.VerdictKind) []expr.Any { return []expr.Any{&expr.Verdict{Kind: k}} }

func matchMark(mark uint32) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(mark)},
	}
}

func matchV4Proto(proto byte) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV4}},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
	}
}

// intervalElements turns prefixes into interval-set elements, merging
// overlapping and adjacent ranges (the kernel rejects overlaps).
func intervalElements(ps []netip.Prefix) []nftables.SetElement {
	type rng struct{ lo, hi uint32 } // hi exclusive, 0 = 2^32
	var rs []rng
	for _, p := range ps {
		p = p.Masked()
		a := p.Addr().As4()
		lo := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
		rs = append(rs, rng{lo, lo + uint32(1<<(32-p.Bits()))})
	}
	slices.SortFunc(rs, func(x, y rng) int { return int(int64(x.lo) - int64(y.lo)) })
	var merged []rng
	for _, r := range rs {
		if n := len(merged); n > 0 && (merged[n-1].hi == 0 || r.lo <= merged[n-1].hi) {
			if merged[n-1].hi != 0 && (r.hi == 0 || r.hi > merged[n-1].hi) {
				merged[n-1].hi = r.hi
			}
			continue
		}
		merged = append(merged, r)
	}
	var els []nftables.SetElement
	for _, r := range merged {
		els = append(els, nftables.SetElement{Key: binaryutil.BigEndian.PutUint32(r.lo)})
		if r.hi != 0 { // a range reaching 255.255.255.255 has no end element
			els = append(els, nftables.SetElement{Key: binaryutil.BigEndian.PutUint32(r.hi), IntervalEnd: true})
		}
	}
	return els
}

// tunnelRule is "ip rule fwmark 0x1 lookup 100" — no mask, kernel-chosen
// priority, exactly like the vendor's `ip rule add`.
func tunnelRule() *netlink.Rule {
	r := netlink.NewRule()
	r.Family = unix.AF_INET
	r.Mark = lab.MarkTunnel
	r.Table = lab.TunnelTable
	return r
}

// tunnelRoute is "local default dev lo table 100".
func tunnelRoute() (*netlink.Route, error) {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return nil, fmt.Errorf("finding lo: %w", err)
	}
	return &netlink.Route{
		Family:    unix.AF_INET,
		Type:      unix.RTN_LOCAL,
		Table:     lab.TunnelTable,
		Scope:     netlink.SCOPE_HOST,
		LinkIndex: lo.Attrs().Index,
		Dst:       &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)},
	}, nil
}

// countTunnelRules counts "fwmark 0x1 lookup 100" rules.
func countTunnelRules() (int, error) {
	rs, err := netlink.RuleListFiltered(unix.AF_INET, tunnelRule(), netlink.RT_FILTER_MARK|netlink.RT_FILTER_TABLE)
	if err != nil {
		return 0, fmt.Errorf("listing ip rules: %w", err)
	}
	return len(rs), nil
}

// addTunnelRule adds one more "fwmark 0x1 lookup 100" (duplicates allowed,
// as with `ip rule add`).
func addTunnelRule() error {
	if err := netlink.RuleAdd(tunnelRule()); err != nil {
		return fmt.Errorf("adding ip rule fwmark %#x lookup %d: %w", lab.MarkTunnel, lab.TunnelTable, err)
	}
	return nil
}

// installRouting makes sure the vendor's rule (at least one) and route
// exist. With again (the disconnect=strict knob, E7) it adds the rule
// whatever is there, as a client that runs `ip rule add` on every connect
// does: leftover rules then pile up.
func installRouting(again bool) error {
	n, err := countTunnelRules()
	if err != nil {
		return err
	}
	if n == 0 || again {
		if err := addTunnelRule(); err != nil {
			return err
		}
	}
	rt, err := tunnelRoute()
	if err != nil {
		return err
	}
	if err := netlink.RouteReplace(rt); err != nil {
		return fmt.Errorf("adding route local default dev lo table %d: %w", lab.TunnelTable, err)
	}
	return nil
}

// removeRouting deletes every tunnel rule and the table-100 route.
func removeRouting() error {
	for i := 0; i < 64; i++ {
		err := netlink.RuleDel(tunnelRule())
		if errors.Is(err, unix.ENOENT) {
			break
		}
		if err != nil {
			return fmt.Errorf("deleting ip rule: %w", err)
		}
	}
	rt, err := tunnelRoute()
	if err != nil {
		return err
	}
	if err := netlink.RouteDel(rt); err != nil && !errors.Is(err, unix.ESRCH) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("deleting route local default dev lo table %d: %w", lab.TunnelTable, err)
	}
	return nil
}

// installKernelState creates the vendor's table, rule and route as the
// knobs v say.
func installKernelState(v fakes.Vendor) error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("opening nftables: %w", err)
	}
	if err := installTable(c, v.UDP); err != nil {
		return err
	}
	return installRouting(v.DisconnectStrict)
}

// removeKernelState removes them again (missing pieces are fine).
func removeKernelState() error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("opening nftables: %w", err)
	}
	return errors.Join(deleteTable(c), removeRouting())
}
