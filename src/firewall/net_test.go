package firewall

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// server is a TCP or UDP server inside a namespace that answers with its tag
// and remembers who talked to it (and, for tproxy listeners, the original
// destination, which is the accepted socket's local address).
type server struct {
	tag  string
	mu   sync.Mutex
	seen []conn
}

type conn struct{ local, remote string }

func (s *server) record(local, remote net.Addr) {
	s.mu.Lock()
	s.seen = append(s.seen, conn{local.String(), remote.String()})
	s.mu.Unlock()
}

func (s *server) conns() []conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]conn(nil), s.seen...)
}

func transparent(network, address string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		if len(network) > 3 && network[3] == '6' {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_IPV6, unix.IPV6_TRANSPARENT, 1)
		} else {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_TRANSPARENT, 1)
		}
	})
	if err != nil {
		return err
	}
	return serr
}

// serveTCP starts a TCP server in ns; transparent makes it a tproxy target.
func serveTCP(t testing.TB, ns *testNS, network, addr, tag string, transp bool) *server {
	t.Helper()
	s := &server{tag: tag}
	var ln net.Listener
	ns.run(func() {
		lc := net.ListenConfig{}
		if transp {
			lc.Control = transparent
		}
		var err error
		ln, err = lc.Listen(context.Background(), network, addr)
		if err != nil {
			t.Errorf("listen %s in %s: %v", addr, ns.name, err)
		}
	})
	if ln == nil {
		t.FailNow()
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.record(c.LocalAddr(), c.RemoteAddr())
			c.Write([]byte(tag))
			c.Close()
		}
	}()
	return s
}

// serveUDP starts a UDP server in ns answering tag+payload.
func serveUDP(t testing.TB, ns *testNS, network, addr, tag string, transp bool) *server {
	t.Helper()
	s := &server{tag: tag}
	var pc net.PacketConn
	ns.run(func() {
		lc := net.ListenConfig{}
		if transp {
			lc.Control = transparent
		}
		var err error
		pc, err = lc.ListenPacket(context.Background(), network, addr)
		if err != nil {
			t.Errorf("listen %s in %s: %v", addr, ns.name, err)
		}
	})
	if pc == nil {
		t.FailNow()
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			s.record(pc.LocalAddr(), from)
			if !transp { // a tproxy UDP socket cannot answer from the original address
				pc.WriteTo(append([]byte(tag+":"), buf[:n]...), from)
			}
		}
	}()
	return s
}

const dialTimeout = 700 * time.Millisecond

// dialTCP connects from ns (with an optional SO_MARK) and returns what the
// server said.
func dialTCP(ns *testNS, network, addr string, mark int) (string, error) {
	var reply string
	var derr error
	ns.run(func() {
		d := net.Dialer{Timeout: dialTimeout}
		if mark != 0 {
			d.Control = func(_, _ string, c syscall.RawConn) error {
				var serr error
				c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, mark) })
				return serr
			}
		}
		c, err := d.Dial(network, addr)
		if err != nil {
			derr = err
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(dialTimeout))
		b, err := io.ReadAll(c)
		reply = string(b)
		if err != nil {
			derr = err
		}
	})
	return reply, derr
}

// exchangeUDP sends payload from ns and waits briefly for an answer.
func exchangeUDP(ns *testNS, network, addr string, payload []byte) (string, error) {
	var reply string
	var rerr error
	ns.run(func() {
		c, err := net.Dial(network, addr)
		if err != nil {
			rerr = err
			return
		}
		defer c.Close()
		if _, err := c.Write(payload); err != nil {
			rerr = err
			return
		}
		c.SetReadDeadline(time.Now().Add(dialTimeout))
		buf := make([]byte, 1500)
		n, err := c.Read(buf)
		if err != nil {
			rerr = err
			return
		}
		reply = string(buf[:n])
	})
	return reply, rerr
}

func isRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }
func isEPERM(err error) bool   { return errors.Is(err, syscall.EPERM) }
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// eventually polls cond for up to d.
func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cond()
}
