package daemon

import (
	"context"
	"sync/atomic"
	"time"

	"surflare-watchdog/src/config"
	"surflare-watchdog/src/detectors/idleprobe"
	"surflare-watchdog/src/firewall"
	"surflare-watchdog/src/watchdog"
)

// startIdleProbe sends one small request through an idle tunnel every
// main.idle_probe_interval (docs/idle-probe.md). The relays' SYN-ACKs the
// moat counts are the proof that LAN traffic is flowing: while they grow,
// the failed-connection signal watches the tunnel and the probe stays quiet.
// A miss only asks the engine for a check.
func (d *Daemon) startIdleProbe(ctx context.Context, c *config.Config) {
	every := c.Main.IdleProbeInterval
	if every <= 0 {
		d.log.Info("Idle probe off (idle_probe_interval 0): an idle dead node waits for the next check")
		return
	}
	var seen atomic.Uint64
	proven := func() bool {
		// The lean read the counter watch uses (firewall.FastCounters).
		cs := map[string]uint64{}
		if err := d.fw.fw.FastCounters(ctx, cs); err != nil {
			return false
		}
		v, ok := cs[firewall.CounterSynAckIn]
		return ok && seen.Swap(v) < v
	}
	active := func() bool {
		st := d.w.Status().State
		return st == watchdog.StateHealthy || st == watchdog.StateDegraded
	}
	d.goAux(ctx, "idle probe", func(ctx context.Context) error {
		idleprobe.Run(ctx, idleprobe.Options{
			Interval: every,
			Beat:     func(ctx context.Context) error { return d.prober.p.Load().Beat(ctx) },
			Proven:   proven,
			Active:   active,
			Miss: func(err error) {
				if node, _ := d.currentTunnel(); d.dets.idleMiss != nil {
					d.dets.idleMiss.record(time.Now(), node, err.Error()) // evidence for the check (daemon_connfail_evidence.go)
				}
				d.trigger("IDLE_PROBE: no answer through the idle tunnel: " + err.Error())
			},
		})
		return nil
	})
}
