package boxtest

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"surflare-watchdog/src/lab"
)

// trafficEvery is the period of the test traffic: each tick a LAN client
// fetches an IP echo and asks a foreign resolver, and the router itself
// fetches an IP echo (new connections each time, so every gap in the kill
// switch meets fresh unmarked packets).
const trafficEvery = 20 * time.Millisecond

// traffic keeps the LAN and the router sending until stop.
type traffic struct {
	cancel           context.CancelFunc
	wg               sync.WaitGroup
	lanOK, routerOK  atomic.Int64
	lanErr, routerEr atomic.Int64
}

func startTraffic(ctx context.Context, l *lab.Lab) *traffic {
	ctx, cancel := context.WithCancel(ctx)
	t := &traffic{cancel: cancel}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		tick := time.NewTicker(trafficEvery)
		defer tick.Stop()
		for i := 0; ; i++ {
			t.wg.Add(1)
			go func(i int) {
				defer t.wg.Done()
				rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
				defer rcancel()
				if _, err := l.ClientEcho(rctx, 0); err == nil {
					t.lanOK.Add(1)
				} else if ctx.Err() == nil {
					t.lanErr.Add(1)
				}
				_, _ = l.ClientResolve(rctx, 0, lab.ForeignDNS, lab.UniqueName("box", "foreign.lab"), time.Second)
				if f := l.FetchFrom(rctx, lab.RoleRouter, lab.EchoURL(i)); f.Err == nil && f.Status == 200 {
					t.routerOK.Add(1)
				} else if ctx.Err() == nil {
					t.routerEr.Add(1)
				}
			}(i)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return t
}

// stop ends the traffic and waits for requests in flight.
func (t *traffic) stop() {
	t.cancel()
	t.wg.Wait()
}
