package watchdog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// startup: moat, a look at the vendor's tunnel (before cleanup stops it),
// the choice of the first node, crash cleanup, kill switch, ISP address.
// Only a kill switch that cannot be armed is fatal: connecting without it
// could leak. A healthy tunnel the kernel holds whole is adopted
// (adopt.go): the cleanup steps that would end it are skipped.
func (w *Watchdog) startup(ctx context.Context) (startPlan, error) {
	fw := w.d.Firewall
	intact := w.tunnelIntact(ctx)
	w.mu.Lock()
	w.f.adopting = intact
	mode := firewallMode(w.f) // the kill switch (LAN in the proxy while adopting)
	w.mu.Unlock()
	// The moat and the kill switch go in together, before anything else
	// (arming early is only safer); after the crash cleanup they are
	// applied again, and only then is a failure fatal.
	if err := fw.Set(ctx, mode); err != nil {
		w.log.Warn("Installing the moat counters failed; continuing without them", "err", err)
	}
	vt, haveVT := w.lookAtVendor(ctx)
	w.mu.Lock()
	var plan startPlan
	plan.node, plan.why = w.chooseStartLocked(vt, haveVT)
	if intact && haveVT {
		var why string
		if plan.adopt, why = w.adoptableLocked(vt, plan.node); !plan.adopt {
			w.log.Info("Not adopting the running tunnel: " + why)
		}
	}
	plan.vt = vt
	w.f.adopting = plan.adopt
	mode = firewallMode(w.f)
	w.mu.Unlock()
	if intact && !plan.adopt {
		// The LAN leaves the tunnel that did not pass before cleanup ends it.
		if err := fw.Set(ctx, mode); err != nil {
			w.log.Warn("Resetting the LAN before the cleanup failed", "err", err)
		}
	}
	for i, st := range w.d.Cleanup {
		if plan.adopt && !adoptSafeSteps[st.Name] {
			w.log.Debug(fmt.Sprintf("Crash cleanup %d/%d (%s) skipped: the tunnel is adopted", i+1, len(w.d.Cleanup), st.Name))
			continue
		}
		if err := st.Run(ctx); err != nil {
			w.log.Warn(fmt.Sprintf("Crash cleanup %d/%d (%s) failed", i+1, len(w.d.Cleanup), st.Name), "err", err)
		}
	}
	if err := fw.Set(ctx, mode); err != nil {
		return plan, fmt.Errorf("installing kill switch: %w", err)
	}
	if w.d.Network != nil {
		addr, err := w.d.Network.ISPAddr(ctx)
		if err != nil {
			w.log.Warn("Finding the ISP address failed; domestic exits are judged by country only", "err", err)
		} else {
			w.mu.Lock()
			w.ispAddr = addr
			w.mu.Unlock()
			w.log.Info("ISP address " + addr.String())
		}
	}
	return plan, ctx.Err()
}

// stop: firewall teardown policy, vendor processes, bounded auth wait, pid
// file — in that order, within about StopTimeout + AuthStopWait.
func (w *Watchdog) stop(ctx context.Context, open bool) {
	w.mu.Lock()
	w.f.stopping, w.f.stopOpen = true, open
	mode := firewallMode(w.f)
	w.updateLocked("stop requested")
	w.writeStateLocked()
	w.cancelCheckLocked()
	if w.vendorCancel != nil {
		w.vendorCancel()
	}
	vendorDone := w.vendorDone
	w.mu.Unlock()
	// Stop listening: operations still running drop their results.
	close(w.loopDone)
	// A connect sequence must not restore LAN tables after the teardown.
	if vendorDone != nil {
		select {
		case <-vendorDone:
		case <-w.clock.After(opStopWait):
			w.log.Warn("Stop: the connect sequence is still running")
		}
	}

	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.s.StopTimeout)
	defer cancel()
	w.mu.Lock()
	handover := w.handoverStopLocked()
	w.mu.Unlock()
	switch {
	case handover:
		// adopt.go: nothing of the tunnel or the tables is touched.
		w.log.Info("Stopping for a restart: the tunnel, the kill switch and the LAN tables stay for the next instance")
	case open:
		w.log.Warn("Stopping on request with open: removing the kill switch too")
	default:
		w.log.Info("Stopping: the kill switch stays armed")
	}
	if !handover {
		if err := w.d.Firewall.Set(sctx, mode); err != nil {
			w.log.Error("Firewall teardown failed", "err", err)
		}
		if err := w.d.Vendor.Disconnect(sctx); err != nil {
			w.log.Warn("Vendor disconnect failed; flushing its leftovers", "err", err)
			if err := w.d.Firewall.FlushVendor(sctx); err != nil {
				w.log.Error("Flushing the vendor table failed", "err", err)
			}
		}
	}
	if err := w.waitAuth(w.s.AuthStopWait); err != nil {
		w.log.Warn("Stop: " + err.Error())
	}
	// Every other operation got its context cancelled; the CLI calls in
	// them are killed with their process groups.
	w.mu.Lock()
	w.opCancel()
	w.mu.Unlock()
	w.waitOps(opStopWait)

	w.mu.Lock()
	w.f.stopped = true
	w.updateLocked("stopped")
	w.writeStateLocked()
	for id, ch := range w.subs {
		close(ch)
		delete(w.subs, id)
	}
	w.mu.Unlock()
	if w.d.Lock != nil {
		if err := w.d.Lock.Release(); err != nil {
			w.log.Warn("Releasing the instance lock failed", "err", err)
		}
	}
}

// opStopWait bounds each wait for background operations during stop; their
// contexts are already cancelled, so they normally end at once.
const opStopWait = 500 * time.Millisecond

// waitOps waits for background operations, at most d.
func (w *Watchdog) waitOps(d time.Duration) {
	done := make(chan struct{})
	go func() { w.ops.Wait(); close(done) }()
	select {
	case <-done:
	case <-w.clock.After(d):
		w.log.Warn("Stop: background operations still running")
	}
}

// Check runs a health check now (SIGUSR1). In diag mode the result is only
// recorded.
func (w *Watchdog) Check(ctx context.Context) error {
	_, err := w.check(ctx, false)
	return err
}

// onCheckRequestLocked acts on a detector's request (Inbox): a check
// starts only while the engine supervises a connected tunnel (healthy or
// degraded) and none is running. During a connect, a cooldown, a pause or
// a node probe the request is only noise: the engine is already doing
// what decides the tunnel's fate, or has chosen to wait. A request while a
// check runs can make that check a confirming one (promoteCheckLocked).
func (w *Watchdog) onCheckRequestLocked(r CheckRequest) {
	switch w.state {
	case StateHealthy, StateDegraded:
	default:
		w.log.Debug("Check request while not supervising a tunnel", "reason", r.Reason, "state", w.state)
		return
	}
	w.log.Info("Check requested by a detector", "reason", r.Reason)
	if !w.checkInFlight {
		w.startCheckLocked()
		return
	}
	// A check is already running: it answers this request too, and it
	// becomes a confirming one if the evidence has arrived since it began.
	w.promoteCheckLocked()
}

// Rotate connects to node, or to the next candidate when node is empty. A
// user command: the name is resolved first (an unknown one changes
// nothing), it is not rate limited, ends a storm cooldown and allows one
// more login after a fatal error. A switch away from a working tunnel that
// fails on the new node goes back to the old one (useraction.go).
func (w *Watchdog) Rotate(ctx context.Context, node string) error {
	_, err := w.rotate(ctx, node, false)
	return err
}

// Reconnect reconnects to the current node; a user command like Rotate.
func (w *Watchdog) Reconnect(ctx context.Context) error {
	_, err := w.reconnect(ctx, false)
	return err
}

// userConnectLocked clears what a user command overrides and connects.
func (w *Watchdog) userConnectLocked(node, reason string) {
	if w.f.pre.blocked() {
		w.node = node // tried once the preflight is clear
		return
	}
	if !w.f.cooldownUntil.IsZero() {
		w.f.cooldownUntil = time.Time{}
		w.logSince = w.stormAt
		// The firewall keeps the cooldown's kill-switch mode: the connect
		// below verifies a tunnel before the LAN goes into it.
	}
	clear(w.tried)
	clear(w.triedTransit)
	w.counters.FailedReconnects = 0
	w.accountRetries = 0
	w.f.auth.fatal = false
	w.startConnectLocked(node, reason, byUser)
}

// SetDiag turns diag mode on or off. On: tables stay as they are and the
// loop idles (no checks, rotation or reconnects start; one already running
// finishes). Off: a check (or a connect) starts at once.
func (w *Watchdog) SetDiag(ctx context.Context, on bool) error {
	return w.do(ctx, func() error {
		w.setDiagLocked(on)
		return nil
	})
}

// ToggleDiag flips diag mode (SIGUSR2).
func (w *Watchdog) ToggleDiag(ctx context.Context) error {
	return w.do(ctx, func() error {
		w.setDiagLocked(!w.f.diag)
		return nil
	})
}

func (w *Watchdog) setDiagLocked(on bool) {
	if w.f.diag == on {
		return
	}
	w.f.diag = on
	if on {
		w.logLocked(slog.LevelInfo, "Diag mode on: tables stay, the loop idles")
	} else {
		w.logLocked(slog.LevelInfo, "Diag mode off: resuming")
		w.resumeLocked()
	}
	w.updateLocked(fmt.Sprintf("diag %v", on))
}

// resumeLocked restarts work after a pause.
func (w *Watchdog) resumeLocked() {
	if w.f.pre.blocked() {
		w.localCauseLocked() // the WAN that just came back may be the cause
	}
	now := w.clock.Now()
	switch {
	case w.f.connecting:
	case w.f.connected:
		w.nextCheckAt = now
	default:
		w.scheduleConnectLocked(w.node, now, "resume")
	}
}

// WANDown pauses probing and rotation (hotplug ifdown): nothing a node can
// fix. A connect in progress is abandoned and retried on WANUp.
func (w *Watchdog) WANDown(ctx context.Context) error {
	return w.do(ctx, func() error {
		if w.f.wanDown {
			return nil
		}
		w.f.wanDown = true
		w.cancelCheckLocked()
		if w.f.connecting && w.vendorCancel != nil {
			w.vendorCancel()
			w.vendorGen++ // its result is moot
			w.f.connecting = false
		}
		w.logLocked(slog.LevelWarn, "WAN down: pausing probing and rotation")
		w.updateLocked("WAN down")
		return nil
	})
}

// WANUp resumes after WANDown.
func (w *Watchdog) WANUp(ctx context.Context) error {
	return w.do(ctx, func() error {
		if !w.f.wanDown {
			return nil
		}
		w.f.wanDown = false
		w.logLocked(slog.LevelInfo, "WAN up: resuming")
		w.wanBackLocked()
		if !w.f.diag && !w.f.probing {
			w.resumeLocked()
		}
		w.updateLocked("WAN up")
		return nil
	})
}

// Reload applies new settings (SIGHUP). A changed node, mode or transit
// reconnects; a reload also clears a fatal login error, since the user may
// have fixed the credentials.
func (w *Watchdog) Reload(ctx context.Context, s Settings) error {
	if err := s.Validate(); err != nil {
		return fmt.Errorf("reload: %w", err)
	}
	if s.MaxTransitions <= 0 {
		s.MaxTransitions = 20
	}
	return w.do(ctx, func() error {
		old := w.s
		w.s = s
		if s.Transit != old.Transit {
			w.transit = s.Transit // the user's choice replaces a switched one
		}
		w.counters.FailThreshold = s.FailThreshold
		w.logLocked(slog.LevelInfo, "Configuration reloaded")
		w.runPreflightLocked()
		if w.f.auth.fatal {
			w.f.auth.fatal = false
			w.f.auth.needed = true
			w.startAuthLocked()
		}
		if (s.Node != old.Node && s.Node != "") || s.Mode != old.Mode || s.Transit != old.Transit {
			node := w.node
			if s.Node != old.Node && s.Node != "" {
				node = s.Node
			}
			if !w.f.diag && !w.f.probing { // a probe reconnects when it ends
				w.userConnectLocked(node, "configuration changed")
			}
		}
		w.updateLocked("reload")
		return nil
	})
}

// ReloadFromSource reloads through Deps.LoadSettings; on error the current
// settings stay.
func (w *Watchdog) ReloadFromSource(ctx context.Context) error {
	if w.d.LoadSettings == nil {
		return errors.New("reload: no settings source configured")
	}
	s, err := w.d.LoadSettings()
	if err != nil {
		w.log.Error("Reload failed; keeping the current configuration", "err", err)
		return fmt.Errorf("reload: %w", err)
	}
	return w.Reload(ctx, s)
}

// Shutdown stops the watchdog. open removes the kill switch too (the user
// stops the service on purpose and asks for an open network); otherwise it
// stays armed.
func (w *Watchdog) Shutdown(ctx context.Context, open bool) error {
	return w.do(ctx, func() error {
		w.shutdown, w.shutdownOpen = true, open
		return nil
	})
}
