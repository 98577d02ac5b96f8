package history

import (
	"math"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)

func at(m float64) time.Time { return t0.Add(time.Duration(m * float64(time.Minute))) }

func TestStripMarksTheOutageAndTheRotation(t *testing.T) {
	r := New(0)
	r.Observe(at(0), Up)
	r.Observe(at(20), Down) // 20:20 the node died
	r.Rotation(at(22))
	r.Observe(at(22), Degraded)
	r.Observe(at(23), Up)
	s := r.Strip(at(60), time.Hour, 6) // six 10-minute buckets
	if len(s.Buckets) != 6 || s.BucketS != 600 {
		t.Fatalf("shape: %d buckets of %v s", len(s.Buckets), s.BucketS)
	}
	want := []State{Up, Up, Down, Up, Up, Up}
	for i, b := range s.Buckets {
		if b.Worst != want[i] {
			t.Errorf("bucket %d worst %q; want %q", i, b.Worst, want[i])
		}
	}
	if b := s.Buckets[2]; b.DownS != 120 || b.Rotations != 1 || b.KnownS != 600 {
		t.Errorf("bucket 2: %+v", b)
	}
	if len(s.Outages) != 1 || !s.Outages[0].From.Equal(at(20)) || !s.Outages[0].To.Equal(at(22)) || s.Outages[0].Open {
		t.Errorf("outages: %+v", s.Outages)
	}
	if want := 100 * 58.0 / 60; math.Abs(s.UptimePct-want) > 1e-9 {
		t.Errorf("uptime %.3f; want %.3f", s.UptimePct, want)
	}
}

func TestStripBeforeAnythingIsKnown(t *testing.T) {
	r := New(0)
	s := r.Strip(at(60), time.Hour, 4)
	if s.UptimePct != -1 || len(s.Outages) != 0 {
		t.Fatalf("empty: %+v", s)
	}
	for _, b := range s.Buckets {
		if b.Worst != Unknown || b.KnownS != 0 {
			t.Fatalf("bucket known without data: %+v", b)
		}
	}
	r.Observe(at(45), Up) // the daemon started at 20:45
	s = r.Strip(at(60), time.Hour, 4)
	if s.Buckets[2].Worst != Unknown || s.Buckets[3].Worst != Up || s.UptimePct != 100 {
		t.Fatalf("started mid-way: %+v", s)
	}
}

func TestOpenOutageAndPaused(t *testing.T) {
	r := New(0)
	r.Observe(at(0), Up)
	r.Observe(at(10), Paused) // WAN down: not the tunnel's fault, not counted
	r.Observe(at(20), Up)
	r.Observe(at(50), Down)
	s := r.Strip(at(60), time.Hour, 6)
	if len(s.Outages) != 1 || !s.Outages[0].Open || !s.Outages[0].To.Equal(at(60)) {
		t.Fatalf("open outage: %+v", s.Outages)
	}
	if s.Buckets[1].Worst != Paused {
		t.Errorf("paused bucket: %+v", s.Buckets[1])
	}
	// Known time excludes the pause: 40 up of 50.
	if math.Abs(s.UptimePct-80) > 1e-9 {
		t.Errorf("uptime %.3f; want 80", s.UptimePct)
	}
}

func TestClockSteppedBackKeepsOrder(t *testing.T) {
	r := New(0)
	r.Observe(at(10), Up)
	r.Observe(at(5), Down) // the clock went back five minutes
	r.Observe(at(12), Up)
	s := r.Strip(at(20), 20*time.Minute, 2)
	if len(s.Outages) != 1 || !s.Outages[0].From.Equal(at(10)) {
		t.Fatalf("outage after a step back starts at the last known time: %+v", s.Outages)
	}
}

func TestBoundedMemory(t *testing.T) {
	r := New(time.Hour)
	for i := 0; i < 10000; i++ {
		st := Up
		if i%2 == 1 {
			st = Down
		}
		r.Observe(t0.Add(time.Duration(i)*time.Second), st)
		r.Rotation(t0.Add(time.Duration(i) * time.Second))
	}
	r.mu.Lock()
	ns, nr := len(r.spans), len(r.rotations)
	r.mu.Unlock()
	if ns > DefaultMaxSpans || nr > 3601 {
		t.Fatalf("spans %d rotations %d: unbounded", ns, nr)
	}
	// Old data beyond Keep is gone: a strip of the last day only knows the last hour.
	end := t0.Add(10000 * time.Second)
	s := r.Strip(end, 24*time.Hour, 24)
	if s.Buckets[0].KnownS != 0 || s.Buckets[23].KnownS == 0 {
		t.Fatalf("keep window: first %+v last %+v", s.Buckets[0], s.Buckets[23])
	}
}
