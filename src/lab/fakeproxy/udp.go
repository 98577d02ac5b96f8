package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"surflare-watchdog/src/lab/fakes"
)

// UDP capture (knob udp, E8): the vendor table tproxies marked UDP to
// 127.0.0.1:10800 as it does TCP. Each client (source) and original
// destination pair is one association: its datagrams go direct (mark 0xff)
// or through the tunnel (framed, see fakes.UDPPrefix), and the answers are
// sent back from the original destination's address through a transparent
// socket bound to it.

// udpIdle ends an association nobody uses.
const udpIdle = 30 * time.Second

// transparentControl sets IP_TRANSPARENT (and SO_REUSEADDR, so several
// associations can answer from the same destination address).
func transparentControl(extra ...int) func(network, address string, rc syscall.RawConn) error {
	return func(network, address string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			opts := append([]int{unix.IP_TRANSPARENT}, extra...)
			for _, o := range opts {
				if serr == nil {
					serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, o, 1)
				}
			}
			if serr == nil {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
			}
		})
		return errors.Join(err, serr)
	}
}

// listenUDP opens the UDP tproxy socket, asking for each datagram's
// original destination (IP_RECVORIGDSTADDR).
func (p *proxy) listenUDP(addr string) (*net.UDPConn, error) {
	lc := net.ListenConfig{Control: transparentControl(unix.IP_RECVORIGDSTADDR)}
	pc, err := lc.ListenPacket(context.Background(), "udp4", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on udp %s: %w", addr, err)
	}
	return pc.(*net.UDPConn), nil
}

type udpKey struct{ src, dst netip.AddrPort }

// serveUDP reads captured datagrams until ctx ends.
func (p *proxy) serveUDP(ctx context.Context, uc *net.UDPConn) {
	context.AfterFunc(ctx, func() { uc.Close() })
	var mu sync.Mutex
	assoc := map[udpKey]func([]byte){}
	buf := make([]byte, fakes.MaxDatagram)
	oob := make([]byte, 256)
	for {
		n, oobn, _, src, err := uc.ReadMsgUDPAddrPort(buf, oob)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		dst, ok := origDstUDP(oob[:oobn])
		if !ok {
			continue
		}
		k := udpKey{addrPortUnmap(src), dst}
		b := append([]byte(nil), buf[:n]...)
		mu.Lock()
		send, ok := assoc[k]
		if !ok {
			send = p.newAssociation(ctx, k, func() { mu.Lock(); delete(assoc, k); mu.Unlock() })
			if send != nil {
				assoc[k] = send
			}
		}
		mu.Unlock()
		if send != nil {
			send(b)
		}
	}
}

func addrPortUnmap(a netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
}

// origDstUDP finds IP_ORIGDSTADDR in a datagram's control messages.
func origDstUDP(oob []byte) (netip.AddrPort, bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return netip.AddrPort{}, false
	}
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_IP && m.Header.Type == unix.IP_ORIGDSTADDR && len(m.Data) >= 8 {
			// struct sockaddr_in: family (2), port (2, network order), addr (4).
			port := binary.BigEndian.Uint16(m.Data[2:4])
			return netip.AddrPortFrom(netip.AddrFrom4([4]byte(m.Data[4:8])), port), true
		}
	}
	return netip.AddrPort{}, false
}

// newAssociation sets up one association and returns how to send a
// datagram on it (nil when it could not be set up; the datagram is then
// dropped, as a proxy that cannot reach the destination does). done runs
// when it ends.
func (p *proxy) newAssociation(ctx context.Context, k udpKey, done func()) func([]byte) {
	start := time.Now()
	// Answers leave from the original destination, as if it had answered.
	d := net.Dialer{LocalAddr: net.UDPAddrFromAddrPort(k.dst), Control: transparentControl()}
	reply, err := d.DialContext(ctx, "udp4", k.src.String())
	if err != nil {
		p.log.Error(0, 0, "inbound/tproxy[tproxy-in]: udp reply socket: "+err.Error())
		return nil
	}
	f := p.faults.Current()
	route := "direct"
	var send func([]byte)
	var recv func() ([]byte, error)
	var up net.Conn
	if p.goesDirect(f, "", k.dst.Addr(), k.dst.Port() == 53) {
		dl := p.dialer(f)
		up, err = dl.DialContext(ctx, "udp4", k.dst.String())
		if err == nil {
			send = func(b []byte) { up.Write(b) }
			buf := make([]byte, fakes.MaxDatagram)
			recv = func() ([]byte, error) { n, err := up.Read(buf); return buf[:n], err }
		}
	} else {
		route = p.node + " via " + p.transit
		up, err = p.openTunnel(ctx, f, p.node, p.transit, fakes.UDPPrefix+k.dst.String())
		if err == nil {
			var wmu sync.Mutex
			send = func(b []byte) { wmu.Lock(); fakes.WriteDatagram(up, b); wmu.Unlock() }
			recv = func() ([]byte, error) { return fakes.ReadDatagram(up) }
		}
	}
	if err != nil {
		reply.Close()
		p.logFailed(start, k.src, k.dst, route, err)
		return nil
	}
	go func() {
		defer done()
		defer reply.Close()
		defer up.Close()
		stop := context.AfterFunc(ctx, func() { up.Close() })
		defer stop()
		for {
			up.SetReadDeadline(time.Now().Add(udpIdle))
			b, err := recv()
			if err != nil {
				return
			}
			reply.Write(b)
		}
	}()
	return send
}
