package route

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

func TestLayerSetIsDeclarative(t *testing.T) {
	ctx := context.Background()
	_, h := freshNS(t)
	spec := LayerSpec{
		LANIf:   "br-lan",
		LAN:     []netip.Prefix{netip.MustParsePrefix("198.18.1.0/24"), netip.MustParsePrefix("fd00:1::/64")},
		Private: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fe80::/10")},
		Bypass:  []netip.Addr{netip.MustParseAddr("198.18.1.11")},
	}
	ch, err := h.SetLayer(ctx, spec)
	if err != nil || len(ch) == 0 {
		t.Fatalf("first SetLayer = %v, %v; want changes", ch, err)
	}
	st, err := h.Layer(ctx)
	if err != nil || !st.Armed() || !st.Device || st.HoldRoute4 || st.HoldRoute6 {
		t.Fatalf("after SetLayer: %+v, %v (no WAN: armed, no hold routes)", st, err)
	}
	// v4: 3 marks + LAN + private + DHCP + bypass + hold + 2 stops + end = 11.
	if st.Rules4 != 11 || st.Rules6 != 10 {
		t.Fatalf("rules = %d/%d, want 11/10:\n%s", st.Rules4, st.Rules6, ipRule(t, h))
	}
	if ch, err := h.SetLayer(ctx, spec); err != nil || len(ch) != 0 {
		t.Fatalf("second SetLayer = %v, %v; want no changes", ch, err)
	}

	// A change of the spec changes only what differs.
	spec.Bypass = []netip.Addr{netip.MustParseAddr("198.18.1.12")}
	ch, err = h.SetLayer(ctx, spec)
	if err != nil || len(ch) != 2 {
		t.Fatalf("bypass change = %v, %v; want one rule added, one deleted", ch, err)
	}
	if out := ipRule(t, h); !strings.Contains(out, "from 198.18.1.12/32 iif br-lan goto 999") || strings.Contains(out, "198.18.1.11") {
		t.Fatalf("bypass rule not replaced:\n%s", out)
	}

	// Rules of others are left alone, also inside our block's neighbourhood;
	// the vendor's rule (no priority) lands ahead of the block.
	vendor := netlink.NewRule()
	vendor.Mark, vendor.Table, vendor.Family = MarkTunnel, TunnelTable, unix.AF_INET
	if err := h.h.RuleAdd(vendor); err != nil {
		t.Fatal(err)
	}
	tun, _ := h.Tunnel(ctx, IPv4)
	if len(tun.Rules) != 1 || tun.Rules[0].Priority >= LayerPriority {
		t.Fatalf("vendor's rule: %+v, want one tunnel rule ahead of the block", tun.Rules)
	}

	// Someone deletes a rule of ours (ip rule flush, a script): the next Set
	// puts it back.
	if err := h.h.RuleDel(&netlink.Rule{Priority: prioStop, Family: unix.AF_INET, Goto: -1, Flow: -1,
		SuppressIfgroup: -1, SuppressPrefixlen: -1}); err != nil {
		t.Fatal(err)
	}
	if st, _ := h.Layer(ctx); st.Armed() {
		t.Fatal("Armed with the blackhole rule gone")
	}
	if ch, err := h.SetLayer(ctx, spec); err != nil || len(ch) != 1 {
		t.Fatalf("repair = %v, %v; want the one rule re-added", ch, err)
	}

	ch, err = h.RemoveLayer(ctx)
	if err != nil || len(ch) == 0 {
		t.Fatalf("RemoveLayer = %v, %v", ch, err)
	}
	st, _ = h.Layer(ctx)
	if st.Rules4+st.Rules6 != 0 || st.Device {
		t.Fatalf("after RemoveLayer: %+v\n%s", st, ipRule(t, h))
	}
	if tun, _ := h.Tunnel(ctx, IPv4); len(tun.Rules) != 1 {
		t.Fatalf("RemoveLayer touched the vendor's rule: %+v", tun.Rules)
	}
	if ch, err := h.RemoveLayer(ctx); err != nil || len(ch) != 0 {
		t.Fatalf("second RemoveLayer = %v, %v; want nothing to do", ch, err)
	}
}

func TestLayerHoldRouteFollowsTheWAN(t *testing.T) {
	ctx := context.Background()
	_, h := freshNS(t)
	// A WAN: a bridge stands in for the uplink device.
	if err := h.h.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "wan"}}); err != nil {
		t.Fatal(err)
	}
	wan, _ := h.h.LinkByName("wan")
	if err := h.h.LinkSetUp(wan); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"198.18.2.2/24", "fd00:2::2/64"} {
		addr, _ := netlink.ParseAddr(a)
		addr.Flags = unix.IFA_F_NODAD
		if err := h.h.AddrAdd(wan, addr); err != nil {
			t.Fatal(err)
		}
	}
	for _, gw := range []string{"198.18.2.1", "fd00:2::1"} {
		ip := netip.MustParseAddr(gw)
		fam := IPv4
		if ip.Is6() {
			fam = IPv6
		}
		if err := h.h.RouteAdd(&netlink.Route{LinkIndex: wan.Attrs().Index, Dst: defaultDst(fam), Gw: ip.AsSlice(),
			Flags: int(netlink.FLAG_ONLINK)}); err != nil {
			t.Fatalf("default route via %s: %v", gw, err)
		}
	}
	src4, err4 := h.DefaultSource(ctx, IPv4)
	src6, err6 := h.DefaultSource(ctx, IPv6)
	if src4.String() != "198.18.2.2" || src6.String() != "fd00:2::2" || err4 != nil || err6 != nil {
		t.Fatalf("DefaultSource = %v %v, %v %v", src4, err4, src6, err6)
	}
	spec := LayerSpec{HoldSrc4: src4, HoldSrc6: src6}
	if _, err := h.SetLayer(ctx, spec); err != nil {
		t.Fatal(err)
	}
	st, _ := h.Layer(ctx)
	if !st.HoldRoute4 || !st.HoldRoute6 {
		t.Fatalf("hold routes missing: %+v", st)
	}
	// The router's own connection gets the hold device and the WAN's source.
	rs, err := h.h.RouteGet(netip.MustParseAddr("198.18.30.1").AsSlice())
	if err != nil || len(rs) != 1 || rs[0].Table != HoldTable || rs[0].Src.String() != "198.18.2.2" {
		t.Fatalf("route get = %+v, %v; want table %d with the WAN's source", rs, err, HoldTable)
	}
	// The WAN's address changes: the kernel drops the hold route with the
	// old source; Set gives it the new one.
	spec.HoldSrc4 = netip.MustParseAddr("198.18.2.3")
	addr, _ := netlink.ParseAddr("198.18.2.3/24")
	if err := h.h.AddrAdd(wan, addr); err != nil {
		t.Fatal(err)
	}
	if ch, err := h.SetLayer(ctx, spec); err != nil || len(ch) != 2 {
		t.Fatalf("new source = %v, %v; want the old hold route deleted and a new one set", ch, err)
	}
}

func ipRule(t *testing.T, h *Handle) string {
	t.Helper()
	var b strings.Builder
	for _, fam := range []Family{IPv4, IPv6} {
		rs, err := h.h.RuleList(int(fam))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			b.WriteString(ruleKey(&r) + "\n")
		}
	}
	return b.String()
}

// The block's order is what makes it safe to install and to change: the
// jump target exists before any permit jumps to it, and the rules that stop
// come after every permit, so a half-installed block never stops what a
// finished one would let through. No root needed.
func TestLayerRulesOrder(t *testing.T) {
	s := LayerSpec{
		LANIf:   "br-lan",
		LAN:     []netip.Prefix{netip.MustParsePrefix("192.168.1.0/24"), netip.MustParsePrefix("2001:db8:1::/64")},
		Private: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("fe80::/10")},
		Bypass:  []netip.Addr{netip.MustParseAddr("192.168.1.20"), netip.MustParseAddr("2001:db8:1::20")},
	}
	for _, fam := range []Family{IPv4, IPv6} {
		rules := layerRules(s, fam)
		if rules[0].r.Priority != prioLayerEnd {
			t.Fatalf("%s: first rule installed is %d, want the jump target %d", fam, rules[0].r.Priority, prioLayerEnd)
		}
		stopping := false
		dhcp := 0
		for _, lr := range rules[1:] {
			r := lr.r
			if !inLayer(r.Priority) || r.Family != int(fam) {
				t.Errorf("%s: rule %s outside the block or of the wrong family", fam, ruleKey(r))
			}
			if r.Dst != nil && (r.Dst.IP.To4() != nil) != (fam == IPv4) {
				t.Errorf("%s: rule %s for the other family", fam, ruleKey(r))
			}
			if r.Priority >= prioHold {
				stopping = true
				continue
			}
			if stopping {
				t.Errorf("%s: permit %s installed after a rule that stops", fam, ruleKey(r))
			}
			if r.Goto != prioLayerEnd {
				t.Errorf("%s: permit %s does not jump to the end", fam, ruleKey(r))
			}
			if r.Sport != nil {
				dhcp = int(r.Sport.Start)
			}
		}
		if want := map[Family]int{IPv4: 68, IPv6: 546}[fam]; dhcp != want {
			t.Errorf("%s: DHCP client port %d, want %d", fam, dhcp, want)
		}
		keys := map[string]bool{}
		for _, lr := range rules {
			k := ruleKey(lr.r)
			if keys[k] {
				t.Errorf("%s: two rules with the key %s: the diff could not tell them apart", fam, k)
			}
			keys[k] = true
		}
	}
	// A laptop (no LAN interface) has no bypass rules: a bypass device is a
	// LAN host.
	s.LANIf = ""
	for _, lr := range layerRules(s, IPv4) {
		if lr.r.Priority == prioBypass {
			t.Errorf("laptop got a bypass rule %s", ruleKey(lr.r))
		}
	}
}

// A WAN that goes down and comes back (ifdown/ifup, a PPPoE reconnect):
// netifd adds the default route again, and the kernel checks its gateway
// with a lookup bound to the WAN device. The layer must let that lookup
// through, or the router stays without a default route for good (measured
// in the OpenWrt box before the rule existed: "network is unreachable").
func TestLayerLetsTheWANDefaultRouteComeBack(t *testing.T) {
	ctx := context.Background()
	_, h := freshNS(t)
	if err := h.h.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "wan"}}); err != nil {
		t.Fatal(err)
	}
	wan, _ := h.h.LinkByName("wan")
	if err := h.h.LinkSetUp(wan); err != nil {
		t.Fatal(err)
	}
	addr, _ := netlink.ParseAddr("198.18.2.2/24")
	if err := h.h.AddrAdd(wan, addr); err != nil {
		t.Fatal(err)
	}
	gw := &netlink.Route{LinkIndex: wan.Attrs().Index, Dst: defaultDst(IPv4), Gw: netip.MustParseAddr("198.18.2.1").AsSlice()}
	if err := h.h.RouteAdd(gw); err != nil {
		t.Fatal(err)
	}
	devs, err := h.DefaultDevices(ctx, IPv4)
	if err != nil || len(devs) != 1 || devs[0] != "wan" {
		t.Fatalf("DefaultDevices = %v, %v", devs, err)
	}
	for _, c := range []struct {
		name string
		wan  []string
		ok   bool
	}{{"without the WAN rule (the control)", nil, false}, {"with it", devs, true}} {
		src, _ := h.DefaultSource(ctx, IPv4)
		if _, err := h.SetLayer(ctx, LayerSpec{HoldSrc4: src, WANDevices: c.wan}); err != nil {
			t.Fatal(err)
		}
		// The WAN goes down: its address and routes go, the hold route with them.
		if err := h.h.AddrDel(wan, addr); err != nil {
			t.Fatal(err)
		}
		if _, err := h.SetLayer(ctx, LayerSpec{WANDevices: c.wan}); err != nil {
			t.Fatal(err)
		}
		// It comes back: the address first, then netifd's default route.
		if err := h.h.AddrAdd(wan, addr); err != nil {
			t.Fatal(err)
		}
		err := h.h.RouteAdd(gw)
		if (err == nil) != c.ok {
			t.Fatalf("%s: adding the default route again: %v", c.name, err)
		}
		if err == nil {
			if err := h.h.RouteDel(gw); err != nil {
				t.Fatal(err)
			}
			if err := h.h.RouteAdd(gw); err != nil {
				t.Fatal(err)
			}
		} else if _, err := h.RemoveLayer(ctx); err == nil {
			// the control: without the layer the route goes in, so the test
			// stands on the layer and nothing else
			if err := h.h.RouteAdd(gw); err != nil {
				t.Fatalf("the control without any layer: %v", err)
			}
		}
	}
}
