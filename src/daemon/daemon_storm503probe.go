package daemon

import (
	"context"
	"fmt"
	"time"

	"surflare-watchdog/src/config"
	"surflare-watchdog/src/detectors/storm503"
	"surflare-watchdog/src/watchdog"
)

// startStorm503Probe asks the vendor's urltest endpoint through the tunnel
// every storm503.probe_interval (storm503.Probe): a 503 storm of the exit
// in use is seen within about one interval whatever the vendor's urltest
// cadence, and the 503 override (ADR-0001) reads it. Off with the 503
// monitor (storm503.enabled=0), with probe_interval 0 and in mode direct.
// In mode rule the URL must be one the vendor tunnels (stock sing-box's
// urltest URL is Google's, on the vendor's list as the probes' search
// host is).
func (d *Daemon) startStorm503Probe(ctx context.Context, c *config.Config) {
	s := d.dets
	if s.override503 == nil || c.Storm503.ProbeInterval <= 0 {
		return
	}
	if c.Main.Mode == config.ModeDirect {
		// Nothing goes through the tunnel: a 503 would be the site's own,
		// not an exit's.
		d.log.Info("503 probe off: mode direct sends everything direct")
		return
	}
	p := storm503.NewProbe(storm503.ProbeOptions{
		Interval:     c.Storm503.ProbeInterval,
		ActiveWindow: c.Storm503.ActiveWindow,
		URL:          c.Storm503.ProbeURL,
		Ask: func(ctx context.Context) (int, error) {
			// Bounded by probe_timeout (5 s), not the idle probe's 2 s:
			// this probe also runs under LAN traffic on a lossy line, and
			// a miss (two asks in a row with no answer) asks for a
			// confirming check that its evidence lets rotate. A dead node
			// refuses at once; only a black hole waits the timeouts out.
			return d.prober.p.Load().TunnelStatus(ctx, c.Storm503.ProbeURL)
		},
		Miss: func(node string, err error) {
			// The probe's requests prove the path to the idle probe's
			// counter, so the idle probe stays quiet while it runs: it is
			// the heartbeat then (idle_probe_interval 0 keeps it off).
			if d.dets.idleMiss == nil {
				return
			}
			d.dets.idleMiss.record(time.Now(), node, err.Error())
			d.trigger("IDLE_PROBE: no answer through the tunnel (the 503 probe, twice in a row): " + err.Error())
		},
		Node: func() string { n, _ := d.currentTunnel(); return n },
		Active: func() bool {
			st := d.w.Status().State
			return st == watchdog.StateHealthy || st == watchdog.StateDegraded
		},
		Trigger: d.trigger,
	})
	s.probe503 = p
	s.override503.SetProbe(p)
	d.log.Info(fmt.Sprintf("503 probe: %s through the tunnel every %s", c.Storm503.ProbeURL, c.Storm503.ProbeInterval))
	d.goAux(ctx, "503 probe", func(ctx context.Context) error {
		p.Run(ctx)
		return nil
	})
}
