package firewall

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"
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
	// Twice: the second call refreshes, it does not fail.
	if err := fw.Block(ctx, blocked, 30*time.Second); err != nil {
		t.Fatalf("refreshing: %v", err)
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
