package watchdog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"surflare-watchdog/src/health"
	"surflare-watchdog/src/surflare"
)

// Connect-sequence errors the loop branches on.
var (
	errAuthNeeded = errors.New("vendor session needs a login")
	errPhase1     = errors.New("local tunnel state did not come up")
	errPhase2     = errors.New("data plane not proven")
)

// connectDone is a finished connect sequence.
type connectDone struct {
	gen  int
	node string
	r    health.Result
	err  error
}

// cooldownEntered reports the storm-cooldown teardown.
type cooldownEntered struct {
	gen int
	err error
}

// startVendorOpLocked runs fn as the single vendor operation: it cancels
// the previous one and starts only once that one has returned, so two CLI
// sequences never interleave.
func (w *Watchdog) startVendorOpLocked(fn func(ctx context.Context, gen int)) {
	if w.vendorCancel != nil {
		w.vendorCancel()
	}
	w.vendorGen++
	gen := w.vendorGen
	ctx, cancel := context.WithCancel(w.opCtx)
	w.vendorCancel = cancel
	prev := w.vendorDone
	done := make(chan struct{})
	w.vendorDone = done
	w.ops.Add(1)
	go func() {
		defer w.ops.Done()
		defer close(done)
		defer cancel()
		if prev != nil {
			<-prev
		}
		fn(ctx, gen)
	}()
}

// origin says who asked for a connect, which decides what the reconnect
// rate limit (ReconnectLimit per ReconnectWindow) makes of it.
type origin int

const (
	// byEngine: an automatic attempt (rotation, retry, cascade): limited
	// and counted.
	byEngine origin = iota
	// byEngineUnlimited: automatic, with a backoff of its own (startup,
	// account API retries): counted, never delayed.
	byEngineUnlimited
	// byUser: a user's rotate, reconnect or config change, and the switch
	// back after a user's switch failed. The budget is the engine's, for
	// its own attempts: a user's commands neither wait for it nor use it
	// up, so a few rotations by hand never leave the household without
	// automatic recovery.
	byUser
)

// startConnectLocked begins a connect to node, as origin allows.
func (w *Watchdog) startConnectLocked(node, reason string, o origin) {
	now := w.clock.Now()
	if o == byEngine && !w.rateAllowsLocked(now, node, reason) {
		return
	}
	if o != byUser {
		w.attempts, w.lastAttemptAt = w.attempts+1, now
	}
	w.counters.ConnectAttempts++
	w.cancelCheckLocked()
	w.retryAt, w.nextCheckAt = time.Time{}, time.Time{}
	w.f.connecting, w.f.connected = true, false
	w.f.lanProxied = false
	w.stopRefreshRetriesLocked()
	w.node = node
	w.connectStartedAt = now
	s := w.s
	s.Transit = w.transit
	// The sequence runs outside the loop: it gets the modes for its two
	// steps now, from the facts as they are and as they will be once the
	// tunnel is verified.
	verified := w.f
	verified.lanProxied = true
	modes := [2]FirewallMode{firewallMode(w.f), firewallMode(verified)}
	w.startVendorOpLocked(func(ctx context.Context, gen int) {
		r, err := w.connectSequence(ctx, s, node, now, modes)
		w.send(connectDone{gen: gen, node: node, r: r, err: err})
	})
	w.connectStartedLocked(node) // a user's action waiting for a login
	w.log.Info("Connecting to "+node, "reason", reason, "transit", s.Transit, "mode", s.Mode)
	w.updateLocked("connect " + node + ": " + reason)
}

// rateAllowsLocked applies the reconnect rate limit. When it holds the
// attempt back it schedules it for when the limit lets it go.
func (w *Watchdog) rateAllowsLocked(now time.Time, node, reason string) bool {
	until := w.rateLimitEndsLocked()
	if !now.Before(until) {
		w.rateLimitedUntil = time.Time{}
		return true
	}
	if !until.Equal(w.rateLimitedUntil) {
		w.logLocked(slog.LevelWarn, fmt.Sprintf("Reconnect rate limit: %d attempts without a lasting tunnel; next attempt in %s",
			w.attempts, until.Sub(now).Round(time.Second)), "node", node, "reason", reason)
	}
	w.rateLimitedUntil = until
	w.f.connecting = false
	w.scheduleConnectLocked(node, until, reason+" (after rate limit)")
	w.updateLocked("reconnect rate limit")
	return false
}

// rateLimitEndsLocked says when the reconnect rate limit lets the next
// automatic attempt go (the zero time: at once). It is storm protection
// with the habit of Kubernetes' CrashLoopBackOff: the first ReconnectLimit
// attempts without a lasting tunnel go at once, and each one after them
// waits for a backoff after the last, 1/20 of ReconnectWindow doubling up to
// the window (30 s, 1 min, 2 min, … 10 min at the defaults). A crash loop
// is so held to about 15 attempts in its first hour and 6 an hour after.
// The count starts again when a tunnel lasts (refundAttemptLocked) or the
// WAN returns (wanBackLocked), so a storm that is over never holds back
// the next, unrelated fault: the hard "6 in 10 minutes" this replaces left
// the LAN without a tunnel for 5 min in the 30 min chaos at shipped
// timings, a burst after a run of faults that had each been recovered.
func (w *Watchdog) rateLimitEndsLocked() time.Time {
	over := w.attempts - w.s.ReconnectLimit
	if over < 0 {
		return time.Time{}
	}
	win := w.s.ReconnectWindow
	backoff := win / 20
	for ; over > 0 && backoff < win; over-- {
		backoff *= 2
	}
	return w.lastAttemptAt.Add(min(backoff, win))
}

// refundAttemptLocked starts the rate limit's count again once a check
// passes at least CheckInterval after the current tunnel's connect started.
// The limit stops a loop of attempts that give no lasting tunnel (a node
// or a login that keeps failing, a proxy that dies seconds after each
// start); a tunnel that carried traffic through a periodic check ends such
// a loop. A tunnel that dies within CheckInterval leaves the count as it
// is, so a crash loop is still held back.
func (w *Watchdog) refundAttemptLocked(now time.Time) {
	start := w.connectStartedAt
	if start.IsZero() || now.Sub(start) < w.s.CheckInterval || w.attempts == 0 {
		return
	}
	w.attempts, w.rateLimitedUntil = 0, time.Time{}
}

// wanBackLocked gives the engine a fresh reconnect budget when the WAN
// comes back (hotplug ifup, or the preflight's WAN blocker clearing).
// Attempts made around a WAN outage failed, or were cut short, for a
// reason no node and no vendor server had, and the tunnel must come back
// at once when the WAN does (the chaos run at shipped timings saw 8 min
// 43 s of a dead proxy after a WAN outage). A flapping WAN still costs at
// most one budget per return.
func (w *Watchdog) wanBackLocked() {
	if w.attempts > 0 {
		w.log.Debug("WAN back: reconnect budget reset", "attempts", w.attempts)
	}
	w.attempts, w.rateLimitedUntil = 0, time.Time{}
}

// connectSequence brings node up and proves it: flush the vendor table,
// keep the kill switch armed, check auth, connect, phase 1 (local state,
// polled quickly), phase 2 (data plane), then send the LAN into the proxy.
// modes are the firewall's while connecting and once verified. It runs
// outside the loop and touches no watchdog state.
func (w *Watchdog) connectSequence(ctx context.Context, s Settings, node string, started time.Time, modes [2]FirewallMode) (health.Result, error) {
	fw, v := w.d.Firewall, w.d.Vendor
	if err := fw.FlushVendor(ctx); err != nil {
		w.log.Warn("Flushing the vendor table failed", "err", err)
	}
	if err := fw.Set(ctx, modes[0]); err != nil {
		return health.Result{}, fmt.Errorf("arming the kill switch: %w", err)
	}
	st, err := v.Status(ctx)
	if err != nil {
		return health.Result{}, fmt.Errorf("checking vendor status: %w", err)
	}
	switch st.State {
	case surflare.StateAuthNeeded:
		return health.Result{}, fmt.Errorf("%w (%s)", errAuthNeeded, st.Reason)
	case surflare.StateSubscriptionInactive:
		return health.Result{}, surflare.ErrSubscriptionInactive
	case surflare.StateConnected, surflare.StateUnknown:
		if err := v.Disconnect(ctx); err != nil {
			w.log.Warn("Disconnect before connect failed; flushing leftovers", "err", err)
			if err := fw.FlushVendor(ctx); err != nil {
				w.log.Warn("Flushing the vendor table failed", "err", err)
			}
		}
	}
	if err := v.Connect(ctx, node, s.Mode, s.Transit); err != nil {
		if errors.Is(err, surflare.ErrAuthNeeded) {
			return health.Result{}, fmt.Errorf("%w: %w", errAuthNeeded, err)
		}
		return health.Result{}, err
	}

	r, err := w.poll(ctx, s.Phase1Timeout, s.Phase1Poll, w.d.Prober.Local, func(r health.Result) bool { return r.Outcome == health.OK }, nil)
	if err != nil {
		return r, fmt.Errorf("%w within %s: %s", errPhase1, s.Phase1Timeout, r.Reason)
	}
	var refusedWhy string
	refused := func() bool {
		if w.urltestFailingSince(s, node, started) {
			refusedWhy = fmt.Sprintf("the proxy's urltest fails on %s via %s since the connect", node, s.Transit)
			return true
		}
		// The evidence the engine rotates on (corroborate.go), here
		// without waiting for urltest: its sources count only what they
		// saw on this node (the proxy logging our probes' connections
		// through it as failed to several destinations, the kernel's
		// signs on its sockets), so a dead next node is left in seconds
		// whatever the vendor's urltest cadence, not after Phase2Timeout.
		if w.d.Corroborator != nil {
			if why, broken := w.d.Corroborator.Corroborate(w.clock.Now(), node, s.Transit); broken {
				refusedWhy = why
				return true
			}
		}
		return false
	}
	r, err = w.poll(ctx, s.Phase2Timeout, s.Phase2Poll, w.d.Prober.Check, func(r health.Result) bool { return r.Outcome.Healthy() }, refused)
	if errors.Is(err, errGaveUp) {
		return r, fmt.Errorf("%w: %w: %s, and so do our probes (%s %s); not waiting %s",
			errPhase2, errGaveUp, refusedWhy, r.Outcome, r.Reason, s.Phase2Timeout)
	}
	if err != nil {
		return r, fmt.Errorf("%w within %s: %s %s", errPhase2, s.Phase2Timeout, r.Outcome, r.Reason)
	}
	if ctx.Err() != nil {
		return r, ctx.Err()
	}
	if err := fw.Set(ctx, modes[1]); err != nil {
		return r, fmt.Errorf("restoring LAN tables: %w", err)
	}
	return r, nil
}

var (
	errDeadline = errors.New("deadline")
	errGaveUp   = errors.New("gave up")
)

// minFailedProofs is how many failed data-plane probes it takes, with the
// proxy's own urltest failing on the node too, to give up on a new tunnel
// before Phase2Timeout: one failed probe may be a tunnel still warming up.
const minFailedProofs = 2

// poll calls probe every interval until ok or timeout. giveUp (may be nil)
// is asked after the minFailedProofs-th failed probe and each one after: a
// yes ends the wait early with errGaveUp.
func (w *Watchdog) poll(ctx context.Context, timeout, interval time.Duration, probe func(context.Context) health.Result, ok func(health.Result) bool, giveUp func() bool) (health.Result, error) {
	deadline := w.clock.Now().Add(timeout)
	for failed := 1; ; failed++ {
		r := probe(ctx)
		if ok(r) {
			return r, nil
		}
		if ctx.Err() != nil {
			return r, ctx.Err()
		}
		if giveUp != nil && failed >= minFailedProofs && giveUp() {
			return r, errGaveUp
		}
		left := deadline.Sub(w.clock.Now())
		if left <= 0 {
			return r, errDeadline
		}
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-w.clock.After(min(interval, left)):
		}
	}
}

// onConnectLocked acts on a finished connect sequence.
func (w *Watchdog) onConnectLocked(e connectDone) {
	if e.gen != w.vendorGen {
		w.supersededLocked(false, e.gen)
		return
	}
	w.f.connecting = false
	if w.fallBackLocked(e) { // a user's switch failed: back to the old node
		w.updateLocked("switch to " + e.node + " failed")
		return
	}
	defer w.connectAnsweredLocked(e)
	now := w.clock.Now()
	switch {
	case e.err == nil:
		w.f.connected, w.f.lanProxied = true, true
		w.node = e.node
		w.recordCheckLocked(e.r)
		w.accountRetries = 0
		w.logLocked(slog.LevelInfo, fmt.Sprintf("Connected to %s via %s", e.node, w.transit))
		if old := w.lastGood; old != "" && old != e.node && w.d.ConnKiller != nil {
			w.cutLocked(old)
		}
		w.lastGood = e.node
		w.markHealthyLocked()
		w.nextCheckAt = now.Add(w.s.CheckInterval)
		w.maybeRefreshLocked()
	case errors.Is(e.err, context.Canceled):
		// Whoever cancelled (stop, WAN down, a newer command) decides next.
	case errors.Is(e.err, errAuthNeeded):
		w.logLocked(slog.LevelWarn, "Vendor session needs a login; logging in in the background", "err", e.err)
		w.f.auth.needed = true
		w.startAuthLocked()
	case errors.Is(e.err, surflare.ErrSubscriptionInactive):
		w.enterSubscriptionCooldownLocked()
	case errors.Is(e.err, surflare.ErrAccountCheck):
		w.accountAPIDownLocked(e)
	default:
		if w.localCauseLocked() { // preflight.go: not the node's fault
			w.logLocked(slog.LevelWarn, "Connect to "+e.node+" failed: the cause is on this router, not the node", "err", e.err)
			break
		}
		w.accountRetries = 0
		w.counters.FailedReconnects++
		w.tried[e.node] = true
		w.rememberFailedLocked(e.node)
		w.logLocked(slog.LevelWarn, fmt.Sprintf("Connect to %s failed (%d in a row)", e.node, w.counters.FailedReconnects), "err", e.err)
		if w.f.diag || w.f.wanDown {
			break
		}
		switch {
		case w.counters.FailedReconnects >= w.s.CascadeAfter:
			w.logLocked(slog.LevelWarn, fmt.Sprintf("Cascade: %d failed reconnects, fast-rotating", w.counters.FailedReconnects))
			w.rotateFromLocked(e.node, "cascade")
		case w.freshErrorsLocked(e.node, w.connectStartedAt):
			// The proxy's own urltest failed on this node during the
			// attempt: not a transient, so a same-node retry only costs
			// time.
			w.logLocked(slog.LevelWarn, fmt.Sprintf("Cascade: log health shows %s via %s failing since the connect; fast-rotating", e.node, w.transit))
			w.rotateFromLocked(e.node, "cascade (log health)")
		case errors.Is(e.err, errGaveUp):
			// The connect gave up on evidence against the node (the
			// corroborator's, connectSequence): not a transient,
			// so a same-node retry only costs time.
			w.logLocked(slog.LevelWarn, fmt.Sprintf("Cascade: %s via %s failed its probes with evidence against it; fast-rotating", e.node, w.transit))
			w.rotateFromLocked(e.node, "cascade (evidence)")
		default:
			w.scheduleConnectLocked(e.node, now.Add(w.s.DegradedInterval), "retry after failed connect")
		}
	}
	w.updateLocked("connect " + e.node + " finished")
}

// accountAPIDownLocked: `surflare connect` could not reach the account API.
// The node is not to blame, so it is not marked failed and no rotation
// follows: the same node is retried with a doubling backoff
// (AccountRetryMin .. AccountRetryMax) while the kill switch stays armed.
// These retries have their own backoff and skip the reconnect rate limit.
func (w *Watchdog) accountAPIDownLocked(e connectDone) {
	w.accountRetries++
	d := backoff(w.s.AccountRetryMin, w.s.AccountRetryMax, w.accountRetries)
	w.logLocked(slog.LevelWarn, fmt.Sprintf("Account API unreachable: retrying %s in %s", e.node, d), "err", e.err)
	if w.f.diag || w.f.wanDown {
		return // resuming reconnects
	}
	w.maybeFallbackLoginLocked() // refresh.go: the token may have expired
	w.scheduleConnectLocked(e.node, w.clock.Now().Add(d), "account API unreachable")
	w.retryUnlimited = true
}

// backoff is lo doubled per attempt after the first (1-based), capped at hi.
func backoff(lo, hi time.Duration, attempt int) time.Duration {
	d := lo
	for i := 1; i < attempt && d < hi; i++ {
		d *= 2
	}
	return min(d, hi)
}

// cutLocked cuts connections pinned to old in the background.
func (w *Watchdog) cutLocked(old string) {
	ctx := w.opCtx
	w.ops.Add(1)
	go func() {
		defer w.ops.Done()
		if err := w.d.ConnKiller.CutConnections(ctx, old); err != nil {
			w.log.Warn("Cutting connections pinned to "+old+" failed", "err", err)
		}
	}()
}

// stormLocked: every candidate failed in this cycle. Cool down with the
// kill switch armed and domestic traffic flowing (see the package doc).
func (w *Watchdog) stormLocked() {
	now := w.clock.Now()
	w.counters.Storms++
	w.f.cooldownUntil = now.Add(w.s.StormCooldown)
	w.f.connected, w.f.connecting, w.f.lanProxied = false, false, false
	mode := firewallMode(w.f) // LAN TCP reset, domestic direct, kill switch kept
	w.retryAt, w.nextCheckAt = time.Time{}, time.Time{}
	w.cancelCheckLocked()
	w.stormAt = now
	w.logLocked(slog.LevelWarn, fmt.Sprintf("Storm protection triggered: all %d candidates failed; cooling down for %s (domestic traffic keeps working)",
		len(w.s.candidates()), w.s.StormCooldown))
	fw, v := w.d.Firewall, w.d.Vendor
	w.startVendorOpLocked(func(ctx context.Context, gen int) {
		if err := v.Disconnect(ctx); err != nil {
			w.log.Warn("Disconnect for cooldown failed; flushing leftovers", "err", err)
			if err := fw.FlushVendor(ctx); err != nil {
				w.log.Warn("Flushing the vendor table failed", "err", err)
			}
		}
		w.send(cooldownEntered{gen: gen, err: fw.Set(ctx, mode)})
	})
	w.updateLocked("storm protection")
}

func (w *Watchdog) onCooldownEnteredLocked(e cooldownEntered) {
	if e.err != nil && e.gen == w.vendorGen {
		w.logLocked(slog.LevelError, "Entering firewall cooldown failed", "err", e.err)
	}
}

// endCooldownLocked starts a fresh cycle on the configured transit: urltest
// errors from before the cooldown no longer count, and the first candidate
// not dead by newer ones is connected.
func (w *Watchdog) endCooldownLocked() {
	w.f.cooldownUntil = time.Time{}
	w.logSince = w.stormAt
	w.transit = w.s.Transit
	clear(w.tried)
	clear(w.triedTransit)
	w.counters.FailedReconnects = 0
	// The firewall stays as the cooldown left it (the kill switch mode)
	// until the next connect verifies a tunnel.
	cands := w.s.candidates()
	// tried is empty: this walks every candidate from the first.
	first, _ := w.pickNextLocked(cands[len(cands)-1], true)
	if first == "" {
		first = cands[0]
	}
	w.logLocked(slog.LevelInfo, "Storm cooldown over: starting a new cycle with "+first)
	if w.canAutoConnectLocked(w.clock.Now()) {
		w.startConnectLocked(first, "storm cooldown over", byEngine)
	} else {
		w.scheduleConnectLocked(first, w.clock.Now(), "storm cooldown over")
	}
	w.updateLocked("storm cooldown over")
}
