package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strconv"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"surflare-watchdog/src/route"
)

// connKiller is watchdog.ConnKiller. After a node switch, LAN clients'
// connections can still be held by tproxy sockets of a proxy instance
// serving the node we left, pinned to upstream connections through it; a
// client would wait for its own timeout. Destroying those sockets
// (sock_diag SOCK_DESTROY) resets the clients at once and they reconnect
// through the new node. A tproxy-accepted socket is recognised by its local
// address — the client's original destination, not an address of the
// router — and it is cut unless the current proxy owns it (those are
// connections made through the new node).
//
// Limitation: when the vendor keeps one proxy process across the switch,
// its old and new sockets cannot be told apart from outside, so none are
// cut. (`surflare connect` restarts the proxy, which closes the old
// sockets itself.)
type connKiller struct {
	lanIf string
	procs nsProcs
	comm  string
	log   *slog.Logger
}

// socketInodes are the socket inodes pid holds.
func socketInodes(pid int) map[uint32]bool {
	out := map[uint32]bool{}
	if pid <= 0 {
		return out
	}
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		l, err := os.Readlink(dir + "/" + e.Name())
		if err != nil {
			continue
		}
		var ino uint32
		if _, err := fmt.Sscanf(l, "socket:[%d]", &ino); err == nil {
			out[ino] = true
		}
	}
	return out
}

func (k *connKiller) CutConnections(ctx context.Context, oldNode string) error {
	_, lan, err := lanGateway(k.lanIf, netip.Prefix{})
	if err != nil {
		return err
	}
	local, err := localAddrs()
	if err != nil {
		return err
	}
	h, err := route.Open(netns.None())
	if err != nil {
		return err
	}
	socks, err := h.TCPSockets(ctx)
	h.Close()
	if err != nil {
		return err
	}
	current := socketInodes(k.procs.First(k.comm))
	cut, failed := 0, 0
	var firstErr error
	for _, s := range socks {
		if !lan.Contains(s.Remote.Addr().Unmap()) || local[s.Local.Addr().Unmap()] || current[s.Inode] {
			continue
		}
		err := netlink.SocketDestroy(net.TCPAddrFromAddrPort(s.Local), net.TCPAddrFromAddrPort(s.Remote))
		if err != nil {
			failed++
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		cut++
	}
	if cut > 0 || failed > 0 {
		k.log.Info(fmt.Sprintf("Cut %d LAN connections pinned to %s", cut, oldNode), "failed", failed)
	}
	if failed > 0 {
		return fmt.Errorf("destroying %d of %d sockets: %w", failed, cut+failed, firstErr)
	}
	return nil
}

// localAddrs are the router's own addresses.
func localAddrs() (map[netip.Addr]bool, error) {
	as, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
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
