package boxtest

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netns"

	"surflare-watchdog/src/lab"
)

// trafficEvery is the period of the test traffic: each tick a LAN client
// fetches an IP echo and asks a foreign resolver, and the router itself
// fetches an IP echo (new connections each time, so every gap in the kill
// switch meets fresh unmarked packets).
const trafficEvery = 20 * time.Millisecond

// floodEvery is the period of the UDP datagrams the router and the LAN
// client send besides (1000 per second each): a gap of a few milliseconds
// in the kill switch, which a fetch every 20 ms could miss, meets them.
const floodEvery = time.Millisecond

// traffic keeps the LAN and the router sending until stop.
type traffic struct {
	cancel           context.CancelFunc
	wg               sync.WaitGroup
	lanOK, routerOK  atomic.Int64
	lanErr, routerEr atomic.Int64
	datagrams        atomic.Int64
}

func startTraffic(ctx context.Context, l *lab.Lab) *traffic {
	ctx, cancel := context.WithCancel(ctx)
	t := &traffic{cancel: cancel}
	for _, role := range []string{lab.RoleRouter, lab.RoleLAN} {
		c, err := udpFrom(l, role, fmt.Sprintf("%s:9", lab.IPEcho[0]))
		if err != nil {
			continue // the fetches still run; the flood is extra
		}
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			defer c.Close()
			tick := time.NewTicker(floodEvery)
			defer tick.Stop()
			for {
				if _, err := c.Write([]byte("surflare-box-test")); err == nil {
					t.datagrams.Add(1)
				}
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
			}
		}()
	}
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

// udpFrom opens a UDP socket in role's namespace "connected" to addr. The
// socket stays in that namespace; the thread that made it is discarded.
func udpFrom(l *lab.Lab, role, addr string) (net.Conn, error) {
	ns, err := l.NS(role)
	if err != nil {
		return nil, err
	}
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with us
		if err := netns.Set(ns); err != nil {
			ch <- res{nil, err}
			return
		}
		c, err := net.Dial("udp", addr)
		ch <- res{c, err}
	}()
	r := <-ch
	return r.c, r.err
}
