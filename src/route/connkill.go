package route

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// ConnKiller is watchdog.ConnKiller. After a node switch, LAN clients'
// connections can still be held by tproxy sockets of a proxy instance
// serving the node we left, pinned to upstream connections through it; a
// client would wait for its own timeout. Destroying those sockets
// (SOCK_DESTROY, in one batch through SocketKiller) resets the clients at
// once and they reconnect through the new node. A tproxy-accepted socket is
// recognised by its local address — the client's original destination, not
// an address of the router — and it is cut unless Keep names its inode
// (the current proxy's sockets: connections made through the new node).
//
// Limitation: when the vendor keeps one proxy process across the switch,
// its old and new sockets cannot be told apart from outside, so none are
// cut. (`surflare connect` restarts the proxy, which closes the old
// sockets itself.)
type ConnKiller struct {
	// NS is the router's namespace; netns.None() (or 0) is the caller's.
	NS netns.NsHandle
	// LANIf is the LAN interface; its IPv4 subnet says who is a LAN client.
	LANIf string
	// Keep lists the socket inodes not to cut; nil keeps none.
	Keep func() map[uint32]bool
	Log  *slog.Logger
}

// CutConnections destroys the LAN clients' tproxy sockets that the current
// proxy does not own; oldNode only names them in the log.
func (k *ConnKiller) CutConnections(ctx context.Context, oldNode string) error {
	ns := k.NS
	if ns == 0 {
		ns = netns.None()
	}
	h, err := Open(ns)
	if err != nil {
		return err
	}
	_, lan, err := lanGatewayOn(h.h, k.LANIf, netip.Prefix{})
	if err != nil {
		h.Close()
		return err
	}
	local, err := h.LocalAddrs()
	if err != nil {
		h.Close()
		return err
	}
	socks, err := h.TCPSockets(ctx)
	h.Close()
	if err != nil {
		return err
	}
	keep := map[uint32]bool{}
	if k.Keep != nil {
		keep = k.Keep()
	}
	var victims [][2]netip.AddrPort
	for _, s := range socks {
		if !lan.Contains(s.Remote.Addr().Unmap()) || local[s.Local.Addr().Unmap()] || keep[s.Inode] {
			continue
		}
		victims = append(victims, [2]netip.AddrPort{s.Local, s.Remote})
	}
	if len(victims) == 0 {
		return nil
	}
	sk, err := NewSocketKiller(ns)
	if err != nil {
		return err
	}
	defer sk.Close()
	cut, err := sk.KillAll(victims)
	failed := len(victims) - cut
	if k.Log != nil {
		k.Log.Info(fmt.Sprintf("Cut %d LAN connections pinned to %s", cut, oldNode), "failed", failed)
	}
	if err != nil {
		return fmt.Errorf("destroying %d of %d sockets: %w", failed, len(victims), err)
	}
	return nil
}

// LocalAddrs are the addresses of every interface in h's namespace.
func (h *Handle) LocalAddrs() (map[netip.Addr]bool, error) {
	return localAddrsOn(h.h)
}

// LocalAddrs are the caller's namespace's own addresses.
func LocalAddrs() (map[netip.Addr]bool, error) {
	return localAddrsOn(&netlink.Handle{})
}

func localAddrsOn(nh *netlink.Handle) (map[netip.Addr]bool, error) {
	as, err := nh.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("listing addresses: %w", err)
	}
	out := map[netip.Addr]bool{}
	for _, a := range as {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			out[ip.Unmap()] = true
		}
	}
	return out, nil
}
