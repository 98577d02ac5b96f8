package loopguard

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"surflare-watchdog/src/detect"
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
