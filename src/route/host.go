package route

import (
	"context"
	"errors"

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
