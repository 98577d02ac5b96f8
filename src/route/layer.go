package route

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// The routing layer of the kill switch (docs/killswitch-layers.md).
//
// The kill switch is an nftables table, and `fw4 flush` or
// `/etc/init.d/firewall stop` (both `nft flush ruleset`) delete it with every
// other table. Until the firewall guard puts it back, nothing would stop
// unmarked traffic from taking the main table's default route to the WAN.
// The layer is a block of ip rules, which no nftables command touches, that
// such traffic cannot pass: what the kernel routes must either carry a mark
// that says it may (the tunnel's, the proxy's sockets', or MarkPermit, which
// only the kill switch's own chains set), or belong to a class that must keep
// working while nftables is empty (the LAN, the router's own traffic to
// private ranges, the WAN's DHCP, bypass devices by address). Everything
// else from the LAN is black-holed, and the router's own connections are
// held: routed to HoldDevice, which sends nothing anywhere, until the kill
// switch's route chain releases them (marks them MarkPermit, and the kernel
// re-routes them). Local delivery (LuCI, SSH, DNS and DHCP from the LAN to
// the router) is decided by the local table at priority 0, before the layer.
//
// The layer is a filter, not a router: a packet it lets through jumps to the
// end of the block and meets the rules behind it (the tunnel rules, mwan3,
// netifd's, main) exactly as if the layer did not exist.

// Marks, priorities, the table and the device of the layer, explained once.
const (
	// MarkPermit is set by the kill switch's chains (firewall package) on
	// every packet they hand on to the kill switch's judgement: "nftables
	// is here, let the kill switch decide". The bit is far from the
	// vendor's exact 0x1 and 0xff, mwan3's 0x3f00 and pbr's 0xff0000.
	MarkPermit uint32 = 0x20000000
	// LayerPriority is the first rule of the block, LayerPriority+99 the
	// last. After rule 0 (local delivery) and after anything a user put at a
	// small number by hand, before mwan3 (1001+), our tunnel rule (9100) and
	// netifd's ip4table rules (10000+). A rule added without a priority (the
	// vendor's fwmark 0x1 rule) lands just ahead of the block, which is
	// harmless: the tunnel's mark passes the layer anyway.
	LayerPriority = 900
	// HoldTable routes the router's own unmarked traffic to HoldDevice: it
	// gives every connect() a route (and the WAN's source address), so the
	// kill switch's route chain can release the packets; with no nftables,
	// nothing releases them.
	HoldTable = 9101
	// HoldDevice is an empty bridge: up, but with no ports no frame ever
	// leaves it. A bridge because OpenWrt always has one (br-lan);
	// the dummy and veth drivers are optional kernel modules there.
	HoldDevice = "sw-hold"
)

// Priorities inside the block. Every rule of one class shares a priority;
// the kernel keeps them in insertion order, and none of them overlap.
const (
	prioTunnelMark = LayerPriority + iota
	prioDirectMark
	prioPermitMark
	prioLAN      = LayerPriority + 10
	prioPrivate  = LayerPriority + 20
	prioDHCP     = LayerPriority + 30
	prioWANOif   = LayerPriority + 35
	prioBypass   = LayerPriority + 40
	prioHold     = LayerPriority + 90
	prioOwnStop  = LayerPriority + 97 // the router's own, nothing held it: fail fast
	prioStop     = LayerPriority + 98 // everything else: dropped in silence
	prioLayerEnd = LayerPriority + 99 // nop: where every permit jumps to
)

// addrGenModeNone is IN6_ADDR_GEN_MODE_NONE: no IPv6 link-local address.
const addrGenModeNone = 1

// Gateways of the hold routes: nobody answers for them on an empty bridge,
// so a held packet waits in the neighbour queue and is dropped there.
var (
	holdGateway4 = net.IPv4(169, 254, 0, 1).To4()
	holdGateway6 = net.ParseIP("fe80::1")
)

// LayerSpec is the layer's whole wanted state, for both families.
type LayerSpec struct {
	// LANIf is the router's LAN interface ("" on a laptop): bypass devices
	// are matched on it.
	LANIf string
	// LAN are the LAN's prefixes: the router's replies to management
	// sessions and the WAN's replies to LAN clients go there.
	LAN []netip.Prefix
	// Private ranges the router's own traffic may always reach (the kill
	// switch's out-private rules, as far as routing can see them).
	Private []netip.Prefix
	// Bypass are LAN hosts that never use the tunnel (by address; a bypass
	// device known only by its MAC pauses until the kill switch is back).
	Bypass []netip.Addr
	// HoldSrc4 and HoldSrc6 are the source addresses held connections are
	// given: the WAN's. Invalid = no hold route for that family (the WAN is
	// down): the router's own traffic then fails fast, as without a
	// default route.
	HoldSrc4, HoldSrc6 netip.Addr
	// WANDevices are the devices the default routes leave by (and have
	// left by: a PPPoE device that went away comes back with its name).
	// Lookups bound to one pass the layer: the kernel checks a new
	// default route's gateway with a lookup whose output device is the
	// WAN, and without this netifd could not put the default route back
	// after the WAN reconnects (the check would hit the layer's stop).
	WANDevices []string
}

// layerRule is one rule of the block and what it is for (for logs).
type layerRule struct {
	r    *netlink.Rule
	what string
}

// key identifies a rule by everything the kernel reports back about it.
// The rule's action is not among that (the library does not read it), so
// the block gives every action its own priority.
func ruleKey(r *netlink.Rule) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d/%d", r.Family, r.Priority)
	if r.Mask != nil {
		fmt.Fprintf(&b, " fwmark %#x/%#x", r.Mark, *r.Mask)
	}
	if r.Src != nil {
		b.WriteString(" from " + r.Src.String())
	}
	if r.Dst != nil {
		b.WriteString(" to " + r.Dst.String())
	}
	if r.IifName != "" {
		b.WriteString(" iif " + r.IifName)
	}
	if r.OifName != "" {
		b.WriteString(" oif " + r.OifName)
	}
	if r.IPProto > 0 {
		fmt.Fprintf(&b, " ipproto %d", r.IPProto)
	}
	if r.Sport != nil {
		fmt.Fprintf(&b, " sport %d-%d", r.Sport.Start, r.Sport.End)
	}
	if r.Dport != nil {
		fmt.Fprintf(&b, " dport %d-%d", r.Dport.Start, r.Dport.End)
	}
	if r.Goto >= 0 {
		fmt.Fprintf(&b, " goto %d", r.Goto)
	}
	if r.Table > 0 {
		fmt.Fprintf(&b, " lookup %d", r.Table)
	}
	return b.String()
}

func inLayer(prio int) bool { return prio >= LayerPriority && prio <= prioLayerEnd }

// layerRules is the block for one family, in the order it is installed:
// the jump target first, every permit before the rules that stop.
func layerRules(s LayerSpec, fam Family) []layerRule {
	base := func(prio int) *netlink.Rule {
		r := netlink.NewRule()
		r.Family, r.Priority = int(fam), prio
		return r
	}
	var out []layerRule
	add := func(r *netlink.Rule, what string) { out = append(out, layerRule{r, what}) }
	permit := func(r *netlink.Rule, what string) {
		r.Goto = prioLayerEnd
		add(r, what)
	}
	end := base(prioLayerEnd)
	end.Type = nl.FR_ACT_NOP
	add(end, "end of the layer")

	mark := func(prio int, m, mask uint32, what string) {
		r := base(prio)
		r.Mark, r.Mask = m, &mask
		permit(r, what)
	}
	mark(prioTunnelMark, MarkTunnel, 0xffffffff, "tunnel mark")
	mark(prioDirectMark, MarkDirect, 0xffffffff, "proxy's own sockets")
	mark(prioPermitMark, MarkPermit, MarkPermit, "released by the kill switch")

	for _, p := range prefixesOf(s.LAN, fam) {
		r := base(prioLAN)
		r.Dst = p
		permit(r, "to the LAN "+p.String())
	}
	for _, p := range prefixesOf(s.Private, fam) {
		r := base(prioPrivate)
		r.Dst, r.IifName = p, "lo"
		permit(r, "router to private "+p.String())
	}
	client, server := uint16(68), uint16(67)
	if fam == IPv6 {
		client, server = 546, 547
	}
	dhcp := base(prioDHCP)
	dhcp.IifName, dhcp.IPProto = "lo", unix.IPPROTO_UDP
	dhcp.Sport, dhcp.Dport = netlink.NewRulePortRange(client, client), netlink.NewRulePortRange(server, server)
	permit(dhcp, "router's DHCP client")
	for _, dev := range s.WANDevices {
		r := base(prioWANOif)
		r.OifName = dev
		permit(r, "lookups bound to the WAN "+dev)
	}
	if s.LANIf != "" {
		for _, a := range s.Bypass {
			if a.Is6() != (fam == IPv6) {
				continue
			}
			r := base(prioBypass)
			r.Src, r.IifName = ipNet(netip.PrefixFrom(a, a.BitLen())), s.LANIf
			permit(r, "bypass device "+a.String())
		}
	}
	hold := base(prioHold)
	hold.IifName, hold.Table = "lo", HoldTable
	add(hold, "router's own: held")
	own := base(prioOwnStop)
	own.IifName, own.Type = "lo", nl.FR_ACT_UNREACHABLE
	add(own, "router's own: unreachable")
	stop := base(prioStop)
	stop.Type = nl.FR_ACT_BLACKHOLE
	add(stop, "everything else: blackhole")
	return out
}

func prefixesOf(ps []netip.Prefix, fam Family) []*net.IPNet {
	var out []*net.IPNet
	seen := map[netip.Prefix]bool{}
	for _, p := range ps {
		p = p.Masked()
		if !p.IsValid() || p.Addr().Is6() != (fam == IPv6) || seen[p] {
			continue
		}
		seen[p] = true
		out = append(out, ipNet(p))
	}
	return out
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// LayerChange is one thing SetLayer or RemoveLayer changed.
type LayerChange struct {
	Family Family
	What   string // "rule 999 (end of the layer) added", "hold route replaced", …
}

// String is the change as a log line names it: "ipv4 rule 998 (…) added".
func (c LayerChange) String() string { return c.Family.String() + " " + c.What }

// SetLayer makes the kernel hold exactly the layer s describes, for both
// families: the hold device, the hold table's routes and the block of rules.
// It reconciles by diff — rules missing are added (jump target first, the
// rules that stop last), rules of the block that s does not describe are
// deleted (those that stop first) — so calling it again with the same spec
// changes nothing. EEXIST and ENOENT count as success.
func (h *Handle) SetLayer(ctx context.Context, s LayerSpec) ([]LayerChange, error) {
	var ch []LayerChange
	created, err := h.ensureHoldDevice()
	if err != nil {
		return nil, err
	}
	if created {
		ch = append(ch, LayerChange{IPv4, "hold device " + HoldDevice + " created"})
	}
	for _, fam := range []Family{IPv4, IPv6} {
		src := s.HoldSrc4
		if fam == IPv6 {
			src = s.HoldSrc6
		}
		c, err := h.setHoldRoute(fam, src)
		if err != nil {
			return ch, err
		}
		ch = append(ch, c...)
		c, err = h.setLayerRules(fam, layerRules(s, fam))
		ch = append(ch, c...)
		if err != nil {
			return ch, err
		}
	}
	if len(ch) > 0 {
		log().Info("kill switch routing layer set", "changes", len(ch))
	}
	return ch, nil
}

// RemoveLayer deletes the whole layer (rules first, so nothing is ever
// black-holed for want of the hold route). Idempotent.
func (h *Handle) RemoveLayer(ctx context.Context) ([]LayerChange, error) {
	var ch []LayerChange
	for _, fam := range []Family{IPv4, IPv6} {
		c, err := h.setLayerRules(fam, nil)
		ch = append(ch, c...)
		if err != nil {
			return ch, err
		}
	}
	l, err := h.h.LinkByName(HoldDevice)
	var nf netlink.LinkNotFoundError
	switch {
	case errors.As(err, &nf):
	case err != nil:
		return ch, fmt.Errorf("finding %s: %w", HoldDevice, err)
	default:
		// The hold routes go with the device.
		if err := h.h.LinkDel(l); err != nil && !errors.Is(err, unix.ENODEV) {
			return ch, fmt.Errorf("deleting %s: %w", HoldDevice, err)
		}
		ch = append(ch, LayerChange{IPv4, "hold device " + HoldDevice + " deleted"})
	}
	if len(ch) > 0 {
		log().Info("kill switch routing layer removed", "changes", len(ch))
	}
	return ch, nil
}

// unsupported reports that the kernel has no policy routing for the family
// (a build without IPv6, or without multiple tables): then no rule of the
// layer can exist, and there is nothing that family could leak through
// that the layer could stop.
func unsupported(err error) bool {
	return errors.Is(err, unix.EAFNOSUPPORT) || errors.Is(err, unix.EOPNOTSUPP)
}

// setLayerRules reconciles the block of one family with want.
func (h *Handle) setLayerRules(fam Family, want []layerRule) ([]LayerChange, error) {
	rules, err := h.h.RuleList(int(fam))
	if unsupported(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing %s rules: %w", fam, err)
	}
	have := map[string]*netlink.Rule{}
	for i := range rules {
		if inLayer(rules[i].Priority) {
			have[ruleKey(&rules[i])] = &rules[i]
		}
	}
	wanted := map[string]bool{}
	var ch []LayerChange
	for _, w := range want {
		k := ruleKey(w.r)
		wanted[k] = true
		if have[k] != nil {
			continue
		}
		if err := h.h.RuleAdd(w.r); err != nil && !errors.Is(err, unix.EEXIST) {
			return ch, fmt.Errorf("adding %s rule %d (%s): %w", fam, w.r.Priority, w.what, err)
		}
		ch = append(ch, LayerChange{fam, fmt.Sprintf("rule %d (%s) added", w.r.Priority, w.what)})
	}
	// Delete what stops before what permits, and the jump target last.
	var del []*netlink.Rule
	for k, r := range have {
		if !wanted[k] {
			del = append(del, r)
		}
	}
	slices.SortFunc(del, func(a, b *netlink.Rule) int { return deleteRank(b) - deleteRank(a) })
	for _, r := range del {
		if err := h.h.RuleDel(r); err != nil && !errors.Is(err, unix.ENOENT) {
			return ch, fmt.Errorf("deleting %s rule %d: %w", fam, r.Priority, err)
		}
		ch = append(ch, LayerChange{fam, fmt.Sprintf("rule %d (%s) deleted", r.Priority, ruleKey(r))})
	}
	return ch, nil
}

// deleteRank orders deletions: higher goes first.
func deleteRank(r *netlink.Rule) int {
	if r.Priority == prioLayerEnd {
		return 0
	}
	return r.Priority
}

func (h *Handle) ensureHoldDevice() (bool, error) {
	l, err := h.h.LinkByName(HoldDevice)
	created := false
	if err != nil {
		var nf netlink.LinkNotFoundError
		if !errors.As(err, &nf) {
			return false, fmt.Errorf("finding %s: %w", HoldDevice, err)
		}
		// Silent: no multicast snooping, no multicast, no IPv6 link-local
		// address, so it never even sends MLD or IGMP reports to nowhere.
		snooping := false
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: HoldDevice}, MulticastSnooping: &snooping}
		if err := h.h.LinkAdd(br); err != nil && !errors.Is(err, unix.EEXIST) {
			return false, fmt.Errorf("creating the hold device %s: %w", HoldDevice, err)
		}
		if l, err = h.h.LinkByName(HoldDevice); err != nil {
			return false, fmt.Errorf("finding %s: %w", HoldDevice, err)
		}
		if err := h.h.LinkSetIP6AddrGenMode(l, addrGenModeNone); err != nil {
			return false, fmt.Errorf("turning off %s's IPv6 link-local address: %w", HoldDevice, err)
		}
		if err := h.h.LinkSetMulticastOff(l); err != nil {
			return false, fmt.Errorf("turning off multicast on %s: %w", HoldDevice, err)
		}
		created = true
	}
	if _, ok := l.(*netlink.Bridge); !ok {
		return false, fmt.Errorf("%s exists and is a %s, not the bridge the kill switch holds traffic on", HoldDevice, l.Type())
	}
	if l.Attrs().Flags&net.FlagUp == 0 {
		if err := h.h.LinkSetUp(l); err != nil {
			return false, fmt.Errorf("setting %s up: %w", HoldDevice, err)
		}
	}
	return created, nil
}

// holdRoute is the wanted route of one family in HoldTable (nil: none).
func holdRoute(fam Family, dev int, src netip.Addr) *netlink.Route {
	if !src.IsValid() || src.Is6() != (fam == IPv6) {
		return nil
	}
	r := &netlink.Route{LinkIndex: dev, Dst: defaultDst(fam), Table: HoldTable, Family: int(fam),
		Src: net.IP(src.AsSlice()), Gw: holdGateway4}
	if fam == IPv6 {
		r.Gw = holdGateway6
	} else {
		r.Flags = int(netlink.FLAG_ONLINK)
	}
	return r
}

func (h *Handle) setHoldRoute(fam Family, src netip.Addr) ([]LayerChange, error) {
	l, err := h.h.LinkByName(HoldDevice)
	if err != nil {
		return nil, fmt.Errorf("finding %s: %w", HoldDevice, err)
	}
	want := holdRoute(fam, l.Attrs().Index, src)
	have, err := h.h.RouteListFiltered(int(fam), &netlink.Route{Table: HoldTable}, netlink.RT_FILTER_TABLE)
	if unsupported(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing %s table %d: %w", fam, HoldTable, err)
	}
	var ch []LayerChange
	matched := false
	for i := range have {
		r := &have[i]
		if want != nil && !matched && isDefault(r.Dst) && r.LinkIndex == want.LinkIndex && r.Src.Equal(want.Src) && r.Gw.Equal(want.Gw) {
			matched = true
			continue
		}
		if err := h.h.RouteDel(r); err != nil && !errors.Is(err, unix.ESRCH) && !errors.Is(err, unix.ENOENT) {
			return ch, fmt.Errorf("deleting %s route from table %d: %w", fam, HoldTable, err)
		}
		ch = append(ch, LayerChange{fam, "stale hold route deleted"})
	}
	if want != nil && !matched {
		if err := h.h.RouteReplace(want); err != nil {
			return ch, fmt.Errorf("adding %s hold route (src %s): %w", fam, src, err)
		}
		ch = append(ch, LayerChange{fam, "hold route via " + HoldDevice + " src " + src.String() + " set"})
	}
	return ch, nil
}

// LayerState is what the kernel holds of the layer.
type LayerState struct {
	Device bool // the hold device exists
	// Rules per family: how many rules of the block are there, and whether
	// the two that stop traffic are among them.
	Rules4, Rules6         int
	Stops4, Stops6         bool
	HoldRoute4, HoldRoute6 bool
}

// Armed reports that both families stop what the layer does not permit.
func (s LayerState) Armed() bool { return s.Stops4 && s.Stops6 }

// Layer reads the layer's state.
func (h *Handle) Layer(ctx context.Context) (LayerState, error) {
	var st LayerState
	if _, err := h.h.LinkByName(HoldDevice); err == nil {
		st.Device = true
	}
	for _, fam := range []Family{IPv4, IPv6} {
		rules, err := h.h.RuleList(int(fam))
		if unsupported(err) { // nothing of that family is routed at all
			if fam == IPv6 {
				st.Stops6 = st.Stops4
			}
			continue
		}
		if err != nil {
			return st, fmt.Errorf("listing %s rules: %w", fam, err)
		}
		n, stops := 0, 0
		for _, r := range rules {
			if inLayer(r.Priority) {
				n++
				if r.Priority == prioStop || r.Priority == prioOwnStop {
					stops++
				}
			}
		}
		routes, err := h.h.RouteListFiltered(int(fam), &netlink.Route{Table: HoldTable}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return st, fmt.Errorf("listing %s table %d: %w", fam, HoldTable, err)
		}
		if fam == IPv4 {
			st.Rules4, st.Stops4, st.HoldRoute4 = n, stops == 2, len(routes) > 0
		} else {
			st.Rules6, st.Stops6, st.HoldRoute6 = n, stops == 2, len(routes) > 0
		}
	}
	return st, nil
}
