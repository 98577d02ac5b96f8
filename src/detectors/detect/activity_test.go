package detect

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// holeSampler is a LAN that opens a flow every 100 ms from holeAt on, none
// of which gets an answer: what the proxy's sockets show behind a node
// black-hole. The flows are computed at each Sample from the clock.
type holeSampler struct {
	mu     sync.Mutex
	holeAt time.Time
	calls  atomic.Int32
}

func (s *holeSampler) setHole(at time.Time) {
	s.mu.Lock()
	s.holeAt = at
	s.mu.Unlock()
}

func (s *holeSampler) Sample(context.Context) ([]Conn, error) {
	s.calls.Add(1)
	s.mu.Lock()
	holeAt := s.holeAt
	s.mu.Unlock()
	now := time.Now()
	var cs []Conn
	for at := holeAt; !holeAt.IsZero() && at.Before(now); at = at.Add(100 * time.Millisecond) {
		cs = append(cs, waitingConn(now.Sub(at)))
	}
	return cs, nil
}

// recorder keeps the detector's calls in order.
type recorder struct {
	mu     sync.Mutex
	events []string
	at     []time.Time
}

func (r *recorder) add(what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, what)
	r.at = append(r.at, time.Now())
}

func (r *recorder) first(prefix string) (time.Time, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var at time.Time
	n := 0
	for i, e := range r.events {
		if strings.HasPrefix(e, prefix) {
			if n == 0 {
				at = r.at[i]
			}
			n++
		}
	}
	return at, n
}

// The next sample comes when the waiting flows will hold enough silent
// ones to fire, not at the next fixed quick step: the eighth flow of the
// black-hole (opened 0.7 s after it began) turns silent at 2.2 s, and the
// detector fires within a jiffy of that instead of up to quickInterval
// later. The first sample that sees flows waiting asks for a check at
// once (Suspect), only once in suspectCooldown however long they wait, and
// the per-node tally (OnSample) sees each sample before the engine hears
// of its firing.
func TestSampleWhenFlowsTurnSilent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		s := &holeSampler{}
		var rec recorder
		var sampled atomic.Int32
		d, err := New(Options{Sampler: s, Threshold: 16, Interval: 3 * time.Second, Cooldown: 300 * time.Second,
			Trigger: func(r string) {
				if sampled.Load() != s.calls.Load() {
					rec.add("tally behind: the engine hears of a sample the tally has not seen")
				}
				rec.add("trigger " + r)
			},
			Suspect:  func(r string) { rec.add("suspect " + r) },
			OnSample: func(context.Context, time.Time, []Conn) { sampled.Add(1) },
		})
		if err != nil {
			t.Fatal(err)
		}
		holeAt := start.Add(time.Second) // between the samples at 0 and 3 s
		s.setHole(holeAt)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go d.Run(ctx)
		time.Sleep(20 * time.Second)
		synctest.Wait()

		suspectAt, suspects := rec.first("suspect EARLY_SUSPECT")
		if suspects != 1 {
			t.Fatalf("%d suspect requests in 20 s of waiting flows, want 1 (cooldown %s): %q", suspects, suspectCooldown, rec.events)
		}
		if got := suspectAt.Sub(start); got != 3*time.Second {
			t.Errorf("suspect at %v, want at the first sample that saw flows waiting (3s)", got)
		}
		firedAt, fires := rec.first("trigger EARLY_WARN_TRIGGERED")
		if fires != 1 {
			t.Fatalf("%d firings, want 1: %q", fires, rec.events)
		}
		silentAt := holeAt.Add(700*time.Millisecond + silentAfter) // the eighth flow turns silent
		if late := firedAt.Sub(silentAt); late < 0 || late > crossMargin+10*time.Millisecond {
			t.Errorf("fired %v after the eighth flow turned silent; want within %s (a sample scheduled for that moment)", late, crossMargin)
		}
		if _, n := rec.first("tally behind"); n > 0 {
			t.Errorf("the engine heard of the firing before the tally saw its sample: %q", rec.events)
		}
	})
}

// While LAN traffic flows (Activity rises at activityRate or more) the
// detector samples within a look of the black-hole's start, so it asks for
// a check about waitingAfter+lookInterval after it instead of at the next
// Interval. On a quiet tunnel (Activity still, or moved only by the
// engine's own requests, about one a second) it samples every Interval and
// reads Activity once per sample: no looks in between, no idle CPU.
func TestActivitySamplesSooner(t *testing.T) {
	for _, tc := range []struct {
		name    string
		traffic bool
		every   time.Duration // one new connection this often; 0 = none
	}{{"LAN traffic", true, 100 * time.Millisecond}, {"quiet", false, 0}, {"own probes only", false, 2 * time.Second}, {"footprint", false, time.Second}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				s := &holeSampler{}
				var rec recorder
				var reads atomic.Int32
				activity := func() (uint64, error) {
					reads.Add(1)
					if tc.every == 0 {
						return 7, nil
					}
					return uint64(time.Since(start) / tc.every), nil
				}
				d, err := New(Options{Sampler: s, Threshold: 16, Interval: 3 * time.Second, Cooldown: 300 * time.Second,
					Trigger: func(r string) { rec.add("trigger " + r) }, Suspect: func(r string) { rec.add("suspect " + r) },
					Activity: activity})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				go d.Run(ctx)
				time.Sleep(30 * time.Second)
				synctest.Wait()
				samples := s.calls.Load()
				if !tc.traffic {
					if samples > 11 {
						t.Errorf("%d samples in 30 s on a quiet tunnel (%s); want one per 3 s", samples, tc.name)
					}
					if r := reads.Load(); r > samples {
						t.Errorf("%d activity reads for %d samples in 30 s on a quiet tunnel; want one per sample, no looks", r, samples)
					}
					return
				}
				if samples < 100 {
					t.Errorf("%d samples in 30 s of LAN traffic; want one per %s look", samples, lookInterval)
				}
				holeAt := time.Now().Add(10 * time.Millisecond) // just after a look
				s.setHole(holeAt)
				time.Sleep(5 * time.Second)
				synctest.Wait()
				at, n := rec.first("suspect")
				if n == 0 {
					t.Fatalf("no suspect request: %q", rec.events)
				}
				if after := at.Sub(holeAt); after > waitingAfter+lookInterval+50*time.Millisecond {
					t.Errorf("suspect %v after the black-hole began; want within waitingAfter+lookInterval (%s)", after, waitingAfter+lookInterval)
				}
			})
		})
	}
}

func TestPassiveOpens(t *testing.T) {
	snmp := "Ip: Forwarding DefaultTTL\nIp: 2 64\nTcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails\nTcp: 1 200 120000 -1 13795 13692 68\nUdp: InDatagrams\nUdp: 5\n"
	if v, err := passiveOpens([]byte(snmp)); err != nil || v != 13692 {
		t.Errorf("passiveOpens = %d, %v; want 13692", v, err)
	}
	if _, err := passiveOpens([]byte("Ip: Forwarding\nIp: 2\n")); err == nil {
		t.Error("no Tcp lines: no error")
	}
}
