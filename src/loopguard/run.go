package loopguard

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
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

// Run checks the gate every Interval and judges a full sample whenever it
// is reached or a circuit is open, until ctx ends. It needs Options.Sampler.
func (g *Guard) Run(ctx context.Context) error {
	if g.o.MinActive < 0 {
		return nil
	}
	if g.o.Sampler == nil {
		return errors.New("loop guard: no sampler")
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-g.o.After(g.o.Interval):
		}
		g.Tick(ctx)
	}
}

// Tick is one period of Run: the gauge (one integer comparison against the
// gate) and, only at or above it or with a circuit open, a full sample.
func (g *Guard) Tick(ctx context.Context) {
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
