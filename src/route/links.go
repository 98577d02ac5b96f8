package route

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// ErrNoDefaultRoute means the main table has no default route: the WAN is
// down, or this host has no uplink at all.
var ErrNoDefaultRoute = errors.New("no default route")

// WANDevice returns the device of the main table's IPv4 default route (the
// one with the lowest metric), e.g. "pppoe-wan" or "eth1". The firewall needs
// it for nothing but diagnostics and for the laptop role, where there is no
// br-lan to tell LAN from WAN.
func (h *Handle) WANDevice(ctx context.Context) (string, error) {
	routes, err := h.h.RouteListFiltered(unix.AF_INET, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return "", fmt.Errorf("listing main routes: %w", err)
	}
	best, bestPrio := -1, 0
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
		if best < 0 || r.Priority < bestPrio {
			best, bestPrio = idx, r.Priority
		}
	}
	if best < 0 {
		return "", ErrNoDefaultRoute
	}
	l, err := h.h.LinkByIndex(best)
	if err != nil {
		return "", fmt.Errorf("finding link %d of the default route: %w", best, err)
	}
	return l.Attrs().Name, nil
}

// Neighbour is one resolved entry of the neighbour (ARP/NDP) table.
type Neighbour struct {
	Dev string
	IP  netip.Addr
	MAC net.HardwareAddr
}

// Neighbours lists reachable, stale or permanent neighbours on dev (all
// devices when dev is ""). Bypass devices configured by MAC are mapped to
// their current addresses this way when /tmp/dhcp.leases does not know them.
func (h *Handle) Neighbours(ctx context.Context, dev string) ([]Neighbour, error) {
	idx := 0
	names := map[int]string{}
	if dev != "" {
		l, err := h.h.LinkByName(dev)
		if err != nil {
			return nil, fmt.Errorf("finding %s: %w", dev, err)
		}
		idx = l.Attrs().Index
		names[idx] = dev
	}
	var out []Neighbour
	for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
		ns, err := h.h.NeighList(idx, fam)
		if err != nil {
			return nil, fmt.Errorf("listing neighbours: %w", err)
		}
		for _, n := range ns {
			if n.State&(netlink.NUD_INCOMPLETE|netlink.NUD_FAILED|netlink.NUD_NOARP) != 0 || len(n.HardwareAddr) != 6 {
				continue
			}
			ip, ok := netip.AddrFromSlice(n.IP)
			if !ok {
				continue
			}
			name, ok := names[n.LinkIndex]
			if !ok {
				if l, err := h.h.LinkByIndex(n.LinkIndex); err == nil {
					name = l.Attrs().Name
				}
				names[n.LinkIndex] = name
			}
			out = append(out, Neighbour{Dev: name, IP: ip.Unmap(), MAC: n.HardwareAddr})
		}
	}
	return out, nil
}
