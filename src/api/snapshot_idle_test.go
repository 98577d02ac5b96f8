package api_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"surflare-watchdog/src/api"
	"surflare-watchdog/src/api/apifake"
)

// countingBackend counts the status reads (each one reads the firewall's
// tables from the kernel in the daemon).
type countingBackend struct {
	*apifake.Backend
	status atomic.Int64
}

func (b *countingBackend) Status(ctx context.Context) (any, error) {
	b.status.Add(1)
	return b.Backend.Status(ctx)
}

// With no live view open the periodic snapshot is not built (issue 19: it
// was a sixth of an idle daemon's CPU); a page that opens one gets its
// first snapshot and then the periodic ones as before.
func TestPeriodicSnapshotsOnlyForOpenWebsockets(t *testing.T) {
	var b *countingBackend
	f := newFixture(t, func(o *api.Options) {
		b = &countingBackend{Backend: o.Backend.(*apifake.Backend)}
		o.Backend = b
		o.SnapshotEvery = 20 * time.Millisecond
	})
	ts := f.run(t)
	time.Sleep(300 * time.Millisecond) // ~15 snapshot ticks with nobody listening
	if n := b.status.Load(); n != 0 {
		t.Fatalf("%d status reads with no websocket open, want 0", n)
	}
	c, _, err := dialWS(ts, f.token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if fr := readFrame(t, c); fr.Kind != api.KindSnapshot {
		t.Fatalf("first frame %q, want a snapshot", fr.Kind)
	}
	for i := 0; i < 3; i++ {
		readUntil(t, c, "a periodic snapshot", func(fr frame) bool { return fr.Kind == api.KindSnapshot })
	}
}
