package fastsignal

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// fakeCounters is a counter table the test moves.
type fakeCounters struct{ v map[string]uint64 }

func (f *fakeCounters) read(context.Context) (map[string]uint64, error) {
	out := map[string]uint64{}
	for k, v := range f.v {
		out[k] = v
	}
	return out, nil
}

func newTestCounterWatch(t *testing.T, f *fakeCounters) (*CounterWatch, *[]string) {
	t.Helper()
	var fired []string
	w, err := NewCounterWatch(CounterOptions{
		Read: f.read,
		Watch: Names(map[string]Rule{"rst_in": {Meaning: "RSTs from relays"},
			"blocked_out": {Meaning: "router traffic dropped"}}),
		Trigger: func(r string) { fired = append(fired, r) },
	})
	if err != nil {
		t.Fatal(err)
	}
	return w, &fired
}

// A quiet counter that suddenly moves by a burst triggers one check and is
// remembered as evidence for BurstMemory; one that always moves at the
// same rate never triggers.
func TestCounterWatchJumpVersusSteadyRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeCounters{v: map[string]uint64{"rst_in": 0, "blocked_out": 1000, "syn_out": 0}}
		w, fired := newTestCounterWatch(t, f)
		ctx := context.Background()
		for range 40 { // blocked_out: 20 drops a second, every second
			w.Tick(ctx)
			f.v["blocked_out"] += 20
			f.v["syn_out"] += 500 // not watched
			time.Sleep(time.Second)
		}
		if len(*fired) != 0 {
			t.Fatalf("steady rates triggered: %q", *fired)
		}
		f.v["rst_in"] += 3 // a few: below MinJump
		w.Tick(ctx)
		time.Sleep(time.Second)
		if len(*fired) != 0 {
			t.Fatalf("3 RSTs triggered: %q", *fired)
		}
		f.v["rst_in"] += 40
		w.Tick(ctx)
		if len(*fired) != 1 || !strings.Contains((*fired)[0], "rst_in +40 (RSTs from relays)") {
			t.Fatalf("triggers = %q, want one naming rst_in +40", *fired)
		}
		if js := w.Recent("rst_in"); len(js) != 1 || js[0].Delta != 40 {
			t.Fatalf("Recent = %+v", js)
		}
		ev := Evidence{Counters: w, Names: []string{"rst_in"}}
		if why, ok := ev.Corroborate(time.Now(), "Dallas", "auto"); !ok || !strings.Contains(why, "rst_in jumped by 40 (RSTs from relays)") {
			t.Fatalf("Corroborate = %q, %v", why, ok)
		}
		time.Sleep(DefaultBurstMemory + time.Second)
		if _, ok := ev.Corroborate(time.Now(), "Dallas", "auto"); ok {
			t.Fatal("an old burst still corroborates")
		}
	})
}

// A counter that goes down (the table was re-made) is a new start, not a
// jump; triggers are at most one per gap.
func TestCounterWatchResetAndGap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeCounters{v: map[string]uint64{"rst_in": 5000}}
		w, fired := newTestCounterWatch(t, f)
		ctx := context.Background()
		w.Tick(ctx)
		time.Sleep(time.Second)
		f.v["rst_in"] = 0
		w.Tick(ctx)
		time.Sleep(time.Second)
		for range minHistory { // the new table's rate is learnt first
			w.Tick(ctx)
			time.Sleep(time.Second)
		}
		if len(*fired) != 0 {
			t.Fatalf("a counter reset triggered: %q", *fired)
		}
		for range 3 {
			f.v["rst_in"] += 50
			w.Tick(ctx)
			time.Sleep(time.Second)
			f.v["rst_in"] += 0
			w.Tick(ctx)
			time.Sleep(time.Second)
		}
		if len(*fired) != 1 {
			t.Fatalf("triggers within the gap = %d, want 1", len(*fired))
		}
	})
}

// Strict direct's counter appears only when its rule is applied (after the
// first connect); a domestic exit right after that is a burst with no
// history before it. It must fire at once rather than become the
// counter's own baseline — the bench's domestic-exit runs showed exactly
// that (detection at the 30 s periodic check).
func TestCounterWatchNewCounterBurstFiresAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeCounters{v: map[string]uint64{"blocked_out": 0}}
		var fired []string
		w, err := NewCounterWatch(CounterOptions{
			Read: f.read,
			Watch: Names(map[string]Rule{"direct_blocked": {Meaning: "direct refused", AnyRise: true},
				"blocked_out": {Meaning: "router drops"}}),
			Trigger: func(r string) { fired = append(fired, r) },
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		w.Tick(ctx)
		time.Sleep(time.Second)
		f.v["direct_blocked"] = 12 // the rule arrived and the proxy is going direct
		w.Tick(ctx)
		if len(fired) != 1 || !strings.Contains(fired[0], "direct_blocked +12") {
			t.Fatalf("triggers = %q, want direct_blocked +12 at once", fired)
		}
		for range 5 { // the burst goes on: evidence stays, no new trigger in the gap
			time.Sleep(time.Second)
			f.v["direct_blocked"] += 12
			w.Tick(ctx)
		}
		if len(fired) != 1 || len(w.Recent("direct_blocked")) == 0 {
			t.Fatalf("triggers = %q, recent = %v", fired, w.Recent("direct_blocked"))
		}
	})
}

// The bench's domestic exit began 0.4 s after the daemon went healthy: the
// watch's first successful read already held the burst, so every later
// delta looked like the counter's normal rate. A counter that must not
// move (AnyRise) fires on the first rise regardless — until it has risen
// in steadyDeltas intervals in a row, which makes it a rate of its own.
func TestCounterWatchAnyRiseFromTheFirstRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeCounters{v: map[string]uint64{"direct_blocked": 3}}
		var fired []string
		w, _ := NewCounterWatch(CounterOptions{
			Read:    f.read,
			Watch:   Names(map[string]Rule{"direct_blocked": {Meaning: "direct refused", AnyRise: true}}),
			Trigger: func(r string) { fired = append(fired, r) },
		})
		ctx := context.Background()
		w.Tick(ctx) // the burst is already under way
		for range 3 {
			time.Sleep(time.Second)
			f.v["direct_blocked"] += 10
			w.Tick(ctx)
		}
		if len(fired) != 1 {
			t.Fatalf("triggers = %q, want one", fired)
		}
		for range 2 * steadyDeltas { // it never stops: a rate, not a jump
			time.Sleep(time.Second)
			f.v["direct_blocked"] += 10
			w.Tick(ctx)
		}
		time.Sleep(DefaultBurstMemory)
		f.v["direct_blocked"] += 10
		w.Tick(ctx)
		if len(fired) != 1 || len(w.Recent("direct_blocked")) != 0 {
			t.Fatalf("a steady rate still fires: triggers %q, recent %v", fired, w.Recent("direct_blocked"))
		}
	})
}
