package loopguard

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// SocketKiller is the real Killer: sock_diag SOCK_DESTROY (as the daemon's
// ConnKiller uses after a node switch) through an inet_diag netlink socket
// opened in one network namespace. The owner of a destroyed socket sees
// ECONNABORTED and closes it, so its descriptor comes back at once.
type SocketKiller struct{ h *netlink.Handle }

// NewSocketKiller opens the netlink socket in ns (netns.None() or 0 = ours).
// NETLINK_INET_DIAG is asked for explicitly (DESIGN §9).
func NewSocketKiller(ns netns.NsHandle) (*SocketKiller, error) {
	if ns == 0 {
		ns = netns.None()
	}
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_INET_DIAG)
	if err != nil {
		return nil, fmt.Errorf("opening sock_diag for SOCK_DESTROY: %w", err)
	}
	return &SocketKiller{h: h}, nil
}

// Kill destroys the IPv4 TCP socket local -> remote; one that is gone
// already is not an error.
func (k *SocketKiller) Kill(local, remote netip.AddrPort) error {
	err := k.h.SocketDestroy(net.TCPAddrFromAddrPort(local), net.TCPAddrFromAddrPort(remote))
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("destroying %s -> %s: %w", local, remote, err)
	}
	return nil
}

// Close releases the netlink socket.
func (k *SocketKiller) Close() { k.h.Close() }
