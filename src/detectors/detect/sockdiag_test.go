package detect

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netns"
)

// serverPort is outside the ephemeral range, as a tproxy'd destination port
// would be.
const serverPort = 18080

// labNS makes a fresh named network namespace with lo up, removed when the
// test ends (also on failure).
func labNS(t *testing.T) (string, netns.NsHandle) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a network namespace and nft rules")
	}
	name := fmt.Sprintf("swdetect-%d-%d", os.Getpid(), time.Now().UnixNano()%100000)
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	if out, err := exec.Command("ip", "-n", name, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("lo up: %v: %s", err, out)
	}
	h, err := netns.GetFromName(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return name, h
}

// inNS runs fn on a thread moved into ns: sockets it creates live there.
func inNS(t *testing.T, ns netns.NsHandle, fn func()) {
	t.Helper()
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	if err := netns.Set(ns); err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	fn()
	if err := netns.Set(orig); err != nil {
		t.Fatalf("back to our namespace: %v", err) // the thread stays locked and dies with the goroutine
	}
	runtime.UnlockOSThread()
}

// bulk starts n TCP connections to a sink inside ns, each writing as fast as
// it can until the test ends.
func bulk(t *testing.T, ns netns.NsHandle, n int) {
	t.Helper()
	var ln net.Listener
	var conns []net.Conn
	var err error
	inNS(t, ns, func() {
		ln, err = net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", serverPort))
		if err != nil {
			return
		}
		for range n {
			var c net.Conn
			if c, err = net.Dial("tcp", ln.Addr().String()); err != nil {
				return
			}
			conns = append(conns, c)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var accepted []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range append(conns, accepted...) {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			accepted = append(accepted, c)
			mu.Unlock()
			wg.Add(1)
			go func() { defer wg.Done(); io.Copy(io.Discard, c) }()
		}
	}()
	buf := make([]byte, 64<<10)
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if _, err := c.Write(buf); err != nil {
					return
				}
			}
		}()
	}
}

func nft(t *testing.T, ns, script string) {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", ns, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft: %v: %s", err, out)
	}
}

func selfSampler(t *testing.T, ns netns.NsHandle) *ProxySampler {
	t.Helper()
	s, err := NewProxySampler(SamplerOptions{NS: ns, PIDs: func() ([]int, error) { return []int{os.Getpid()}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func TestProxySamplerSeesOwnSocketsInNamespace(t *testing.T) {
	_, ns := labNS(t)
	bulk(t, ns, 3)
	time.Sleep(100 * time.Millisecond) // let the accepts happen
	conns, err := selfSampler(t, ns).Sample(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	dst := netip.MustParseAddrPort(fmt.Sprintf("127.0.0.1:%d", serverPort))
	out, in := 0, 0
	for _, c := range conns {
		if !c.InFlight() {
			continue
		}
		if c.Dst() != dst {
			t.Errorf("conn %+v: Dst %v, want %v", c, c.Dst(), dst)
		}
		if c.Outbound {
			out++
			if !c.HasInfo || c.Cwnd == 0 {
				t.Errorf("outbound conn without tcp_info: %+v", c)
			}
		} else {
			in++
		}
	}
	if out != 3 || in != 3 {
		t.Errorf("%d outbound and %d accepted in-flight sockets, want 3 and 3 (the listener excluded): %+v", out, in, conns)
	}

	// No proxy process: an empty sample, no error.
	s, _ := NewProxySampler(SamplerOptions{NS: ns, PIDs: func() ([]int, error) { return nil, nil }})
	defer s.Close()
	if c, err := s.Sample(t.Context()); err != nil || len(c) != 0 {
		t.Errorf("no proxy: %d conns, err %v", len(c), err)
	}
}

// A black-holed bulk transfer makes the detector fire within seconds; the
// same transfer healthy does not.
func TestDetectorFiresOnBlackHole(t *testing.T) {
	name, ns := labNS(t)
	bulk(t, ns, 4)
	fired := make(chan string, 4)
	d, err := New(Options{Sampler: selfSampler(t, ns), Interval: 500 * time.Millisecond, Threshold: 16, Cooldown: 300 * time.Second,
		Trigger: func(r string) { fired <- r }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	select {
	case r := <-fired:
		t.Fatalf("healthy transfer fired: %s", r)
	case <-time.After(2 * time.Second):
	}
	if st := d.Status(time.Now()); st.Score != 0 || st.Conns < 8 || st.Stale {
		t.Fatalf("healthy status %+v, want score 0 over 8 sockets", st)
	}

	// Dropped on input, not output: a packet dropped by a local output hook
	// is a local transmit failure, for which TCP neither backs off nor
	// raises the RTO — only a loss after the sender is a black hole.
	nft(t, name, fmt.Sprintf("table inet blackhole {\n chain in {\n  type filter hook input priority 0;\n  tcp dport %d drop\n }\n}\n", serverPort))
	start := time.Now()
	select {
	case r := <-fired:
		t.Logf("fired %v after the black hole: %s", time.Since(start).Round(100*time.Millisecond), r)
		if !strings.HasPrefix(r, "EARLY_WARN_TRIGGERED") {
			t.Errorf("reason %q", r)
		}
	case <-time.After(8 * time.Second):
		t.Fatalf("no trigger 8 s after the black hole; status %+v", d.Status(time.Now()))
	}
}
