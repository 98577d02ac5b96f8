package watchdog

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"surflare-watchdog/src/preflight"
)

// Preflighter finds the local causes that stop the tunnel before any node
// is tried (package preflight; the daemon builds the input from its
// config). It is called at startup, every CheckInterval, on `check` and
// after a reload.
type Preflighter func(ctx context.Context) preflight.Report

// preflightDone is a finished preflight run.
type preflightDone struct {
	gen int
	r   preflight.Report
}

// blockerFacts are the preflight half of the facts.
type blockerFacts struct {
	// blocker is the finding that stops the tunnel (Check == "" when none).
	blocker preflight.Finding
	// openSetup: a router that never had a working tunnel (a fresh
	// install) lacks its account or the Surflare client: the kill switch
	// is dropped until both are there, so a new router does not lock its
	// LAN silently (nor the download of the client). A router that has
	// worked before keeps it armed.
	openSetup bool
}

func (b blockerFacts) blocked() bool { return b.blocker.Check != "" }

// runPreflightLocked runs the preflight in the background; its result
// arrives as preflightDone. A run already in flight is superseded.
func (w *Watchdog) runPreflightLocked() {
	w.preflightAt = w.clock.Now().Add(w.s.CheckInterval)
	if w.d.Preflight == nil {
		return
	}
	w.preflightGen++
	gen := w.preflightGen
	w.ops.Add(1)
	go func() {
		defer w.ops.Done()
		ctx, cancel := context.WithTimeout(w.opCtx, preflightTimeout)
		defer cancel()
		w.send(preflightDone{gen: gen, r: w.d.Preflight(ctx)})
	}()
}

// preflightTimeout bounds one run: the checks stat files and ask for a
// route, which takes milliseconds; a hung netlink socket must not hold
// the engine's knowledge back.
const preflightTimeout = 5 * time.Second

// startupPreflight runs the preflight once before the first connect, on
// the caller's goroutine (Run, before the loop starts).
func (w *Watchdog) startupPreflight(ctx context.Context) {
	if w.d.Preflight == nil {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, preflightTimeout)
	r := w.d.Preflight(pctx)
	cancel()
	w.mu.Lock()
	w.applyPreflightLocked(r)
	w.mu.Unlock()
}

func (w *Watchdog) onPreflightLocked(e preflightDone) {
	if e.gen != w.preflightGen {
		return
	}
	w.takePreflightLocked(e.r)
	w.updateLocked("preflight")
}

// takePreflightLocked applies a report and, when it clears the blocker
// while nothing is connected or scheduled, connects: the way back.
func (w *Watchdog) takePreflightLocked(r preflight.Report) {
	wasBlocked := w.f.pre.blocked()
	w.applyPreflightLocked(r)
	if wasBlocked && !w.f.pre.blocked() && w.f.started && !w.f.connected && !w.f.connecting &&
		w.retryAt.IsZero() && w.canAutoConnectLocked(w.clock.Now()) {
		w.startConnectLocked(w.node, "preflight clear", byEngine)
	}
}

// preflightNowLocked runs the preflight on the loop (it takes
// milliseconds) and takes its result, so the answer to a command already
// reflects it.
func (w *Watchdog) preflightNowLocked() {
	if w.d.Preflight == nil {
		return
	}
	w.takePreflightLocked(w.runPreflightSyncLocked())
}

// runPreflightSyncLocked runs the preflight on the loop; a run in flight
// is older than this one and is ignored.
func (w *Watchdog) runPreflightSyncLocked() preflight.Report {
	ctx, cancel := context.WithTimeout(w.opCtx, preflightTimeout)
	defer cancel()
	r := w.d.Preflight(ctx)
	w.preflightGen++
	w.preflightAt = w.clock.Now().Add(w.s.CheckInterval)
	return r
}

// applyPreflightLocked takes a report as the new facts: logs a blocker
// once when it appears (and when it goes), and sets the firewall for a
// fresh install that is not set up yet (blockerFacts.openSetup).
func (w *Watchdog) applyPreflightLocked(r preflight.Report) {
	w.preflight = &r
	b, blocked := r.Blocker()
	old := w.f.pre
	next := blockerFacts{}
	if blocked {
		next.blocker = b
		next.openSetup = w.mem.Node == "" && w.lastGood == "" && setupMissing(r)
	}
	switch {
	case blocked && old.blocker.Why != b.Why:
		w.logLocked(slog.LevelError, "Not connecting: "+r.Why(), "check", b.Check, "detail", b.Detail)
	case !blocked && old.blocked():
		w.logLocked(slog.LevelInfo, "Preflight clear: "+old.blocker.Check+" fixed; connecting")
		if old.blocker.Check == preflight.CheckWAN {
			w.wanBackLocked()
		}
	}
	if next.openSetup != old.openSetup {
		w.setOpenSetupLocked(next)
		return
	}
	w.f.pre = next
}

// setOpenSetupLocked moves the firewall into or out of the fresh-install
// mode; on failure the facts keep the kill switch (armed is the safe side).
func (w *Watchdog) setOpenSetupLocked(next blockerFacts) {
	f := w.f
	f.pre = next
	if next.openSetup {
		f.lanProxied = false
	}
	ctx, cancel := context.WithTimeout(w.opCtx, w.s.StopTimeout)
	err := w.d.Firewall.Set(ctx, firewallMode(f))
	cancel()
	if err != nil {
		w.logLocked(slog.LevelError, "Changing the kill switch for the account setup failed; it stays as it was", "err", err)
		next.openSetup = w.f.pre.openSetup
		w.f.pre = next
		return
	}
	w.f = f
	if next.openSetup {
		w.logLocked(slog.LevelWarn, "Kill switch off until the Surflare client and account are set up: this router never had a working tunnel, so the LAN uses the normal Internet connection for now")
	} else {
		w.logLocked(slog.LevelInfo, "Kill switch armed: the Surflare client and account are set up")
	}
}

// blockedErrLocked is the refusal of a user command that would try a node
// while a local cause stops every node. The preflight runs again first, on
// the loop (it takes milliseconds): a cause just fixed does not refuse the
// command, one that just appeared does not cost a node.
func (w *Watchdog) blockedErrLocked() error {
	if w.localCauseLocked() {
		w.updateLocked("preflight")
	}
	if !w.f.pre.blocked() {
		return nil
	}
	err := fmt.Errorf("%w: %s", ErrBlocked, w.preflight.Why())
	if d := w.f.pre.blocker.Detail; d != "" {
		err = fmt.Errorf("%w (%s)", err, d)
	}
	return err
}

// localCauseLocked runs the preflight now, on the loop, before a node is
// given up on (a failed connect, a rotation): when the router itself has
// lost what the tunnel needs since the last run (the client was removed,
// the WAN route went), the node is not to blame and is not marked failed.
func (w *Watchdog) localCauseLocked() bool {
	if w.d.Preflight == nil {
		return false
	}
	w.applyPreflightLocked(w.runPreflightSyncLocked())
	return w.f.pre.blocked()
}

// setupMissing: the report blocks on what a fresh install still has to
// set up (the account, the client), not on a fault of a set-up router.
func setupMissing(r preflight.Report) bool {
	for _, f := range r.Findings {
		if f.Severity == preflight.Blocker && (f.Check == preflight.CheckCredentials || f.Check == preflight.CheckVendor) {
			return true
		}
	}
	return false
}
