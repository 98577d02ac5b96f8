package watchdog

import (
	"context"
	"fmt"
	"log/slog"
)

// Adopting a healthy tunnel at startup, and handing one over at a stop.
//
// A restart of the daemon (procd restart, an upgrade, systemd's restart, a
// crash and respawn) used to cost the household a reconnect: startup looked
// at the vendor's tunnel, then crash cleanup killed the proxy and flushed
// its table, and the connect sequence built a new one while the LAN was
// reset (4-6 failed LAN requests per restart in the bench). Now a tunnel is
// kept when all of this holds:
//
//   - the kernel holds the whole of it, as a previous instance left it after
//     verifying it (Deps.TunnelIntact: the vendor's table, the fwmark rule
//     and table 100's route, a listener on the proxy port and, on a router,
//     the LAN tproxy live, not tombstoned);
//   - the vendor says it is connected, in the configured mode, and the
//     health check (both layers) passes within startupLookBudget;
//   - the node is the one startup would choose anyway (chooseStartLocked:
//     a known node, not failed in the open cycle, not dead in log health).
//
// Then nothing of the tunnel is touched: no disconnect, no connect, the
// crash-cleanup steps that would end it are skipped, and the kill switch
// and the LAN tables are applied again over it (the LAN never leaves the
// proxy: the first apply of the startup already has it there). Anything
// less, and startup goes the old way: LAN reset, cleanup, a fresh connect.
//
// While the tunnel is looked at, the LAN stays in the proxy the previous
// instance verified. That is no wider than the supervision window of a
// running daemon (a tunnel that breaks between two checks carries the LAN
// until the next check sees it); the look is one check, at most 5 s.

// adoptSafeSteps are the crash-cleanup steps (by their CrashCleanup
// names) that leave a running tunnel alone; every other step, including
// any added later, is skipped when a tunnel is adopted: a step that was
// not meant for a healthy tunnel must not be the one that breaks it.
var adoptSafeSteps = map[string]bool{
	"zombies":              true,
	"orphaned trace table": true,
	"stale IPC files":      true,
}

// startPlan is what startup decided: the first node and why, and whether
// the running tunnel is adopted instead of connected anew.
type startPlan struct {
	node, why string
	adopt     bool
	vt        vendorTunnel
}

// tunnelIntact asks Deps.TunnelIntact, bounded like the rest of the look.
func (w *Watchdog) tunnelIntact(ctx context.Context) bool {
	if w.d.TunnelIntact == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, startupLookBudget)
	defer cancel()
	ok, why := w.d.TunnelIntact(ctx)
	if !ok {
		if why != "" {
			w.log.Info("No whole tunnel to adopt: "+why, "reason", why)
		}
		return false
	}
	w.log.Info("The kernel holds a whole tunnel: " + why)
	return true
}

// adoptableLocked reports whether the healthy vendor tunnel vt can be kept
// with the settings as they are now; node is startup's choice.
func (w *Watchdog) adoptableLocked(vt vendorTunnel, node string) (bool, string) {
	switch {
	case node != vt.node:
		return false, fmt.Sprintf("startup chose %s, not the running %s", node, vt.node)
	case vt.mode != "" && w.s.Mode != "" && vt.mode != w.s.Mode:
		return false, fmt.Sprintf("it runs in %s mode, the config says %s", vt.mode, w.s.Mode)
	}
	return true, ""
}

// adoptLocked takes the running tunnel over as if a connect to vt.node had
// just been verified by vt.check: connected, LAN in the proxy, a healthy
// cycle, the next check one interval away. No connect is counted.
func (w *Watchdog) adoptLocked(vt vendorTunnel) {
	now := w.clock.Now()
	w.f.adopting = false
	w.f.connected, w.f.lanProxied = true, true
	w.node = vt.node
	w.recordCheckLocked(vt.check)
	w.lastGood = vt.node
	w.markHealthyLocked()
	w.nextCheckAt = now.Add(w.s.CheckInterval)
	w.logLocked(slog.LevelInfo, fmt.Sprintf("Adopted the running tunnel on %s via %s: no reconnect", vt.node, w.transit),
		"exit", vt.check.ExitCountry)
}

// Handover stops the watchdog for a restart: like Shutdown, but the tunnel,
// the kill switch and the LAN tables stay exactly as they are, for the next
// instance to adopt (init scripts ask for it on restart; a plain stop ends
// the tunnel).
func (w *Watchdog) Handover(ctx context.Context) error {
	return w.do(ctx, func() error {
		w.shutdown, w.handover = true, true
		return nil
	})
}

// handoverStopLocked reports whether this stop hands the tunnel over.
func (w *Watchdog) handoverStopLocked() bool { return w.handover && !w.f.stopOpen }
