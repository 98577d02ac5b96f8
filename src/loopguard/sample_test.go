package loopguard

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"surflare-watchdog/src/detectors/detect"
	"surflare-watchdog/src/route"
)

// A real sample in a fresh namespace: 40 connections to one destination and
// 5 to others, all held by this process (standing in for the proxy). The
// sock_diag sampler attributes both halves of each connection to the same
// destination, so the guard sees a loop and blocks exactly that addr:port.
func TestGuardOnRealSample(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a network namespace")
	}
	name := fmt.Sprintf("swloop-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	if out, err := exec.Command("ip", "-n", name, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("lo up: %v: %s", err, out)
	}
	ns, err := netns.GetFromName(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })

	var closers []interface{ Close() error }
	var mu sync.Mutex
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range closers {
			c.Close()
		}
	})
	dial := func(addr string, n int) {
		runtime.LockOSThread()
		orig, _ := netns.Get()
		defer orig.Close()
		if err := netns.Set(ns); err != nil {
			runtime.UnlockOSThread()
			t.Fatal(err)
		}
		ln, lerr := net.Listen("tcp", addr)
		var conns []net.Conn
		for i := 0; lerr == nil && i < n; i++ {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				lerr = err
				break
			}
			conns = append(conns, c)
		}
		if err := netns.Set(orig); err != nil {
			t.Fatalf("back to our namespace: %v", err) // the thread stays locked and is discarded
		}
		runtime.UnlockOSThread()
		if lerr != nil {
			t.Fatal(lerr)
		}
		mu.Lock()
		closers = append(closers, ln)
		for _, c := range conns {
			closers = append(closers, c)
		}
		mu.Unlock()
		go func() { // accept so both halves exist; closed with the listener
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				closers = append(closers, c)
				mu.Unlock()
			}
		}()
	}
	dial("127.0.0.1:18443", 40)
	for i := range 5 {
		dial(fmt.Sprintf("127.0.0.%d:18080", i+2), 1)
	}
	time.Sleep(100 * time.Millisecond) // let the accepts happen

	s, err := detect.NewProxySampler(detect.SamplerOptions{NS: ns, PIDs: func() ([]int, error) { return []int{os.Getpid()}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conns, err := s.Sample(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	b := &fakeBlocker{}
	k, err := route.NewSocketKiller(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	g, err := New(Options{MinActive: 50, Blocker: b, Killer: k})
	if err != nil {
		t.Fatal(err)
	}
	g.Observe(context.Background(), conns)
	want := netip.MustParseAddrPort("127.0.0.1:18443")
	if len(b.calls) != 1 || b.calls[0].dst != want {
		t.Fatalf("calls %v for %d sockets (state %+v), want one block of %v", b.calls, len(conns), g.State(), want)
	}
	if st := g.State(); st.InFlight != 90 || st.Top != 80 {
		t.Errorf("in-flight %d top %d, want 90 and 80 (both halves of 45 and 40 connections)", st.InFlight, st.Top)
	}
	// The circuit cut both halves of the 40 looped connections for real
	// (SOCK_DESTROY): the kernel no longer lists them; the 5 others stay.
	if st := g.State(); st.Cut != 80 {
		t.Errorf("cut %d sockets, want 80", st.Cut)
	}
	after, err := s.Sample(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	left := 0
	for _, c := range after {
		if c.InFlight() {
			left++
			if c.Dst() == want {
				t.Errorf("looped socket survived: %+v", c)
			}
		}
	}
	if left != 10 {
		t.Errorf("%d sockets in flight after the cut, want the 10 of the other connections", left)
	}
}
