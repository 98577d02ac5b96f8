package fastsignal

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// RSTs from the relays count for the node that was in use when they came:
// a burst on Dallas corroborates Dallas, never Los Angeles after the
// rotation (issue 19: kernel evidence per node).
func TestEvidenceCountsJumpsForTheNodeTheyCameOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeCounters{v: map[string]uint64{"rst_in": 0}}
		w, _ := newTestCounterWatch(t, f)
		ctx := context.Background()
		for range 5 {
			w.Tick(ctx)
			time.Sleep(time.Second)
		}
		since := map[string]time.Time{"Dallas": time.Now().Add(-time.Minute)}
		ev := Evidence{Counters: w, Names: []string{"rst_in"}, Since: func(n string) time.Time {
			if t, ok := since[n]; ok {
				return t
			}
			return time.Now()
		}}
		f.v["rst_in"] += 40
		w.Tick(ctx)
		if why, ok := ev.Corroborate(time.Now(), "Dallas", "auto"); !ok || !strings.Contains(why, "rst_in jumped by 40") || !strings.Contains(why, "on Dallas") {
			t.Fatalf("Dallas's burst: %q %v", why, ok)
		}
		time.Sleep(time.Second)
		since["Los Angeles"] = time.Now() // rotated
		if why, ok := ev.Corroborate(time.Now(), "Los Angeles", "auto"); ok {
			t.Fatalf("Dallas's RSTs corroborate a failed check on Los Angeles: %s", why)
		}
	})
}
