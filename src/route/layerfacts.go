package route

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// DefaultSource is the source address the main table's default route gives
// the router's own traffic of fam: the route's preferred source, else the
// first global address of its device. It is the source held connections
// get (LayerSpec.HoldSrc4/6), so that once released they leave the WAN with
// the address they would have had without the layer. The zero Addr (and no
// error) when there is no default route or the device has no address.
func (h *Handle) DefaultSource(ctx context.Context, fam Family) (netip.Addr, error) {
	routes, err := h.h.RouteListFiltered(int(fam), &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
	if unsupported(err) {
		return netip.Addr{}, nil
	}
	if err != nil {
		return netip.Addr{}, fmt.Errorf("listing %s main routes: %w", fam, err)
	}
	var best *netlink.Route
	for i := range routes {
		r := &routes[i]
		if !isDefault(r.Dst) || r.Type != unix.RTN_UNICAST {
			continue
		}
		if r.LinkIndex == 0 && len(r.MultiPath) > 0 {
			r.LinkIndex = r.MultiPath[0].LinkIndex
		}
		if r.LinkIndex != 0 && (best == nil || r.Priority < best.Priority) {
			best = r
		}
	}
	if best == nil {
		return netip.Addr{}, nil
	}
	if a, ok := netip.AddrFromSlice(best.Src); ok && a.IsValid() && !a.IsUnspecified() {
		return a.Unmap(), nil
	}
	link, err := h.h.LinkByIndex(best.LinkIndex)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("finding link %d of the %s default route: %w", best.LinkIndex, fam, err)
	}
	addrs, err := h.globalAddrs(link, fam)
	if err != nil || len(addrs) == 0 {
		return netip.Addr{}, err
	}
	return addrs[0].Addr(), nil
}

// DefaultDevices names the devices the main table's default routes of fam
// leave by.
func (h *Handle) DefaultDevices(ctx context.Context, fam Family) ([]string, error) {
	routes, err := h.h.RouteListFiltered(int(fam), &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
	if unsupported(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing %s main routes: %w", fam, err)
	}
	var out []string
	for _, r := range routes {
		if !isDefault(r.Dst) || r.Type != unix.RTN_UNICAST {
			continue
		}
		idx := r.LinkIndex
		if idx == 0 && len(r.MultiPath) > 0 {
			idx = r.MultiPath[0].LinkIndex
		}
		if idx == 0 {
			continue
		}
		if l, err := h.h.LinkByIndex(idx); err == nil {
			out = append(out, l.Attrs().Name)
		}
	}
	return out, nil
}

// Prefixes lists the global prefixes of dev's addresses, both families
// (link-local ones excluded): the LAN's prefixes for LayerSpec.LAN.
func (h *Handle) Prefixes(ctx context.Context, dev string) ([]netip.Prefix, error) {
	link, err := h.h.LinkByName(dev)
	if err != nil {
		return nil, fmt.Errorf("finding %s: %w", dev, err)
	}
	var out []netip.Prefix
	for _, fam := range []Family{IPv4, IPv6} {
		ps, err := h.globalAddrs(link, fam)
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			out = append(out, p.Masked())
		}
	}
	return out, nil
}

// globalAddrs are link's usable addresses of fam with their prefix length,
// primary before secondary, as the kernel lists them.
func (h *Handle) globalAddrs(link netlink.Link, fam Family) ([]netip.Prefix, error) {
	as, err := h.h.AddrList(link, int(fam))
	if unsupported(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing %s addresses of %s: %w", fam, link.Attrs().Name, err)
	}
	var out []netip.Prefix
	for _, a := range as {
		if a.Scope != unix.RT_SCOPE_UNIVERSE || a.Flags&(unix.IFA_F_TENTATIVE|unix.IFA_F_DADFAILED|unix.IFA_F_DEPRECATED|unix.IFA_F_SECONDARY) != 0 {
			continue
		}
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok {
			continue
		}
		ones, _ := a.Mask.Size()
		out = append(out, netip.PrefixFrom(ip.Unmap(), ones))
	}
	return out, nil
}
