package detect

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// waitingConn is an outbound flow whose acknowledged data has had no
// answer for d.
func waitingConn(d time.Duration) Conn {
	c := conn(10, 204*time.Millisecond, 0)
	c.LastDataSent, c.LastDataRecv = d, d+3*time.Millisecond
	return c
}

func TestSilentFlows(t *testing.T) {
	answered := conn(10, 204*time.Millisecond, 0)
	answered.LastDataSent, answered.LastDataRecv = 2*time.Second, time.Second // answer came after the send
	unacked := waitingConn(3 * time.Second)
	unacked.Unacked = 2 // the relay itself is not answering: the kernel signs' job
	sameJiffy := waitingConn(2 * time.Second)
	sameJiffy.LastDataRecv = sameJiffy.LastDataSent
	for _, tc := range []struct {
		name string
		c    Conn
		want bool
	}{
		{"black-holed behind a live relay", waitingConn(2 * time.Second), true},
		{"sent at connect, same jiffy", sameJiffy, true},
		{"young request", waitingConn(time.Second), false},
		{"answered", answered, false},
		{"data unacknowledged", unacked, false},
		{"accepted LAN socket", func() Conn { c := waitingConn(3 * time.Second); c.Outbound = false; return c }(), false},
	} {
		if got := Silent(tc.c); got != tc.want {
			t.Errorf("%s: silent %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := Score(waitingConn(2 * time.Second)); got != pointsPerSign {
		t.Errorf("silent flow scores %d, want %d", got, pointsPerSign)
	}
}

// A black-hole starts between two samples: the flows waiting for an
// answer make the detector look again after quickInterval, so it fires
// about 2 s after the silence began instead of at the next 3 s sample or
// later, and its evidence names the silence. A quiet healthy tunnel is
// sampled every Interval only.
func TestSilentFlowsAreSeenQuicklyAndAreEvidence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &fakeSampler{}
		var mu sync.Mutex
		var fired []string
		d, err := New(Options{Sampler: s, Threshold: 16, Interval: 3 * time.Second, Cooldown: 300 * time.Second,
			Trigger: func(r string) { mu.Lock(); fired = append(fired, r); mu.Unlock() }})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		s.set(nil, nil)
		go d.Run(ctx)
		time.Sleep(30 * time.Second)
		synctest.Wait()
		s.mu.Lock()
		idle := s.calls
		s.mu.Unlock()
		if idle > 11 {
			t.Fatalf("%d samples in 30 s on a quiet tunnel; want one per 3 s", idle)
		}
		if _, ok := d.Evidence(time.Now()); ok {
			t.Fatal("evidence without any silent flow")
		}

		// The black-hole begins 1 s after a sample: at the next regular
		// sample (2 s in) too few flows are silent yet to fire, so without
		// quick re-samples it would fire only 5 s in.
		holeAt := time.Now().Add(time.Second)
		stop := make(chan struct{})
		go func() { // the LAN keeps opening flows that never get an answer
			for {
				now := time.Now()
				var cs []Conn
				for at := holeAt; at.Before(now); at = at.Add(100 * time.Millisecond) {
					cs = append(cs, waitingConn(now.Sub(at)))
				}
				s.set(cs, nil)
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
		}()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		close(stop)
		mu.Lock()
		got := append([]string(nil), fired...)
		mu.Unlock()
		if len(got) != 1 || !strings.Contains(got[0], "silent") {
			t.Fatalf("fired %q within 5 s of the black-hole, want one EARLY_WARN naming silent flows", got)
		}
		last := d.Status(time.Now()).LastFired
		if after := last.Sub(holeAt); after > 3500*time.Millisecond {
			t.Errorf("fired %v after the black-hole began; want within 3.5 s (quick re-samples)", after)
		}
		why, ok := d.Evidence(time.Now())
		if !ok || !strings.Contains(why, "silent") {
			t.Errorf("evidence = %q, %v right after the firing", why, ok)
		}
		if _, ok := d.Evidence(time.Now().Add(evidenceMemory + time.Second)); ok {
			t.Error("evidence outlived its memory")
		}
	})
}
