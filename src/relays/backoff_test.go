package relays

import (
	"context"
	"net/netip"
	"testing"
	"time"
)

// stepClock hands each wait Run asks for to the test, which ends it.
type stepClock struct{ waits chan step }

type step struct {
	d  time.Duration
	ch chan time.Time
}

func (c *stepClock) Now() time.Time { return time.Unix(1_700_000_000, 0) }
func (c *stepClock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.waits <- step{d, ch}
	return ch
}

// While scans find nothing new Run backs off from ScanEvery to
// ScanIdleMax; a newly learned relay or a Poke (a new tunnel) brings it
// back to ScanEvery. A learner that never backed off would read the whole
// conntrack table every 12 s on an idle router (issue 19); one that did
// not come back would find a new tunnel's short relay connections late.
func TestLearnerBacksOffWhileNothingIsNewAndComesBackOnPoke(t *testing.T) {
	ct := &fakeConntrack{}
	var a added
	clk := &stepClock{waits: make(chan step)}
	l := New(Options{
		Conntrack:   ct,
		ServerPorts: func(context.Context) map[uint16]bool { return map[uint16]bool{8443: true} },
		LocalAddrs: func() (map[netip.Addr]bool, error) {
			return map[netip.Addr]bool{netip.MustParseAddr("198.18.0.2"): true}, nil
		},
		Add:   a.add,
		Clock: clk,
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go l.Run(ctx)
	// next waits for Run's next wait, checks it and ends it (fire) or
	// leaves it open (the caller pokes).
	next := func(want time.Duration, fire bool) {
		t.Helper()
		select {
		case s := <-clk.waits:
			if s.d != want {
				t.Fatalf("Run waits %v, want %v", s.d, want)
			}
			if fire {
				s.ch <- time.Time{}
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("Run asked for no wait (want %v)", want)
		}
	}
	scan := func(d time.Duration) { next(ScanEvery/5, true); next(d, true) }
	scan(ScanEvery)
	scan(2 * ScanEvery)
	scan(4 * ScanEvery)
	scan(ScanIdleMax)
	scan(ScanIdleMax)

	// A relay appears: the scan that learns it resets the wait.
	ct.mu.Lock()
	ct.flows = []Flow{flow(true, "198.18.0.2:40000", "203.0.113.7:8443")}
	ct.mu.Unlock()
	next(ScanEvery/5, true)
	next(ScanEvery, true)
	if len(a.all) != 1 {
		t.Fatalf("added %v, want the new relay", a.all)
	}
	scan(2 * ScanEvery)
	scan(4 * ScanEvery)

	// A transition pokes it: the long wait ends at once and the next one
	// is short again.
	next(ScanEvery/5, true)
	next(ScanIdleMax, false)
	l.Poke()
	scan(ScanEvery)
}
