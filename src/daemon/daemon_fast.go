package daemon

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"surflare-watchdog/src/config"
	"surflare-watchdog/src/detectors"
	"surflare-watchdog/src/detectors/fastsignal"
	"surflare-watchdog/src/detectors/loghealth"
	"surflare-watchdog/src/watchdog"
)

// fastDetectors are the cheap signals that ask the engine for a check at
// once (package fastsignal): the proxy's exit (pidfd), the current node's
// urltest failures in the last seconds, and jumps of the kill switch's and
// the moat's counters. Their evidence also lets one failed check rotate
// (watchdog.Corroborator). Any part may be nil.
type fastDetectors struct {
	tracker  *fastsignal.ProxyTracker
	logs     *fastsignal.LogWatch
	counters *fastsignal.CounterWatch
	conns    *connFailWatch // failed LAN connections in the proxy log
	// since is when a node came into use (Daemon.nodeSince): counter jumps
	// from before it are the previous node's.
	since func(node string) time.Time
	// proxyChanged fires when the tracker finds a new set of proxy pids
	// (nil without the tracker): the proxy watch follows it instead of
	// polling every second.
	proxyChanged chan struct{}
	// gen is the tunnel's generation (tunnelID): newTunnel moves it.
	gen atomic.Uint64
}

// newTunnel tells the fast signals a new tunnel is in use: a connect
// finished (isNewTunnel) or the proxy tracker found a new proxy process.
// What was read before it is the old tunnel's.
func (f *fastDetectors) newTunnel() {
	if f != nil {
		f.gen.Add(1)
	}
}

// isNewTunnel reports an event that ends a connect: every connect enters
// connecting (watchdog.nextState), and whatever follows it, the tunnel
// is another one than before it started.
func isNewTunnel(ev watchdog.Event) bool {
	return ev.Type == watchdog.EventTransition && ev.Transition != nil &&
		ev.Transition.From == watchdog.StateConnecting
}

// currentTunnelID is the tunnel in use as the engine's events and the proxy
// tracker last said.
func (d *Daemon) currentTunnelID() tunnelID {
	n, _ := d.currentTunnel()
	return tunnelID{node: n, gen: d.fast.gen.Load()}
}

// proxyChanges is proxyChanged, nil when there is no tracker.
func (f *fastDetectors) proxyChanges() <-chan struct{} {
	if f == nil {
		return nil
	}
	return f.proxyChanged
}

// observeError feeds the failed-connection signal an ERROR line of the
// proxy log (log health's reader hands them over).
func (f *fastDetectors) observeError(line string) {
	if f != nil && f.conns != nil {
		f.conns.observe(line)
	}
}

// proxyCache is the proxy tracker behind nsProcs (shared by every copy).
type proxyCache struct {
	v atomic.Pointer[proxyCacheEntry]
}

type proxyCacheEntry struct {
	comm string
	t    *fastsignal.ProxyTracker
}

func (c *proxyCache) tracker(name string) *fastsignal.ProxyTracker {
	if c == nil {
		return nil
	}
	if e := c.v.Load(); e != nil && e.comm == name {
		return e.t
	}
	return nil
}

// pids answers from the tracker when every pid it knows is still alive by
// its stat (one small read each). known is false — the caller scans /proc —
// when it cannot: not running yet, another name, no proxy known (one may
// have just started: the connection killer must never mistake a new
// proxy's sockets for the old one's), or a known pid gone; the tracker is
// poked then, so its own cache follows.
func (c *proxyCache) pids(name string) (pids []int, known bool) {
	t := c.tracker(name)
	if t == nil {
		return nil, false
	}
	pids, err := t.PIDs()
	if err != nil || len(pids) == 0 {
		return nil, false
	}
	for _, p := range pids {
		if !fastsignal.ProcAlive(p) {
			t.Poke()
			return nil, false
		}
	}
	return pids, true
}

// alive is true (known) when a tracked pid is alive; otherwise a real
// scan decides.
func (c *proxyCache) alive(name string) (alive, known bool) {
	_, ok := c.pids(name)
	return ok, ok
}

// startFast builds and starts the fast signals the config switches on
// (section fastsignal). Call it before startDetectors (the detectors' proxy
// scans go through the tracker) and before the engine is built (its
// Corroborator is d.fast.evidence()). A signal that is off is not built:
// no goroutine, no evidence, and nothing of it in status; without the
// proxy exit watch the pid cache is empty too, so pid questions fall back
// to a /proc scan (proxyCache.pids).
func (d *Daemon) startFast(ctx context.Context, c *config.Config) {
	f := &fastDetectors{since: d.nodeSince}
	d.fast = f
	sw := c.FastSignal
	if !sw.ProxyExitOn() && !sw.NodeLogOn() && !sw.CountersOn() && !sw.ConnFailOn() {
		d.log.Info("Fast signals off (fastsignal): failures wait for the next health check")
		return
	}
	trig := d.trigger
	comm := c.Vendor.ProxyComm

	if sw.ProxyExitOn() {
		changed := make(chan struct{}, 1)
		t, err := fastsignal.NewProxyTracker(fastsignal.TrackerOptions{
			Find: func() ([]int, error) { return d.procs.scanPIDs(comm) },
			OnChange: func([]int) {
				f.newTunnel() // a new proxy process (OnChange reports only non-empty sets)
				select {
				case changed <- struct{}{}:
				default:
				}
			},
			OnExit: func(pid int) {
				d.log.Warn(fmt.Sprintf("Proxy exited: pid %d", pid))
				trig(fmt.Sprintf("PROXY_EXIT: %s (pid %d) exited", comm, pid))
			},
		})
		if err != nil {
			d.log.Error("Proxy tracker disabled", "err", err)
		} else {
			f.tracker, f.proxyChanged = t, changed
			d.procs.proxy.v.Store(&proxyCacheEntry{comm: comm, t: t})
			d.goAux(ctx, "proxy tracker", t.Run)
		}
	}

	// The log signal has no reader of its own: log health feeds it
	// (observeLine), so it needs log health on as well.
	if sw.NodeLogOn() && c.LogHealth.Enabled {
		lw, err := fastsignal.NewLogWatch(fastsignal.LogOptions{
			Current: d.currentTunnel, Nodes: c.Main.Candidates, Trigger: trig,
		})
		if err != nil {
			d.log.Error("Fast log signal disabled", "err", err)
		} else {
			f.logs = lw
		}
	}

	if sw.ConnFailOn() && c.LogHealth.Enabled {
		cw, err := newConnFailWatch(c, d.currentTunnelID, trig)
		if err != nil {
			d.log.Error("Failed-connection signal disabled", "err", err)
		} else {
			f.conns = cw
		}
	}

	if sw.CountersOn() {
		o := fastsignal.CounterOptions{Read: d.readFastCounters, Watch: detectors.CounterRule, Trigger: trig}
		wake := d.counterWake(ctx) // daemon_counterwake.go
		if wake != nil {
			o.Wake = wake.C()
		}
		cw, err := fastsignal.NewCounterWatch(o)
		if err != nil {
			if wake != nil {
				wake.Close()
			}
			d.log.Error("Counter watch disabled", "err", err)
		} else {
			f.counters = cw
			d.goAux(ctx, "counter watch", func(ctx context.Context) error {
				if wake != nil {
					defer wake.Close()
				}
				return cw.Run(ctx)
			})
		}
	}
}

// readFastCounters is the kill switch's counters and the moat's, in one
// map (their names do not overlap; the counter rule picks the watched
// ones). FastCounters is the lean read made for this once-a-second caller.
func (d *Daemon) readFastCounters(ctx context.Context) (map[string]uint64, error) {
	out := map[string]uint64{}
	if err := d.fw.fw.FastCounters(ctx, out); err != nil {
		return nil, err
	}
	return out, nil
}

// observeLine feeds log health's urltest errors to the short window.
func (f *fastDetectors) observeLine(l loghealth.Line) {
	if f != nil && f.logs != nil {
		f.logs.Observe(l)
	}
}

// evidence is the engine's Corroborator, nil when no source runs.
func (f *fastDetectors) evidence() watchdog.Corroborator {
	if f == nil || (f.logs == nil && f.counters == nil) {
		return nil
	}
	return fastsignal.Evidence{Log: f.logs, Counters: f.counters, Names: detectors.EvidenceCounters, Since: f.since}
}

// pokeTracker rescans for the proxy at once (a transition: a connect
// started or finished one).
func (f *fastDetectors) pokeTracker() {
	if f != nil && f.tracker != nil {
		f.tracker.Poke()
	}
}
