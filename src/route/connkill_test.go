package route

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
)

// sockInode is the inode of c's socket, as sock_diag reports it.
func sockInode(t *testing.T, c net.Conn) uint32 {
	t.Helper()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var ino uint32
	rc.Control(func(fd uintptr) {
		l, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
		if err == nil {
			fmt.Sscanf(l, "socket:[%d]", &ino)
		}
	})
	if ino == 0 {
		t.Fatal("no socket inode")
	}
	return ino
}

// After a node switch the killer resets the LAN clients' connections that
// a proxy no longer current holds, and leaves the current proxy's alone.
// A tproxy-accepted socket is one whose local address is not the router's
// and whose peer is on the LAN: here two connections between two LAN
// addresses that are then removed from the namespace give exactly that
// (established sockets outlive their addresses).
func TestConnKillerCutsOnlyTheOldProxysLANSockets(t *testing.T) {
	ns, h := freshNS(t)
	lan := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "lan0"}} // no dummy module on this kernel
	if err := h.h.LinkAdd(lan); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"10.78.0.1/24", "10.78.0.2/24", "10.78.0.50/24"} {
		addr, _ := netlink.ParseAddr(a)
		if err := h.h.AddrAdd(lan, addr); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.h.LinkSetUp(lan); err != nil {
		t.Fatal(err)
	}

	type pair struct{ client, server net.Conn }
	var old, current pair
	inNS(t, ns, func() {
		ln, err := net.Listen("tcp4", "10.78.0.50:0")
		if err != nil {
			t.Error(err)
			return
		}
		defer ln.Close()
		dial := func() pair {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("10.78.0.2")}}
			c, err := d.Dial("tcp4", ln.Addr().String())
			if err != nil {
				t.Error(err)
				return pair{}
			}
			s, err := ln.Accept()
			if err != nil {
				t.Error(err)
			}
			return pair{c, s}
		}
		old, current = dial(), dial()
	})
	if t.Failed() {
		t.FailNow()
	}
	for _, c := range []net.Conn{old.client, old.server, current.client, current.server} {
		defer c.Close()
	}
	for _, a := range []string{"10.78.0.2/24", "10.78.0.50/24"} {
		addr, _ := netlink.ParseAddr(a)
		if err := h.h.AddrDel(lan, addr); err != nil {
			t.Fatal(err)
		}
	}

	keep := map[uint32]bool{sockInode(t, current.client): true, sockInode(t, current.server): true}
	k := &ConnKiller{NS: ns, LANIf: "lan0", Keep: func() map[uint32]bool { return keep }}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := k.CutConnections(ctx, "Dallas"); err != nil {
		t.Fatal(err)
	}

	buf := make([]byte, 1)
	for name, c := range map[string]net.Conn{"old client": old.client, "old server": old.server} {
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Read(buf); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("%s: read = %v; want the connection reset at once", name, err)
		}
	}
	for name, c := range map[string]net.Conn{"current client": current.client, "current server": current.server} {
		c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("%s: read = %v; the current proxy's connection must stay open", name, err)
		}
	}

	// Nothing left to cut: no error, nothing destroyed.
	if err := k.CutConnections(ctx, "Dallas"); err != nil {
		t.Errorf("second cut: %v", err)
	}
}
