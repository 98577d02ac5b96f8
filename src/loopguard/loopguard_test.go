package loopguard

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"surflare-watchdog/src/testenv"
	"testing"
	"time"

	"surflare-watchdog/src/detectors/detect"
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
	loopDst  = netip.MustParseAddrPort("198.18.30.21:8443") // Tokyo
	loopDst2 = netip.MustParseAddrPort("198.18.30.22:8443") // Singapore
	t0       = time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)
)

// loopTo is n looped sockets to dst: n/2 connections, each seen twice —
// the proxy's outbound half (ephemeral local port) and the tproxy-accepted
// half (Local is the original destination, Remote the outbound half's
// local end). base keeps the ports of several calls apart.
func loopTo(dst netip.AddrPort, n, base int) []detect.Conn {
	var out []detect.Conn
	for i := range n {
		peer := netip.AddrPortFrom(netip.MustParseAddr("198.18.0.2"), uint16(40000+base+i/2))
		if i%2 == 0 {
			out = append(out, detect.Conn{Local: peer, Remote: dst, State: detect.StateEstablished, Outbound: true})
		} else {
			out = append(out, detect.Conn{Local: dst, Remote: peer, State: detect.StateEstablished})
		}
	}
	return out
}

// sample builds a proxy socket list: looped in-flight sockets to loopDst,
// spread ones to distinct destinations, and idle ones (TIME_WAIT) that
// never count.
func sample(looped, spread, idle int) []detect.Conn {
	out := loopTo(loopDst, looped, 0)
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

func (f *fakeBlocker) count(op string) int {
	n := 0
	for _, c := range f.calls {
		if c.op == op {
			n++
		}
	}
	return n
}

func TestGuardOpensOnLoopAndHeals(t *testing.T) {
	u := &unblocker{}
	g, clk := newGuard(t, u, 100)
	ctx := context.Background()

	// Busy but healthy: 500 connections to 500 destinations.
	g.Observe(ctx, sample(0, 500, 0))
	// A loop under the gate: 90 in-flight, all to one destination.
	g.Observe(ctx, sample(90, 0, 0))
	// Over the gate but only 75% to one destination (ratio is > 80%).
	g.Observe(ctx, sample(75, 25, 0))
	if len(u.calls) != 0 || g.State().Open {
		t.Fatalf("blocked without a loop: %v", u.calls)
	}
	// Idle sockets to the same destination do not count as in flight.
	g.Observe(ctx, sample(10, 0, 500))
	if len(u.calls) != 0 {
		t.Fatalf("TIME_WAIT sockets counted: %v", u.calls)
	}

	// A loop: 190 of 200 in flight to one destination.
	g.Observe(ctx, sample(190, 10, 0))
	if len(u.calls) != 1 || u.calls[0] != (call{"block", loopDst, DefaultTTL}) {
		t.Fatalf("loop: calls %v, want one block of %v for %v", u.calls, loopDst, DefaultTTL)
	}
	st := g.State()
	if !st.Open || st.Dst != loopDst || st.InFlight != 200 || st.Top != 190 || st.Blocks != 1 || len(st.Circuits) != 1 {
		t.Errorf("state %+v", st)
	}
	// The loop holds on (the looped sockets were not cut: no Killer):
	// the circuit stays open, its element refreshed only every TTL/3.
	clk.t = clk.t.Add(10 * time.Second)
	g.Observe(ctx, sample(190, 10, 0))
	clk.t = clk.t.Add(15 * time.Second)
	g.Observe(ctx, sample(190, 10, 0))
	if u.count("block") != 2 || !g.State().Open {
		t.Fatalf("refresh: %v, want two blocks (at 0 s and 25 s) and the circuit open", u.calls)
	}
	// Drained (a few looped sockets left): still open for the hold...
	clk.t = clk.t.Add(time.Second)
	g.Observe(ctx, sample(6, 0, 0))
	clk.t = clk.t.Add(DefaultHold - time.Millisecond)
	g.Observe(ctx, sample(6, 0, 0))
	if !g.State().Open || u.count("unblock") != 0 {
		t.Fatalf("closed before the hold was over: %+v %v", g.State(), u.calls)
	}
	// ...then it closes by itself and the element goes at once.
	clk.t = clk.t.Add(time.Millisecond)
	g.Observe(ctx, sample(6, 0, 0))
	if st := g.State(); st.Open || len(st.Circuits) != 0 || u.count("unblock") != 1 {
		t.Errorf("after the hold: %+v calls %v", st, u.calls)
	}
	// A new loop opens it again, with twice the hold (it came back soon).
	g.Observe(ctx, sample(300, 0, 0))
	if st := g.State(); !st.Open || st.Blocks != 2 || len(st.Circuits) != 1 || st.Circuits[0].HoldS != 2*DefaultHold.Seconds() {
		t.Errorf("second loop: %+v", st)
	}
}

// Bugs 1 and 2 of the first guard: blocking the first relay makes the
// proxy fall over to the next one, and the loop follows. The first circuit
// must stay open while the second opens (it used to be closed because the
// busiest destination changed), and the second must trip although the
// loop is split between the two (neither above 80% of all in-flight).
func TestGuardFollowsTheLoopToTheNextRelay(t *testing.T) {
	u := &unblocker{}
	g, clk := newGuard(t, u, 200)
	ctx := context.Background()
	g.Observe(ctx, loopTo(loopDst, 400, 0))
	clk.t = clk.t.Add(250 * time.Millisecond)
	// Tokyo's looped sockets linger (until the proxy's own timeout), the
	// loop grows on Singapore: 400 + 300 in flight, Singapore 43%.
	both := append(loopTo(loopDst, 400, 0), loopTo(loopDst2, 300, 1000)...)
	g.Observe(ctx, both)
	st := g.State()
	if len(st.Circuits) != 2 || u.count("unblock") != 0 || u.count("block") != 2 {
		t.Fatalf("circuits %+v calls %v, want Tokyo and Singapore both open", st.Circuits, u.calls)
	}
	if st.Circuits[0].Dst != loopDst || st.Circuits[1].Dst != loopDst2 || st.Dst != loopDst2 {
		t.Errorf("circuits %+v (latest %v), want Tokyo then Singapore", st.Circuits, st.Dst)
	}
	// Each closes on its own: Tokyo drains first.
	clk.t = clk.t.Add(time.Second)
	g.Observe(ctx, loopTo(loopDst2, 300, 1000))
	clk.t = clk.t.Add(DefaultHold)
	g.Observe(ctx, loopTo(loopDst2, 300, 1000))
	st = g.State()
	if len(st.Circuits) != 1 || st.Circuits[0].Dst != loopDst2 || fmt.Sprint(u.calls[len(u.calls)-1]) != fmt.Sprint(call{"unblock", loopDst, 0}) {
		t.Errorf("after Tokyo drained: circuits %+v calls %v", st.Circuits, u.calls)
	}
}

// Two loops at once in one sample: both destinations open.
func TestGuardOpensSeveralInOneSample(t *testing.T) {
	b := &fakeBlocker{}
	g, _ := newGuard(t, b, 100)
	// 900 to Tokyo, 100 to Singapore, 10 spread: Tokyo trips (89%), then
	// Singapore is 100 of the remaining 110 (91%).
	conns := append(loopTo(loopDst, 900, 0), loopTo(loopDst2, 100, 1000)...)
	conns = append(conns, sample(0, 10, 0)...)
	g.Observe(context.Background(), conns)
	if st := g.State(); len(st.Circuits) != 2 || st.Blocks != 2 {
		t.Errorf("state %+v calls %v", st, b.calls)
	}
}

type fakeKiller struct {
	killed []string
	fail   bool
}

func (k *fakeKiller) Kill(local, remote netip.AddrPort) error {
	if k.fail {
		return errors.New("EOPNOTSUPP")
	}
	k.killed = append(k.killed, local.String()+">"+remote.String())
	return nil
}

// Opening a circuit destroys both halves of every looped connection, but
// not the proxy's real connection to the same relay (no accepted twin) nor
// a LAN client's connection to it (no outbound twin).
func TestGuardCutsLoopedSockets(t *testing.T) {
	k := &fakeKiller{}
	clk := &clock{t: t0}
	g, err := New(Options{MinActive: 100, Blocker: &fakeBlocker{}, Killer: k, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	real := detect.Conn{Local: netip.MustParseAddrPort("198.18.0.2:50000"), Remote: loopDst, State: detect.StateEstablished, Outbound: true}
	lan := detect.Conn{Local: loopDst, Remote: netip.MustParseAddrPort("198.18.1.50:51000"), State: detect.StateEstablished}
	g.Observe(context.Background(), append(loopTo(loopDst, 200, 0), real, lan))
	if len(k.killed) != 200 {
		t.Fatalf("killed %d sockets, want the 200 looped ones", len(k.killed))
	}
	for _, s := range k.killed {
		if strings.HasPrefix(s, "198.18.0.2:50000>") || strings.Contains(s, "198.18.1.50") {
			t.Errorf("a connection that is not a loop was cut: %s", s)
		}
	}
	st := g.State()
	if st.Cut != 200 || st.Circuits[0].Cut != 200 {
		t.Errorf("state %+v", st)
	}
	// The cut sockets are gone: the next sample shows the circuit drained.
	clk.t = clk.t.Add(DefaultInterval)
	g.Observe(context.Background(), []detect.Conn{real})
	if st := g.State(); !st.Open || st.Circuits[0].Looped != 0 {
		t.Errorf("after the cut: %+v", st)
	}
	// A killer that fails is reported, the circuit stays.
	k2 := &fakeKiller{fail: true}
	g2, _ := New(Options{MinActive: 100, Blocker: &fakeBlocker{}, Killer: k2})
	buf := testenv.CaptureLog(t)
	g2.Observe(context.Background(), loopTo(loopDst, 200, 0))
	if !g2.State().Open || !strings.Contains(buf.String(), "could not be destroyed") {
		t.Errorf("failed kill: %+v\n%s", g2.State(), buf)
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
	if err := off.Run(context.Background()); err != nil {
		t.Errorf("Run of a guard that is off: %v", err)
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
