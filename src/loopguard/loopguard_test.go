package loopguard

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"surflare-watchdog/src/detect"
)

type call struct {
	op  string
	dst netip.AddrPort
	ttl time.Duration
}

type fakeBlocker struct {
	calls []call
	err   error
}

func (f *fakeBlocker) Block(_ context.Context, dst netip.AddrPort, ttl time.Duration) error {
	f.calls = append(f.calls, call{"block", dst, ttl})
	return f.err
}

// unblocker is a Blocker that can also remove elements early.
type unblocker struct{ fakeBlocker }

func (u *unblocker) Unblock(_ context.Context, dst netip.AddrPort) error {
	u.calls = append(u.calls, call{"unblock", dst, 0})
	return nil
}

var (
	loopDst = netip.MustParseAddrPort("198.18.30.21:443")
	t0      = time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)
)

// sample builds a proxy socket list: looped in-flight connections to
// loopDst (outbound half and accepted half alike), spread ones to distinct
// destinations, and idle ones (TIME_WAIT) that never count.
func sample(looped, spread, idle int) []detect.Conn {
	var out []detect.Conn
	for i := range looped {
		if i%2 == 0 {
			out = append(out, detect.Conn{Local: netip.MustParseAddrPort("198.18.0.1:40000"), Remote: loopDst, State: detect.StateEstablished, Outbound: true})
		} else { // the tproxy-accepted half: Local is the original destination
			out = append(out, detect.Conn{Local: loopDst, Remote: netip.MustParseAddrPort("198.18.0.1:40000"), State: detect.StateEstablished})
		}
	}
	for i := range spread {
		out = append(out, detect.Conn{Remote: netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}), 443), State: detect.StateSynSent, Outbound: true})
	}
	for range idle {
		out = append(out, detect.Conn{Remote: loopDst, State: detect.StateTimeWait, Outbound: true})
	}
	return out
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newGuard(t *testing.T, b Blocker, minActive int) (*Guard, *clock) {
	t.Helper()
	clk := &clock{t: t0}
	g, err := New(Options{MinActive: minActive, Blocker: b, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	return g, clk
}

func TestGuardOpensOnLoopAndHeals(t *testing.T) {
	b := &fakeBlocker{}
	g, clk := newGuard(t, b, 100)
	ctx := context.Background()

	// Busy but healthy: 500 connections to 500 destinations.
	g.Observe(ctx, sample(0, 500, 0))
	// A loop under the gate: 90 in-flight, all to one destination.
	g.Observe(ctx, sample(90, 0, 0))
	// Over the gate but only 75% to one destination (ratio is > 80%).
	g.Observe(ctx, sample(75, 25, 0))
	if len(b.calls) != 0 || g.State().Open {
		t.Fatalf("blocked without a loop: %v", b.calls)
	}
	// Idle sockets to the same destination do not count as in flight.
	g.Observe(ctx, sample(10, 0, 500))
	if len(b.calls) != 0 {
		t.Fatalf("TIME_WAIT sockets counted: %v", b.calls)
	}

	// A loop: 190 of 200 in flight to one destination.
	g.Observe(ctx, sample(190, 10, 0))
	if len(b.calls) != 1 || b.calls[0] != (call{"block", loopDst, DefaultTTL}) {
		t.Fatalf("loop: calls %v, want one block of %v for %v", b.calls, loopDst, DefaultTTL)
	}
	st := g.State()
	if !st.Open || st.Dst != loopDst || st.InFlight != 200 || st.Top != 190 || st.Blocks != 1 {
		t.Errorf("state %+v", st)
	}
	// Still looping: refreshed only every TTL/3.
	clk.t = clk.t.Add(10 * time.Second)
	g.Observe(ctx, sample(190, 10, 0))
	clk.t = clk.t.Add(15 * time.Second)
	g.Observe(ctx, sample(190, 10, 0))
	if len(b.calls) != 2 {
		t.Fatalf("refresh: %d calls, want 2 (one at 0 s, one at 25 s)", len(b.calls))
	}
	// Draining below the gate closes the circuit; no Unblock here, the
	// element times out by itself.
	g.Observe(ctx, sample(40, 0, 0))
	if g.State().Open || len(b.calls) != 2 {
		t.Errorf("after draining: open %v calls %v", g.State().Open, b.calls)
	}
	// A new loop opens it again.
	g.Observe(ctx, sample(300, 0, 0))
	if !g.State().Open || g.State().Blocks != 2 {
		t.Errorf("second loop: %+v", g.State())
	}
}

func TestGuardUnblocksWhenRatioDrops(t *testing.T) {
	u := &unblocker{}
	g, _ := newGuard(t, u, 100)
	g.Observe(context.Background(), sample(190, 10, 0))
	g.Observe(context.Background(), sample(100, 100, 0)) // 50%: below the ratio
	want := []call{{"block", loopDst, DefaultTTL}, {"unblock", loopDst, 0}}
	if fmt.Sprint(u.calls) != fmt.Sprint(want) {
		t.Errorf("calls %v, want %v", u.calls, want)
	}
}

func TestGuardBlockFailureRetries(t *testing.T) {
	b := &fakeBlocker{err: errors.New("nft: table gone")}
	g, _ := newGuard(t, b, 100)
	g.Observe(context.Background(), sample(200, 0, 0))
	if st := g.State(); st.Open || st.Err == "" {
		t.Fatalf("failed block: %+v, want closed with the error shown", st)
	}
	b.err = nil
	g.Observe(context.Background(), sample(200, 0, 0))
	if st := g.State(); !st.Open || st.Err != "" || len(b.calls) != 2 {
		t.Errorf("retry: %+v calls %d", st, len(b.calls))
	}
}

func TestGuardDefaultsAndOff(t *testing.T) {
	b := &fakeBlocker{}
	g, _ := newGuard(t, b, 0) // 0 = default 1000
	g.Observe(context.Background(), sample(999, 0, 0))
	if len(b.calls) != 0 {
		t.Fatal("tripped below the default gate of 1000")
	}
	g.Observe(context.Background(), sample(1000, 0, 0))
	if len(b.calls) != 1 {
		t.Fatal("not tripped at 1000 in flight to one destination")
	}
	off, err := New(Options{MinActive: -1}) // off needs no blocker
	if err != nil {
		t.Fatal(err)
	}
	off.Observe(context.Background(), sample(5000, 0, 0))
	if off.State().Enabled || off.State().Open {
		t.Errorf("guard off: %+v", off.State())
	}
	if _, err := New(Options{MinActive: 10}); err == nil {
		t.Error("an enabled guard without a blocker was accepted")
	}
}

func TestCheckHeadroom(t *testing.T) {
	cases := []struct {
		minActive, nofile int
		ok                bool
		suggest           string
	}{
		{1000, 1024, false, "min_active=200"},
		{200, 1024, true, ""},
		{1000, 65536, true, ""},
		{1000, 4096, true, ""}, // 2000 of 4096: half left
		{1200, 4096, false, "min_active=800"},
		{1000, -1, true, ""},
		{-1, 64, true, ""},
		{0, 1024, false, "min_active=200"}, // 0 = the default 1000
	}
	for _, c := range cases {
		ok, advice := CheckHeadroom(c.minActive, c.nofile)
		if ok != c.ok || (c.suggest != "" && !strings.Contains(advice, c.suggest)) {
			t.Errorf("CheckHeadroom(%d, %d) = %v %q, want %v and a suggestion of %s", c.minActive, c.nofile, ok, advice, c.ok, c.suggest)
		}
	}
}

// The limit comes from the real /proc/PID/limits of a process.
func TestCheckProxyHeadroomReadsLimits(t *testing.T) {
	cmd := exec.Command("sh", "-c", "ulimit -n 1024 && exec sleep 30")
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start sh: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	g, _ := newGuard(t, &fakeBlocker{}, 1000)
	// Wait for the exec so the limit is in place (bounded).
	for i := 0; i < 100; i++ {
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", cmd.Process.Pid)); strings.TrimSpace(string(b)) == "sleep" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	ok, err := g.CheckProxyHeadroom(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if ok || !strings.Contains(g.State().Advice, "min_active=200") {
		t.Errorf("proxy with nofile 1024 and min_active 1000: ok %v advice %q", ok, g.State().Advice)
	}
}
