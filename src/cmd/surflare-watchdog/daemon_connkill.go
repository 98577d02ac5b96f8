package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"surflare-watchdog/src/route"
)

// connKiller is watchdog.ConnKiller. After a node switch the LAN clients'
// connections are still held by the proxy's tproxy sockets, pinned to
// upstream connections through the node we left; a client would wait for
// its own timeout. Destroying those sockets (sock_diag SOCK_DESTROY) resets
// the clients at once and they reconnect through the new node. A
// tproxy-accepted socket is recognised by its local address: the client's
// original destination, which is not an address of the router.
type connKiller struct {
	lanIf string
	log   *slog.Logger
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
	cut, failed := 0, 0
	var firstErr error
	for _, s := range socks {
		if !lan.Contains(s.Remote.Addr().Unmap()) || local[s.Local.Addr().Unmap()] {
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
