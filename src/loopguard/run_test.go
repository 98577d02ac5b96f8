package loopguard

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"surflare-watchdog/src/detectors/detect"
	"surflare-watchdog/src/testenv"
)

type fakeSampler struct {
	conns []detect.Conn
	err   error
	calls int
}

func (s *fakeSampler) Sample(context.Context) ([]detect.Conn, error) {
	s.calls++
	return s.conns, s.err
}

// Tick samples only when the gauge reaches the gate or a circuit is open;
// below the gate the whole cost is the gauge.
func TestTickSamplesOnlyAboveTheGate(t *testing.T) {
	gauge := 50
	s := &fakeSampler{}
	clk := &clock{t: t0}
	g, err := New(Options{MinActive: 100, Blocker: &fakeBlocker{}, Sampler: s, Now: clk.now,
		Gauge: func() (int, error) { return gauge, nil }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	g.Tick(ctx)
	if s.calls != 0 {
		t.Fatalf("sampled below the gate")
	}
	gauge, s.conns = 400, loopTo(loopDst, 200, 0)
	g.Tick(ctx)
	if s.calls != 1 || !g.State().Open {
		t.Fatalf("at the gate: %d samples, state %+v", s.calls, g.State())
	}
	// The loop's sockets are gone (gauge low again), but the circuit is
	// open: it keeps sampling until the circuit has closed.
	gauge, s.conns = 10, nil
	ticks := int(DefaultHold/DefaultInterval) + 2
	for range ticks {
		clk.t = clk.t.Add(DefaultInterval)
		g.Tick(ctx)
	}
	if g.State().Open {
		t.Fatalf("still open after %v drained", time.Duration(ticks)*DefaultInterval)
	}
	n := s.calls
	g.Tick(ctx)
	if s.calls != n {
		t.Errorf("kept sampling after the circuit closed")
	}
	// A gauge that fails does not blind the guard; a sample that fails is
	// shown and cleared by the next good one.
	g.o.Gauge = func() (int, error) { return 0, errors.New("no procfs") }
	s.err = errors.New("sock_diag: EPERM")
	g.Tick(ctx)
	if s.calls != n+1 || g.State().Err == "" {
		t.Errorf("failing gauge/sampler: samples %d, state %+v", s.calls-n, g.State())
	}
	s.err = nil
	g.Tick(ctx)
	if g.State().Err != "" {
		t.Errorf("error not cleared: %+v", g.State())
	}
}

// Run ticks on its clock until the context ends.
func TestRunTicksUntilCancelled(t *testing.T) {
	s := &fakeSampler{conns: loopTo(loopDst, 200, 0)}
	ticks := make(chan time.Time)
	g, err := New(Options{MinActive: 100, Blocker: &fakeBlocker{}, Sampler: s,
		Gauge: func() (int, error) { return 1000, nil }, After: func(time.Duration) <-chan time.Time { return ticks }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- g.Run(ctx) }()
	ticks <- t0
	ticks <- t0 // the second send returns once the first tick is done
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if s.calls < 1 || !g.State().Open {
		t.Errorf("samples %d, state %+v", s.calls, g.State())
	}
	noSampler, _ := New(Options{MinActive: 100, Blocker: &fakeBlocker{}})
	if err := noSampler.Run(ctx); err == nil {
		t.Error("Run without a sampler did not fail")
	}
}

func TestParseSockstat(t *testing.T) {
	// As a 6.x kernel prints it.
	in := "sockets: used 137\nTCP: inuse 1021 orphan 0 tw 4 alloc 1030 mem 93\nUDP: inuse 3 mem 2\n"
	if n, err := parseSockstat([]byte(in)); err != nil || n != 1021 {
		t.Errorf("parse = %d, %v; want 1021", n, err)
	}
	for _, bad := range []string{"", "TCP: inuse many\n", "UDP: inuse 3\n"} {
		if _, err := parseSockstat([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if _, err := os.Stat(DefaultSockstat); err == nil {
		if _, err := SockstatGauge(DefaultSockstat)(); err != nil {
			t.Errorf("this host's sockstat: %v", err)
		}
	}
}

// BenchmarkGate is the guard's cost below the gate, per Run period: one
// read of /proc/net/sockstat and one comparison.
func BenchmarkGate(b *testing.B) {
	g, err := New(Options{MinActive: 1000, Blocker: &fakeBlocker{}, Sampler: &fakeSampler{}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		g.Tick(ctx)
	}
}

// timer is an injected After: each call reports the wait Run asked for
// and returns the channel the test fires.
type timer struct {
	asked chan time.Duration
	fire  chan time.Time
}

func newTimer() *timer {
	return &timer{asked: make(chan time.Duration), fire: make(chan time.Time)}
}

func (tm *timer) after(d time.Duration) <-chan time.Time {
	tm.asked <- d
	return tm.fire
}

// With kernel events Run sleeps (a safety check every Safety), checks at
// once when woken, keeps a fast pace while events come or a circuit is
// open, goes back to sleep after Linger, and falls back to polling with a
// warning when the events stop.
func TestRunWaitsForKernelEvents(t *testing.T) {
	logs := testenv.CaptureLog(t)
	clk := &clock{t: t0}
	tm := newTimer()
	ev := make(chan struct{}, 1)
	reads, gauge := 0, 10
	s := &fakeSampler{conns: loopTo(loopDst, 400, 0)}
	g, err := New(Options{MinActive: 200, Blocker: &fakeBlocker{}, Sampler: s, Events: ev,
		Gauge: func() (int, error) { reads++; return gauge, nil },
		Now:   clk.now, After: tm.after})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- g.Run(ctx) }()
	expect := func(step string, want time.Duration, wantReads int) {
		t.Helper()
		if got := <-tm.asked; got != want || reads != wantReads {
			t.Fatalf("%s: Run waits %v with %d gate checks, want %v with %d", step, got, reads, want, wantReads)
		}
	}
	fire := func(d time.Duration) {
		clk.t = clk.t.Add(d)
		tm.fire <- clk.t
	}

	expect("idle", DefaultSafety, 0)
	fire(DefaultSafety)
	expect("after the safety check", DefaultSafety, 1)
	if st := g.State(); st.Mode != ModeEvents {
		t.Errorf("mode %q, want %q", st.Mode, ModeEvents)
	}
	clk.t = clk.t.Add(time.Second)
	ev <- struct{}{}
	expect("woken", DefaultFast, 2) // checked at once, without a timer
	ev <- struct{}{}
	expect("woken again at once", DefaultFast, 2) // coalesced into the pace
	fire(DefaultFast)
	expect("fast pace", DefaultFast, 3)
	fire(DefaultLinger)
	expect("quiet for Linger", DefaultSafety, 4)

	// A loop: the gate is reached, a circuit opens, the pace stays fast
	// while it is open even with no more events.
	gauge = 400
	clk.t = clk.t.Add(time.Second)
	ev <- struct{}{}
	expect("loop", DefaultFast, 5)
	if !g.State().Open {
		t.Fatalf("no circuit at the gate: %+v", g.State())
	}
	fire(time.Second)
	expect("circuit open, no events", DefaultFast, 5) // an open circuit samples without the gauge
	if s.calls != 2 {
		t.Errorf("samples = %d, want 2", s.calls)
	}

	close(ev)
	expect("events gone", DefaultInterval, 5)
	if st := g.State(); st.Mode != ModePoll {
		t.Errorf("mode %q after the events stopped, want %q", st.Mode, ModePoll)
	}
	if !strings.Contains(logs.String(), "kernel wake-ups stopped") || !strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("no warning when the events stopped:\n%s", logs)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := g.State(); st.Checks != 6 {
		t.Errorf("checks = %d, want 6", st.Checks)
	}
}

// Without events Run polls every Interval and says so in its state.
func TestRunWithoutEventsPolls(t *testing.T) {
	tm := newTimer()
	g, err := New(Options{MinActive: 200, Blocker: &fakeBlocker{}, Sampler: &fakeSampler{},
		Gauge: func() (int, error) { return 0, nil }, After: tm.after})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- g.Run(ctx) }()
	for range 3 {
		if d := <-tm.asked; d > DefaultInterval || d < DefaultInterval-10*time.Millisecond {
			t.Errorf("waits %v, want %v", d, DefaultInterval)
		}
		tm.fire <- time.Now()
	}
	<-tm.asked
	cancel()
	<-done
	if st := g.State(); st.Mode != ModePoll || st.Checks != 3 {
		t.Errorf("state %+v, want mode poll and 3 checks", st)
	}
}
