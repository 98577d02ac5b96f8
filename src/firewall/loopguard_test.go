package firewall

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"surflare-watchdog/src/loopguard/nflog"
)

// A blocked addr . port refuses the router's new connections to it at
// once, even over lo (where a looping proxy's packets go); other
// destinations and the same address on another port are untouched; Apply
// keeps the element; Unblock lifts it.
func TestLoopGuardBlocksOneDestination(t *testing.T) {
	ctx := context.Background()
	ns := newNS(t, "lg")
	fw := newFW(ns)
	if _, err := fw.Apply(ctx, labSpec()); err != nil {
		t.Fatal(err)
	}
	var lns []net.Listener
	ns.run(func() {
		for _, a := range []string{"127.0.0.1:7001", "127.0.0.1:7002"} {
			ln, err := net.Listen("tcp4", a)
			if err != nil {
				t.Errorf("listen %s: %v", a, err)
				return
			}
			lns = append(lns, ln)
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					c.Close()
				}
			}()
		}
	})
	t.Cleanup(func() {
		for _, ln := range lns {
			ln.Close()
		}
	})
	dial := func(addr string) error {
		var err error
		ns.run(func() {
			var c net.Conn
			c, err = (&net.Dialer{Timeout: 2 * time.Second}).Dial("tcp4", addr)
			if err == nil {
				c.Close()
			}
		})
		return err
	}
	blocked := netip.MustParseAddrPort("127.0.0.1:7001")
	if err := dial("127.0.0.1:7001"); err != nil {
		t.Fatalf("before blocking: %v", err)
	}
	if err := fw.Block(ctx, blocked, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	// Twice: the second call refreshes (here: with a longer timeout), it
	// does not fail.
	if err := fw.Block(ctx, blocked, 10*time.Minute); err != nil {
		t.Fatalf("refreshing: %v", err)
	}
	if out := ns.nft("list", "set", "inet", TableKillSwitch, SetLoopGuard); !strings.Contains(out, "127.0.0.1 . 7001 timeout 10m expires 9m") {
		t.Errorf("the refreshed element does not carry the new timeout:\n%s", out)
	}
	if err := dial("127.0.0.1:7001"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("blocked destination: err = %v, want connection refused (a reset)", err)
	}
	if err := dial("127.0.0.1:7002"); err != nil {
		t.Errorf("another port of the same address: %v", err)
	}
	// The proxy's own (0xff) sockets are exempt: they are never the loop.
	var markedErr error
	ns.run(func() {
		d := &net.Dialer{Timeout: 2 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			if err := rc.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_MARK, int(MarkDirect))
			}); err != nil {
				return err
			}
			return serr
		}}
		var c net.Conn
		if c, markedErr = d.Dial("tcp4", "127.0.0.1:7001"); markedErr == nil {
			c.Close()
		}
	})
	if markedErr != nil {
		t.Errorf("a 0xff-marked connection to the blocked destination: %v, want it through", markedErr)
	}
	if out := ns.nft("list", "set", "inet", TableKillSwitch, SetLoopGuard); !strings.Contains(out, "127.0.0.1 . 7001") {
		t.Errorf("nft does not show the element:\n%s", out)
	}
	if ch, err := fw.Apply(ctx, labSpec()); err != nil || !ch.Empty() {
		t.Errorf("re-apply: %v %v (it must leave the loop guard's elements alone)", ch, err)
	}
	got, err := fw.LoopGuardBlocked(ctx)
	if err != nil || len(got) != 1 || got[0] != blocked {
		t.Errorf("LoopGuardBlocked = %v, %v", got, err)
	}
	if err := fw.Unblock(ctx, blocked); err != nil {
		t.Fatal(err)
	}
	if err := fw.Unblock(ctx, blocked); err != nil {
		t.Errorf("unblocking twice: %v", err)
	}
	if err := dial("127.0.0.1:7001"); err != nil {
		t.Errorf("after Unblock: %v", err)
	}
	if err := fw.Block(ctx, netip.MustParseAddrPort("[fd00::1]:443"), time.Second); err == nil {
		t.Error("an IPv6 destination was accepted")
	}
}

// The wake-up rule: the router's own new tunnel connections (mark 0x1)
// are let through untouched, and only those over the token bucket (burst
// gate/4, rate gate per second) reach the NFLOG group; unmarked and 0xff
// connections never do. With the guard off there is no rule.
func TestLoopGuardEventsOnlyForAFloodOfTunnelConnections(t *testing.T) {
	ctx := context.Background()
	ns := newNS(t, "lgev")
	s := labSpec()
	const gate = 40 // burst 10
	s.LoopGuardGate = gate
	if _, err := newFW(ns).Apply(ctx, s); err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	var sub *nflog.Sub
	var err error
	ns.run(func() {
		if ln, err = net.Listen("tcp4", "127.0.0.1:7003"); err != nil {
			return
		}
		sub, err = nflog.Subscribe(ctx, LoopGuardLogGroup)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close(); sub.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	dial := func(n int, mark int) (failed int) {
		ns.run(func() {
			d := &net.Dialer{Timeout: 2 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
				if mark == 0 {
					return nil
				}
				return rc.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_MARK, mark) })
			}}
			for range n {
				c, err := d.Dial("tcp4", "127.0.0.1:7003")
				if err != nil {
					failed++
					continue
				}
				c.Close()
			}
		})
		return failed
	}
	settle := func() { time.Sleep(50 * time.Millisecond) } // let the reader drain the socket
	failed := dial(3*gate, 0) + dial(3*gate, int(MarkDirect))
	settle()
	if n := sub.Events(); n != 0 || failed != 0 {
		t.Fatalf("unmarked and 0xff connections: %d events, %d failed; want 0, 0", n, failed)
	}
	failed = dial(gate/4-2, int(MarkTunnel)) // within the burst
	settle()
	if n := sub.Events(); n != 0 || failed != 0 {
		t.Fatalf("%d tunnel connections (burst %d): %d events, %d failed; want 0, 0", gate/4-2, gate/4, n, failed)
	}
	failed = dial(2*gate, int(MarkTunnel)) // a flood: far over the bucket
	settle()
	if n := sub.Events(); n < uint64(gate) || failed != 0 {
		t.Fatalf("a flood of %d tunnel connections: %d events, %d failed; want >= %d events and every connection through", 2*gate, n, failed, gate)
	}
	t.Logf("flood of %d: %d events", 2*gate, sub.Events())

	s.LoopGuardGate = -1
	if _, err := newFW(ns).Apply(ctx, s); err != nil {
		t.Fatal(err)
	}
	if out := ns.nft("list", "chain", "inet", TableKillSwitch, "output"); strings.Contains(out, fmt.Sprintf("log group %d", LoopGuardLogGroup)) {
		t.Errorf("guard off, the wake-up rule is still there:\n%s", out)
	}
}
