package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"surflare-watchdog/src/lab"
)

// How the lossy-but-working path is made. The lab has no netem (DESIGN.md
// §9): loss is the lab's nft loss fault on the WAN link (both directions),
// and jitter is the lab's user-space latency fault on every relay (every
// tunnel crosses one), redrawn uniformly from [0, jitter] every
// jitterPeriod.
const (
	jitterPeriod = time.Second
	// The bulk workload on every LAN client: bulkConns keep-alive
	// connections to the search host, opened, used twice and closed, round
	// after round with bulkPause between rounds. The lab has no host with
	// large bodies, so this is connection- and request-heavy rather than
	// byte-heavy: many tunnel set-ups and requests under loss.
	bulkConns          = 4
	bulkPause          = 100 * time.Millisecond
	soakTrafficPeriod  = time.Second
	soakRequestTimeout = requestTimeout
)

// soak runs the daemon on a lossy-but-working path for d and counts the
// rotations (every one is false: every node works) and reconnects.
func soak(ctx context.Context, env labEnv, p Params, d time.Duration, lossPct, jitterMS int) Soak {
	s := Soak{Variant: p.Variant, DurationS: Num(d.Seconds()), LossPct: lossPct, JitterMS: jitterMS}
	l, err := env.up(ctx)
	if err != nil {
		s.Error = err.Error()
		return s
	}
	defer l.Close()
	defer stopDaemon(l)
	if _, err := startHealthy(ctx, l, p.Sets); err != nil {
		s.Error = err.Error()
		return s
	}
	before, err := l.DaemonStatus(ctx)
	if err == nil {
		_, err = l.ResetLeaks(ctx)
	}
	if err == nil {
		err = l.Fault(ctx, lab.FaultLoss, true, strconv.Itoa(lossPct))
	}
	if err != nil {
		s.Error = err.Error()
		return s
	}
	jctx, stopJitter := context.WithCancel(ctx)
	jitterDone := make(chan error, 1)
	go func() { jitterDone <- jitter(jctx, l, jitterMS) }()
	tr := startTraffic(ctx, l, soakTrafficPeriod, false)
	bk := startBulk(ctx, l)
	err = sleep(ctx, d)
	bk.stop()
	tr.stop()
	stopJitter()
	jerr := <-jitterDone
	after, serr := l.DaemonStatus(ctx)
	lc, lerr := l.Leaks(ctx)
	if e := firstErr(err, jerr, serr, lerr); e != nil {
		s.Error = e.Error()
		return s
	}
	s.Rotations = after.Counters.Rotations - before.Counters.Rotations
	s.Reconnects = after.Counters.ConnectAttempts - before.Counters.ConnectAttempts
	s.Checks = after.Counters.Checks - before.Counters.Checks
	s.FailedCheck = after.Counters.FailedChecks - before.Counters.FailedChecks
	s.ClientOK, s.ClientFail, _, _ = tr.counts()
	s.Bulk, s.BulkOK, s.BulkFail = bulkDescription(len(l.Clients())), bk.ok, bk.fail
	s.Leaked = int64(lc.Total())
	return s
}

// jitter redraws every relay's added latency from [0, maxMS] every
// jitterPeriod until ctx ends, then removes it.
func jitter(ctx context.Context, l *lab.Lab, maxMS int) error {
	t := time.NewTicker(jitterPeriod)
	defer t.Stop()
	set := func(c context.Context, ms func() int) error {
		for _, r := range lab.Relays {
			if err := l.Fault(c, lab.FaultLatency, true, r.Name, strconv.Itoa(ms())); err != nil {
				return err
			}
		}
		return nil
	}
	for {
		if err := set(ctx, func() int { return rand.IntN(maxMS + 1) }); err != nil && ctx.Err() == nil {
			return err
		}
		select {
		case <-ctx.Done():
			cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return set(cctx, func() int { return 0 })
		case <-t.C:
		}
	}
}

// bulk is the soak's bulk workload (bulkConns connections per LAN client,
// round after round) and its request counts.
type bulk struct {
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	mu       sync.Mutex
	ok, fail int
}

func bulkDescription(clients int) string {
	return fmt.Sprintf("on each of the lab's %d LAN client(s), %d keep-alive HTTP connections to the search host, two requests each, "+
		"opened again every %s (the lab has no large-file host: many connections and requests, few bytes)", clients, bulkConns, bulkPause)
}

// startBulk runs the workload on every LAN client until stopped.
func startBulk(ctx context.Context, l *lab.Lab) *bulk {
	ctx, cancel := context.WithCancel(ctx)
	b := &bulk{cancel: cancel}
	targets := []lab.BulkTarget{{Dst: netip.AddrPortFrom(lab.Search, 80), Path: "/", N: bulkConns}}
	for i := range l.Clients() {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			for ctx.Err() == nil {
				ok, fail := 0, 0
				if w, err := l.OpenBulk(ctx, i, targets); err != nil {
					fail++
				} else {
					n := w.Len()
					f, _ := w.Finish()
					ok, fail = n+n-f, f
				}
				if ctx.Err() == nil {
					b.mu.Lock()
					b.ok, b.fail = b.ok+ok, b.fail+fail
					b.mu.Unlock()
				}
				select {
				case <-ctx.Done():
				case <-time.After(bulkPause):
				}
			}
		}()
	}
	return b
}

// stop ends the workload and waits for the round in flight.
func (b *bulk) stop() {
	b.cancel()
	b.wg.Wait()
}
