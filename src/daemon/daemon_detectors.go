package daemon

import (
	"context"
	"net/netip"
	"path/filepath"
	"time"

	"surflare-watchdog/src/config"
	"surflare-watchdog/src/detectors"
	"surflare-watchdog/src/detectors/detect"
	"surflare-watchdog/src/detectors/loghealth"
	"surflare-watchdog/src/keepalive"
	"surflare-watchdog/src/relays"
	"surflare-watchdog/src/route"
	"surflare-watchdog/src/runfiles"
	"surflare-watchdog/src/watchdog"
)

// keepaliveCgroup is the proxy's cgroup: the default group on a router;
// with a run dir other than /run (a lab, a test) the instance's own
// (keepalive.InstanceCgroup), so daemons on one host never share or remove
// each other's group, and a lab finds its daemon's group to remove it.
func keepaliveCgroup(runDir string) string {
	if runDir == config.Default().Paths.RunDir {
		return ""
	}
	cg, err := keepalive.InstanceCgroup(runDir)
	if err != nil {
		// No cgroup2 where we can see it (e.g. under `ip netns exec`, which
		// mounts a fresh /sys without it): the clamp will say so.
		return ""
	}
	return cg
}

// trigger asks the engine for a check now (early detector, 503 storm,
// fast signals) through the inbox; it never blocks the caller, and the
// engine decides whether to act.
func (d *Daemon) trigger(reason string) {
	d.inbox.RequestCheck(reason)
}

// startDetectors builds and starts the detectors: keepalive clamp, 503
// monitor, log health (feeding the 503 monitor), loop guard and early
// detector (feeding the loop guard), and the proxy watch. A detector that
// cannot start is logged and left out; the watchdog runs without it.
func (d *Daemon) startDetectors(ctx context.Context, c *config.Config) error {
	s := d.dets
	runDir := c.Paths.RunDir
	cg := keepaliveCgroup(runDir)
	if err := keepalive.CleanupStale(cg); err != nil {
		d.log.Warn("Keepalive: cleaning up a stale cgroup failed", "err", err)
	}
	if c.Keepalive.Enabled {
		s.clamp, _ = keepalive.New(keepalive.Config{Idle: c.Keepalive.Idle, Interval: c.Keepalive.Interval,
			Count: c.Keepalive.Count, CgroupPath: cg}) // New logs the outcome itself
	}
	trig := d.trigger
	s.storm503, s.override503 = d.newStorm503(c, trig) // nil, nil when storm503.enabled=0 (daemon_switches.go)
	if s.override503 != nil && d.fast != nil {
		s.override503.SetFast(d.fast.logs) // nil when log health is off
	}
	if c.LogHealth.Enabled {
		o := loghealth.FromConfig(c, filepath.Join(runDir, runfiles.NodeHealthFile))
		o.OnLine = func(l loghealth.Line) {
			s.override503.Record(l) // ADR-0001 counts the current node's 503s only
			d.fast.observeLine(l)
		}
		o.OnError = d.fast.observeError
		// Read on change notices, not every 500 ms: a healthy proxy logs
		// nothing, and the fast signals see a line at once (Monitor.Run).
		o.Watch = loghealth.Inotify
		lh, err := loghealth.NewMonitor(o)
		if err != nil {
			d.log.Error("Log health disabled", "err", err)
		} else {
			s.lh = lh
			d.goAux(ctx, "log health", lh.Run)
		}
	}
	d.startLoopGuard(ctx, c)
	learner := relays.New(relays.Options{
		Conntrack:   relays.KernelConntrack{},
		ServerPorts: d.fw.fw.VendorServerPorts,
		LocalAddrs:  route.LocalAddrs,
		Add:         d.fw.AddRelays,
	})
	s.learner = learner
	d.goAux(ctx, "relay learner", learner.Run)
	if c.Main.StrictDirect {
		w := &serverPortsWatch{fw: d.fw, log: d.log, seen: map[uint16]bool{}}
		d.goAux(ctx, "server ports", w.run)
	}
	if c.Detector.Enabled {
		sampler, err := detect.NewProxySampler(detect.SamplerOptions{PIDs: d.procs.PIDs(c.Vendor.ProxyComm)})
		if err != nil {
			d.log.Error("Early detector disabled", "err", err)
		} else {
			o := detect.FromConfig(c, sampler, trig)
			s.tally = detect.NewNodeTally(func() string { n, _ := d.currentTunnel(); return n }, o.Threshold)
			o.OnSample = func(ctx context.Context, now time.Time, conns []detect.Conn) {
				s.tally.Observe(now, conns) // per-node kernel evidence (detect/pernode.go)
				var dsts []netip.AddrPort
				for _, c := range conns {
					if c.Outbound && c.State == detect.StateEstablished {
						dsts = append(dsts, c.Remote)
					}
				}
				learner.Observe(ctx, dsts)
			}
			wake := d.lanWake(ctx, c)
			if wake != nil {
				o.Wake = wake.C()
			}
			release := func() {
				sampler.Close()
				if wake != nil {
					wake.Close()
				}
			}
			det, err := detect.New(o)
			if err != nil {
				release()
				d.log.Error("Early detector disabled", "err", err)
			} else {
				s.det = det
				d.goAux(ctx, "early detector", func(ctx context.Context) error {
					defer release()
					return det.Run(ctx)
				})
			}
		}
	}
	if c.Main.IdleProbeInterval > 0 {
		s.idleMiss = &idleMissEvidence{} // fed by the idle probe and the 503 probe (the heartbeat), read by corroborator
	}
	s.proxy = &proxyWatch{procs: d.procs, comm: c.Vendor.ProxyComm, clamp: s.clamp, guard: s.guard, log: d.log}
	return nil
}

// stopDetectors releases what outlives the aux context: the clamp's cgroup.
func (d *Daemon) stopDetectors() {
	if err := d.dets.clamp.Close(); err != nil {
		d.log.Warn("Stopping the keepalive clamp failed", "err", err)
	}
}

// corroborator is the engine's evidence: the fast signals' (urltest,
// counters), the early detector's silent flows and the failed-connection
// burst; nil when none runs.
func (d *Daemon) corroborator() watchdog.Corroborator {
	var all detectors.AnyEvidence
	if e := d.fast.evidence(); e != nil {
		all = append(all, e)
	}
	if d.dets.tally != nil {
		// The early detector's silent flows and stalled handshakes, bound
		// to the node they were seen on (detect.NodeTally).
		all = append(all, d.dets.tally)
	} else if d.dets.det != nil {
		all = append(all, detectors.Silence{Det: d.dets.det})
	}
	if d.fast != nil && d.fast.conns != nil {
		all = append(all, d.fast.conns) // daemon_connfail_evidence.go
	}
	if d.dets.idleMiss != nil {
		all = append(all, d.dets.idleMiss)
	}
	if len(all) == 0 {
		return nil
	}
	return all
}
