package route

import (
	"context"
	"errors"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// The functions here work on the caller's own namespace and open a Handle
// for one call: the daemon's and the CLI's occasional questions, where
// keeping a netlink socket open between them would buy nothing.

// HostNeighbours is Neighbours on every device of the caller's namespace;
// nil when netlink cannot be opened (bypass resolution then falls back to
// the DHCP leases alone).
func HostNeighbours(ctx context.Context) []Neighbour {
	h, err := Open(netns.None())
	if err != nil {
		return nil
	}
	defer h.Close()
	n, _ := h.Neighbours(ctx, "")
	return n
}

// ClearTunnel deletes every fwmark 0x1 rule (the vendor's and ours,
// duplicates included) and table 100's local route, in both families: what
// a killed or half-disconnected vendor leaves behind.
func ClearTunnel(ctx context.Context) error {
	return eachFamily(func(h *Handle, fam Family) error {
		_, err := h.RemoveTunnel(ctx, fam, true)
		return err
	})
}

// DedupeTunnel removes duplicated fwmark rules in both families (a
// half-up disconnect adds one more copy every time).
func DedupeTunnel(ctx context.Context) error {
	return eachFamily(func(h *Handle, fam Family) error {
		_, err := h.Dedupe(ctx, fam)
		return err
	})
}

// eachFamily runs fn for IPv4 and IPv6 on one Handle of the caller's
// namespace; a failure in one family does not skip the other.
func eachFamily(fn func(h *Handle, fam Family) error) error {
	h, err := Open(netns.None())
	if err != nil {
		return err
	}
	defer h.Close()
	var errs []error
	for _, fam := range []Family{IPv4, IPv6} {
		if err := fn(h, fam); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// TunnelRuleExists reports whether an IPv4 fwmark 0x1 rule is there (the
// vendor's or ours): without it marked traffic never reaches the proxy
// (health layer 1).
func TunnelRuleExists(ctx context.Context) (bool, error) {
	h, err := Open(netns.None())
	if err != nil {
		return false, err
	}
	defer h.Close()
	st, err := h.Tunnel(ctx, IPv4)
	return len(st.Rules) > 0, err
}

// HostWANDevice is WANDevice in the caller's namespace; "" when there is
// no default route (or netlink cannot be opened).
func HostWANDevice(ctx context.Context) string {
	h, err := Open(netns.None())
	if err != nil {
		return ""
	}
	defer h.Close()
	dev, _ := h.WANDevice(ctx)
	return dev
}

// DeviceAddr is dev's first global IPv4 address in the caller's namespace;
// the zero Addr when it has none.
func DeviceAddr(dev string) netip.Addr {
	l, err := netlink.LinkByName(dev)
	if err != nil {
		return netip.Addr{}
	}
	addrs, _ := netlink.AddrList(l, netlink.FAMILY_V4)
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP.To4()); ok && ip.IsGlobalUnicast() {
			return ip
		}
	}
	return netip.Addr{}
}

// HostTCPSockets is TCPSockets in the caller's namespace.
func HostTCPSockets(ctx context.Context) ([]Socket, error) {
	h, err := Open(netns.None())
	if err != nil {
		return nil, err
	}
	defer h.Close()
	return h.TCPSockets(ctx)
}
