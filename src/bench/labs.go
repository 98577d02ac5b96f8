package bench

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"surflare-watchdog/src/lab"
)

// healthyBudget bounds a daemon's first connect in a fresh lab.
const healthyBudget = 90 * time.Second

// labEnv is what every experiment needs to bring up a lab.
type labEnv struct {
	binDir string // prebuilt lab binaries (lab.Build)
	log    *slog.Logger
	vendor []string // knobs for the fake vendor client (Options.Vendor)
}

// up brings up a one-client lab from the prebuilt binaries.
func (e labEnv) up(ctx context.Context) (*lab.Lab, error) {
	l, err := lab.Up(ctx, lab.Options{BinDir: e.binDir, Clients: 1, Vendor: e.vendor, Log: e.log})
	if err != nil {
		return nil, fmt.Errorf("lab up: %w", err)
	}
	return l, nil
}

// startHealthy starts the daemon with sets and waits until it says healthy
// and a LAN client gets out through its node. It returns the daemon's
// status at that point (PID filled from the start if the status lacks it).
func startHealthy(ctx context.Context, l *lab.Lab, sets []string) (lab.DaemonState, error) {
	ctx, cancel := context.WithTimeout(ctx, healthyBudget)
	defer cancel()
	pid, err := l.StartDaemon(ctx, sets...)
	if err != nil {
		return lab.DaemonState{}, fmt.Errorf("starting the daemon: %w", err)
	}
	st, err := waitHealthy(ctx, l)
	if st.PID <= 0 {
		st.PID = pid
	}
	return st, err
}

// waitHealthy waits for the running daemon to be healthy with LAN traffic
// leaving through its node.
func waitHealthy(ctx context.Context, l *lab.Lab) (lab.DaemonState, error) {
	st, err := l.WaitDaemon(ctx, healthyBudget, lab.DaemonState.Healthy)
	if err != nil {
		return st, fmt.Errorf("daemon never healthy: %w; daemon log tail:\n%s", err, logTail(l.DaemonLog(), 12))
	}
	addr := ""
	for _, n := range lab.Nodes {
		if n.Name == st.Node {
			addr = n.Addr.String()
		}
	}
	if addr == "" {
		return st, fmt.Errorf("daemon healthy on %q, not a lab node", st.Node)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := l.WaitClientExit(wctx, 0, addr); err != nil {
		return st, fmt.Errorf("daemon healthy on %s but the LAN client does not get out through it: %w", st.Node, err)
	}
	return st, nil
}

// traffic keeps a LAN client (and optionally the router itself) fetching
// the IP-echo host every interval until stopped, counting outcomes. It is
// the household in the leak and false-rotation experiments: without
// traffic there is nothing to leak.
type traffic struct {
	mu                  sync.Mutex
	lanOK, lanFail      int
	routerOK, routerErr int

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// requestTimeout is how long one household request may take before it
// counts as failed.
const requestTimeout = 3 * time.Second

// startTraffic starts the generator. router adds the router's own requests
// (router-originated traffic can leak too).
func startTraffic(ctx context.Context, l *lab.Lab, every time.Duration, router bool) *traffic {
	ctx, cancel := context.WithCancel(ctx)
	t := &traffic{cancel: cancel}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		var inflight sync.WaitGroup
		defer inflight.Wait()
		for i := 0; ; i++ {
			inflight.Add(1)
			go func(i int) {
				defer inflight.Done()
				rctx, rcancel := context.WithTimeout(ctx, requestTimeout)
				defer rcancel()
				_, err := l.ClientEcho(rctx, 0)
				t.mu.Lock()
				if err == nil {
					t.lanOK++
				} else if ctx.Err() == nil {
					t.lanFail++
				}
				t.mu.Unlock()
				// A DNS query straight to a foreign resolver: the
				// household's other way out (answered or not, it must not
				// leave outside the tunnel).
				_, _ = l.ClientResolve(rctx, 0, lab.ForeignDNS, lab.UniqueName("bench", "foreign.lab"), time.Second)
				if router {
					f := l.FetchFrom(rctx, lab.RoleRouter, lab.EchoURL(i))
					t.mu.Lock()
					if f.Err == nil && f.Status == 200 {
						t.routerOK++
					} else if ctx.Err() == nil {
						t.routerErr++
					}
					t.mu.Unlock()
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

// stop ends the generator and waits for requests in flight.
func (t *traffic) stop() {
	t.cancel()
	t.wg.Wait()
}

// counts returns the outcomes so far.
func (t *traffic) counts() (lanOK, lanFail, routerOK, routerFail int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lanOK, t.lanFail, t.routerOK, t.routerErr
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// logTail is the last n lines of a log.
func logTail(log string, n int) string {
	lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
