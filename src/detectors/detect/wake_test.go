package detect

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// A kernel wake-up (Options.Wake: the LAN's first new connection into the
// tproxy) brings the next sample forward to waitingAfter after it: a
// black-hole that starts together with the LAN's traffic, between two
// Interval samples, is asked about at waitingAfter instead of at the next
// Interval sample (3 s); flows that send their data a little after the
// connection that woke it (lag: the proxy dials the relay first) are
// sampled again when they have waited waitingAfter. Without wake-ups there
// are no looks; a closed channel (the subscription ended) leaves the
// Interval samples as they were.
func TestWakeSamplesWhenLANTrafficStarts(t *testing.T) {
	type result struct {
		suspectAfter  time.Duration // from the black-hole's start; -1: none
		firedAfter    time.Duration // likewise
		samples       int32         // in the first 30 s
		reads         int32         // Activity readings in the first 30 s
		samplesAfter3 int32         // samples in the 3 s after the wake-up
	}
	run := func(t *testing.T, wake, closed bool, lag time.Duration) result {
		var r result
		synctest.Test(t, func(t *testing.T) {
			s := &holeSampler{}
			var rec recorder
			var reads atomic.Int32
			var ch chan struct{}
			if wake || closed {
				ch = make(chan struct{}, 1)
			}
			if closed {
				close(ch)
			}
			d, err := New(Options{Sampler: s, Threshold: 16, Interval: 3 * time.Second, Cooldown: 300 * time.Second,
				Trigger: func(r string) { rec.add("trigger " + r) }, Suspect: func(r string) { rec.add("suspect " + r) },
				Activity: func() (uint64, error) { reads.Add(1); return 7, nil }, // the proxy accepts nothing the looks could see
				Wake:     ch})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			go d.Run(ctx)
			time.Sleep(30 * time.Second)
			synctest.Wait()
			r.samples, r.reads = s.calls.Load(), reads.Load()

			time.Sleep(time.Second) // between two Interval samples (30 and 33 s)
			holeAt := time.Now().Add(lag)
			s.setHole(holeAt)
			before := s.calls.Load()
			if wake {
				ch <- struct{}{}
			}
			time.Sleep(3 * time.Second)
			synctest.Wait()
			r.samplesAfter3 = s.calls.Load() - before
			r.suspectAfter = -1
			if at, n := rec.first("suspect"); n > 0 {
				r.suspectAfter = at.Sub(holeAt)
			}
			r.firedAfter = -1
			if at, n := rec.first("trigger"); n > 0 {
				r.firedAfter = at.Sub(holeAt)
			}
		})
		return r
	}
	for _, tc := range []struct {
		name         string
		wake, closed bool
		lag          time.Duration
		suspect      time.Duration // after the black-hole's start
	}{
		{"no wake-ups", false, false, 0, 2 * time.Second},
		{"closed", false, true, 0, 2 * time.Second},
		{"wake-up", true, false, 0, waitingAfter},
		{"wake-up, data 100 ms later", true, false, 100 * time.Millisecond, waitingAfter + crossMargin},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, tc.wake, tc.closed, tc.lag)
			t.Logf("%+v", r)
			if r.samples > 11 || r.reads > r.samples {
				t.Errorf("quiet 30 s: %d samples, %d activity reads; want one per 3 s and no looks", r.samples, r.reads)
			}
			if r.suspectAfter != tc.suspect {
				t.Errorf("suspect %v after the black-hole began, want %v (no wake-up: the next Interval sample)", r.suspectAfter, tc.suspect)
			}
			if !tc.wake {
				return
			}
			// The eighth flow (opened 0.7 s in) turns silent at 2.2 s.
			if want := 700*time.Millisecond + silentAfter; r.firedAfter < want || r.firedAfter > want+crossMargin+10*time.Millisecond {
				t.Errorf("woken: fired %v after the black-hole began, want within %s of %v", r.firedAfter, crossMargin, want)
			}
		})
	}
}

// A lone wake-up (one LAN request, the footprint bench's every 5 s, its
// flows answered) costs its sample and no looks, then the detector is back
// to one reading per Interval sample; wake-ups every 500 ms (the
// firewall's bucket under a busy LAN) keep a sample at most waitingAfter
// behind each.
func TestWakeCost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &holeSampler{}
		var reads atomic.Int32
		ch := make(chan struct{}, 1)
		d, err := New(Options{Sampler: s, Threshold: 16, Interval: 3 * time.Second, Cooldown: 300 * time.Second,
			Activity: func() (uint64, error) { reads.Add(1); return 7, nil }, Wake: ch})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go d.Run(ctx)
		time.Sleep(time.Second)
		synctest.Wait()
		s0, r0 := s.calls.Load(), reads.Load()
		ch <- struct{}{}
		time.Sleep(2*time.Second + 500*time.Millisecond) // up to just before the Interval sample at 3.3 s
		synctest.Wait()
		samples, looks := s.calls.Load()-s0, reads.Load()-r0-(s.calls.Load()-s0)
		if samples != 1 || looks != 0 {
			t.Errorf("a lone wake-up: %d samples, %d looks; want 1 and none", samples, looks)
		}
		time.Sleep(30 * time.Second)
		synctest.Wait()
		s1, r1 := s.calls.Load(), reads.Load()
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if n, r := s.calls.Load()-s1, reads.Load()-r1; n > 11 || r > n {
			t.Errorf("30 s after a lone wake-up: %d samples, %d reads; want one of each per Interval", n, r)
		}

		// Busy: a wake-up every 500 ms for 5 s.
		s2 := s.calls.Load()
		for range 10 {
			ch <- struct{}{}
			time.Sleep(500 * time.Millisecond)
		}
		synctest.Wait()
		if n := s.calls.Load() - s2; n < 9 {
			t.Errorf("wake-ups every 500 ms for 5 s: %d samples, want one per wake-up", n)
		}
	})
}
