package firewall

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"

	"surflare-watchdog/src/route"
)

// The kill switch's half of the routing layer (Spec.RouteLayer; the ip
// rules are package route's, docs/killswitch-layers.md). The layer stops
// every routed packet that carries no permitted mark; two release chains,
// in the kill switch's own table, give MarkPermit to the packets the kill
// switch lets through. They exist exactly as long as the kill switch does —
// the same table, the same batch — so when `nft flush ruleset` deletes it,
// nothing is released any more, and when the guard restores it, everything
// is judged by it again. MarkPermit buys nothing in the kill switch's own
// rules, which match the tunnel's and the proxy's marks exactly.
//
// A release chain judges, it does not just release. The kernel unhooks a
// deleted chain by swapping its hook for "accept" under packets already on
// their way: a packet released by a chain that merely marked everything
// could meet the filter chain after it was unhooked, and leave. Measured:
// one packet per class in about one flush in eight at a few kpps. Since the
// release chain asks the kill switch's own questions (the same rules, built
// once in killSwitchTable), a packet it released is one the kill switch
// accepts, whatever happens to the filter chain after it.

// MarkPermit: see package route.
const MarkPermit = route.MarkPermit

// PrioPermit: after every chain of the mangle slot that may mark or reroute
// (the vendor's -150, dns_route's -149, the tproxy's -150, DNS redirection
// at -100), so the layer sees their decisions; before the kill switch's
// filter (PrioKillSwitch), which still judges the re-routed packet.
const PrioPermit = PrioKillSwitch - 1

// Chain names of the release chains.
const (
	ChainPermitOut = "permit_out"
	ChainPermitIn  = "permit_in"
)

// permitChains are the release chains (none without the layer). judgedOut
// and judgedFwd are the output and forward rules that judge a packet by
// itself, not by its route (killSwitchTable).
//
//   - permit_out (route, output): a packet of the router's own that the
//     layer routed to its hold device gets MarkPermit when judgedOut
//     accepts it; the kernel re-routes it, and the layer passes it on to the
//     main table (or whatever comes after it). The rules of the output chain
//     that look at the route (to lo, to the LAN) are not needed: such
//     packets are never held. The tunnel's and the proxy's exact marks are
//     left alone here too: a chain sees the device of the route the packet
//     had when the hook began, so a packet the vendor's chain has already
//     re-routed to the tunnel still shows the hold device.
//   - permit_in (filter, prerouting): a packet that comes in from an
//     interface gets MarkPermit when judgedFwd accepts it. Routing comes
//     after prerouting, so no re-route is needed. What the forward chain
//     accepts by its outgoing interface (replies to the LAN, LAN to LAN)
//     goes to the LAN, which the layer passes anyway. A laptop has no
//     forward chain: what it forwards for its containers or VMs is released
//     whole (nothing to judge it, so nothing to race with), as without the
//     layer.
func permitChains(s Spec, judgedOut, judgedFwd []rule) []chainSpec {
	if !s.RouteLayer {
		return nil
	}
	r := func(id string) *ruleBuilder { return newRule(famInet, id) }
	out := []rule{r("permit-out-unheld").oifname(route.HoldDevice, true).accept()}
	out = append(out, permitSkipExact("permit-out")...)
	out = append(out, releasing("permit-out-", judgedOut)...)
	in := []rule{r("permit-in-local").iifname("lo", false).accept()}
	in = append(in, permitSkipExact("permit-in")...)
	if s.router() {
		in = append(in, releasing("permit-in-", judgedFwd)...)
	} else {
		in = append(in, r("permit-in-all").orMark(MarkPermit).accept())
	}
	return []chainSpec{
		{name: ChainPermitOut, typ: nftables.ChainTypeRoute, hook: hook(nftables.ChainHookOutput),
			prio: PrioPermit, policy: nftables.ChainPolicyAccept, rules: out},
		{name: ChainPermitIn, typ: nftables.ChainTypeFilter, hook: hook(nftables.ChainHookPrerouting),
			prio: PrioPermit, policy: nftables.ChainPolicyAccept, rules: in},
	}
}

// permitSkipExact leaves the tunnel's and the proxy's exact marks alone.
func permitSkipExact(prefix string) []rule {
	return []rule{
		newRule(famInet, prefix+"-tunnel").mark(MarkTunnel).accept(),
		newRule(famInet, prefix+"-direct").mark(MarkDirect).accept(),
	}
}

// releasing turns judging rules into release rules: the same match, and
// where the rule accepts, MarkPermit and accept; where it drops or
// rejects, accept without the mark (the packet stays held, and the filter
// chain refuses it). Counters are left out: the filter chain counts.
func releasing(prefix string, judged []rule) []rule {
	var out []rule
	for _, j := range judged {
		if !j.hasVerdict {
			continue
		}
		b := j.match.clone()
		b.id = prefix + strings.TrimPrefix(strings.TrimPrefix(j.id, "out-"), "fwd-")
		b.words, b.exprs = withoutCounters(b.words, b.exprs)
		if j.verdict == expr.VerdictAccept {
			b.orMark(MarkPermit)
		}
		out = append(out, b.accept())
	}
	return out
}

// withoutCounters drops the counter statements of a match.
func withoutCounters(words []string, es []expr.Any) ([]string, []expr.Any) {
	words = slices.DeleteFunc(words, func(w string) bool { return strings.HasPrefix(w, "counter") })
	es = slices.DeleteFunc(es, func(e expr.Any) bool {
		switch e.(type) {
		case *expr.Counter, *expr.Objref:
			return true
		}
		return false
	})
	return words, es
}

// markNot matches a packet whose mark is not exactly m.
func (b *ruleBuilder) markNot(m uint32) *ruleBuilder {
	return b.add(fmt.Sprintf("meta mark != 0x%08x", m), metaLoad(expr.MetaKeyMARK), cmpNeq(binaryutil.NativeEndian.PutUint32(m)))
}

// orMark sets the bits of m in the packet mark and keeps the others (other
// packages' marks, mwan3's among them, stay as they are).
func (b *ruleBuilder) orMark(m uint32) *ruleBuilder {
	return b.add(fmt.Sprintf("meta mark set meta mark | 0x%08x", m),
		metaLoad(expr.MetaKeyMARK),
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(^m), Xor: binaryutil.NativeEndian.PutUint32(m)},
		&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1})
}

// syncLayer installs the layer when s asks for it and removes it when it
// does not. Apply calls it after the batch when installing (the release
// chains are in place before anything is held) and before it when removing
// (nothing stays held for want of them).
func (f *Firewall) syncLayer(ctx context.Context, s Spec) (Changes, error) {
	h, err := f.routeHandle()
	if err != nil {
		return nil, err
	}
	defer h.Close()
	var lc []route.LayerChange
	if s.RouteLayer {
		ls, err := f.layerSpec(ctx, h, s)
		if err != nil {
			return nil, err
		}
		lc, err = h.SetLayer(ctx, ls)
		if err != nil {
			return layerChanges(lc), fmt.Errorf("kill switch routing layer: %w", err)
		}
	} else if lc, err = h.RemoveLayer(ctx); err != nil {
		return layerChanges(lc), fmt.Errorf("removing the kill switch routing layer: %w", err)
	}
	return layerChanges(lc), nil
}

// layerSpec is the layer for s, with the facts only the kernel knows: the
// LAN's prefixes and the WAN's source addresses.
func (f *Firewall) layerSpec(ctx context.Context, h *route.Handle, s Spec) (route.LayerSpec, error) {
	ls := route.LayerSpec{Private: layerPrivate(s)}
	if s.router() {
		ls.LANIf = s.LANIf
		lan, err := h.Prefixes(ctx, s.LANIf)
		var nf netlink.LinkNotFoundError
		if err != nil && !errors.As(err, &nf) { // no LAN yet: nothing to permit there
			return ls, err
		}
		ls.LAN = lan
		ls.Bypass = append(bypassAddrs(s, false), bypassAddrs(s, true)...)
	}
	var err error
	if ls.HoldSrc4, err = h.DefaultSource(ctx, route.IPv4); err != nil {
		return ls, err
	}
	if ls.HoldSrc6, err = h.DefaultSource(ctx, route.IPv6); err != nil {
		return ls, err
	}
	for _, fam := range []route.Family{route.IPv4, route.IPv6} {
		devs, err := h.DefaultDevices(ctx, fam)
		if err != nil {
			return ls, err
		}
		ls.WANDevices = append(ls.WANDevices, devs...)
	}
	ls.WANDevices = f.rememberWAN(ls.WANDevices)
	return ls, nil
}

// rememberWAN adds now to the WAN devices default routes have used since
// the Firewall was made, and returns them all: a device is kept when its
// route goes (a WAN down, a PPPoE reconnect), so the rule that lets netifd
// put the route back is there when it is needed.
func (f *Firewall) rememberWAN(now []string) []string {
	f.wanMu.Lock()
	defer f.wanMu.Unlock()
	if f.wanSeen == nil {
		f.wanSeen = map[string]bool{}
	}
	for _, n := range now {
		f.wanSeen[n] = true
	}
	out := make([]string, 0, len(f.wanSeen))
	for n := range f.wanSeen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// linkLocal6 is the IPv6 the router's own traffic may always reach when
// IPv6 is blocked: its links (the kill switch lets the LAN and IPv6 link
// control through, and link-local never leaves the link).
var linkLocal6 = netip.MustParsePrefix("fe80::/10")

// layerPrivate are the private destinations the layer lets the router's
// own traffic reach: the kill switch's, less IPv6 beyond the link when it
// blocks IPv6 (its out-block-v6 comes before out-private).
func layerPrivate(s Spec) []netip.Prefix {
	if s.IPv6 == IPv6Proxy {
		return s.Private
	}
	out := []netip.Prefix{linkLocal6}
	for _, p := range s.Private {
		if p.Addr().Is4() {
			out = append(out, p)
		}
	}
	return out
}

func layerChanges(lc []route.LayerChange) Changes {
	var ch Changes
	for _, c := range lc {
		ch = append(ch, Change{Table: "routing layer " + c.Family.String(), Action: c.What})
	}
	return ch
}

// RouteLayer reports what the kernel holds of the routing layer (for
// `firewall status`).
func (f *Firewall) RouteLayer(ctx context.Context) (route.LayerState, error) {
	h, err := f.routeHandle()
	if err != nil {
		return route.LayerState{}, err
	}
	defer h.Close()
	return h.Layer(ctx)
}

// removeLayer is Teardown's: the layer goes with the kill switch.
func (f *Firewall) removeLayer(ctx context.Context) (Changes, error) {
	return f.syncLayer(ctx, Spec{})
}
