package loopguard

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
)

// DefaultSockstat is the caller's network namespace's socket summary (the
// daemon shares the proxy's namespace).
const DefaultSockstat = "/proc/net/sockstat"

// SockstatGauge counts the TCP sockets in use in the namespace ("TCP: inuse
// N" of /proc/net/sockstat): every proxy socket that is in flight is one of
// them, so a count below MinActive proves there is nothing to judge. One
// read of a ~200-byte file, whatever the number of sockets.
func SockstatGauge(path string) Gauge {
	return func() (int, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return 0, fmt.Errorf("reading %s: %w", path, err)
		}
		return parseSockstat(b)
	}
}

func parseSockstat(b []byte) (int, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) >= 3 && string(f[0]) == "TCP:" && string(f[1]) == "inuse" {
			n, err := strconv.Atoi(string(f[2]))
			if err != nil {
				return 0, fmt.Errorf("sockstat: TCP inuse %q is not a number", f[2])
			}
			return n, nil
		}
	}
	return 0, errors.New("sockstat: no \"TCP: inuse\" line")
}

// Run judges the gate until ctx ends. It needs Options.Sampler.
//
// With Options.Events (the kernel's wake-ups, KernelEvents) it waits on
// them and checks the gate only when woken — at once on the first event,
// then every Fast while events keep coming (for Linger after the last) or
// a circuit is open — plus a safety check every Safety, for what the
// wake-up rule cannot see (a gauge that crept up without a flood of new
// tunnel connections). Without events, or once they stop (the channel is
// closed), it checks every Interval, as before there were events.
func (g *Guard) Run(ctx context.Context) error {
	if g.o.MinActive < 0 {
		return nil
	}
	if g.o.Sampler == nil {
		return errors.New("loop guard: no sampler")
	}
	events := g.o.Events
	g.setMode(events != nil)
	var lastTick, lastEvent time.Time
	for {
		wait := g.pace(events != nil, g.o.Now(), lastEvent)
		if !lastTick.IsZero() {
			wait = max(0, lastTick.Add(wait).Sub(g.o.Now()))
		}
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-events:
			if !ok {
				events = nil
				g.setMode(false)
				if ctx.Err() == nil {
					log().Warn(fmt.Sprintf("loopguard: kernel wake-ups stopped; checking the gate every %s instead "+
						"(a loop is seen up to %s later and the check costs CPU at idle)", g.o.Interval, g.o.Interval))
				}
				continue
			}
			lastEvent = g.o.Now()
			if !lastTick.IsZero() && lastEvent.Sub(lastTick) < g.o.Fast {
				continue // checked moments ago: the fast pace takes it from here
			}
		case <-g.o.After(wait):
		}
		g.Tick(ctx)
		lastTick = g.o.Now()
	}
}

// pace is how long Run waits between checks.
func (g *Guard) pace(events bool, now, lastEvent time.Time) time.Duration {
	switch {
	case !events:
		return g.o.Interval
	case len(g.circuits) > 0, !lastEvent.IsZero() && now.Sub(lastEvent) < g.o.Linger:
		return g.o.Fast
	default:
		return g.o.Safety
	}
}

func (g *Guard) setMode(events bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.st.Mode = ModePoll
	if events {
		g.st.Mode = ModeEvents
	}
}

// Tick is one period of Run: the gauge (one integer comparison against the
// gate) and, only at or above it or with a circuit open, a full sample.
func (g *Guard) Tick(ctx context.Context) {
	g.mu.Lock()
	g.st.Checks++
	g.mu.Unlock()
	if len(g.circuits) == 0 {
		n, err := g.o.Gauge()
		if err == nil && n < g.o.MinActive {
			return
		}
		// A gauge that cannot be read must not blind the guard: sample.
	}
	conns, err := g.o.Sampler.Sample(ctx)
	if err != nil {
		if ctx.Err() == nil {
			g.mu.Lock()
			first := g.st.Err == ""
			g.st.Err = err.Error()
			g.mu.Unlock()
			g.sampleErr = true
			if first {
				log().Warn(fmt.Sprintf("loopguard: sampling the proxy's sockets failed: %v", err))
			}
		}
		return
	}
	if g.sampleErr {
		g.sampleErr = false
		g.mu.Lock()
		g.st.Err = ""
		g.mu.Unlock()
	}
	g.Observe(ctx, conns)
}
