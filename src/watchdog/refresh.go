package watchdog

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"surflare-watchdog/src/surflare"
)

// Proactive login refresh (E9 in SURFLARE-CONTRACT.md).
//
// Behind the GFW the account API answers only through the tunnel, and the
// vendor's cached token expires; `connect` then fails "Account check
// failed". A login after the tunnel is lost therefore cannot work there:
// the token must be renewed while the tunnel is up. Every LoginRefresh the
// watchdog logs in again while the tunnel is healthy. A refresh never
// touches the tunnel (no reconnect, no rotation, no kill switch change) and
// a failed one is not a fault: it is logged, shown in status and tried
// again at the next interval. Its failures do not count towards fail-open,
// which is about the reactive login the household is waiting for.
//
// The same worker is the fallback when connects keep failing the account
// check (fallbackLoginAfter): a direct login, which works where the API is
// reachable without the tunnel (the old behaviour) and at worst fails
// retryably where it is not.

// refreshState is the refresh worker's bookkeeping, owned by the loop.
type refreshState struct {
	dueAt     time.Time // next refresh (zero: not scheduled)
	running   bool
	why       string // "refresh" or "fallback": what started the running round
	gen       int
	stopRetry context.CancelFunc // ends the running round's retries (not a login in flight)

	lastAt      time.Time // last attempt that finished
	lastOK      time.Time // last successful login, by any worker
	lastOutcome string    // "ok" or "failed"
	lastError   string
	failures    int // failed rounds in a row
	refreshes   int // successful refresh logins since start
}

// refreshAttempt is one login try of the refresh worker.
type refreshAttempt struct {
	gen, attempt int
	err          error
}

// refreshOver: the refresh worker stopped.
type refreshOver struct{ gen int }

// fallbackLoginAfter is how many connects in a row must fail the account
// check (3+6+12 s of backoff and more) before the watchdog tries a direct
// login: one failure is usually an unreachable API, a run of them with a
// token that may have expired is worth one login round.
const fallbackLoginAfter = 4

// fallbackLoginEvery spaces the fallback rounds: where the API cannot be
// reached without the tunnel each round fails anyway, and where a fatal
// answer (429) comes back a round a minute would make it worse.
const fallbackLoginEvery = 5 * time.Minute

// maybeFallbackLoginLocked is called after each connect that failed the
// account check (accountAPIDownLocked).
func (w *Watchdog) maybeFallbackLoginLocked() {
	r := w.refresh
	if w.accountRetries < fallbackLoginAfter || r.running || w.f.auth.running || w.f.auth.fatal {
		return
	}
	if !r.lastAt.IsZero() && w.clock.Now().Sub(r.lastAt) < fallbackLoginEvery {
		return
	}
	w.startRefreshLocked("fallback")
}

// tunnelUpLocked: the tunnel is verified and the last check passed, so a
// login now goes through it.
func (w *Watchdog) tunnelUpLocked() bool {
	f := w.f
	return f.started && !f.stopping && f.connected && !f.connecting && f.consecutiveFails == 0 &&
		!w.pausedLocked() && !f.auth.failOpen
}

// refreshWakeLocked is when the loop must wake for a refresh: only while
// the tunnel is up (otherwise the next passing check calls
// maybeRefreshLocked), so a refresh that is due but cannot run never
// spins the loop.
func (w *Watchdog) refreshWakeLocked() time.Time {
	if w.s.LoginRefresh <= 0 || w.refresh.running || w.f.auth.running || !w.tunnelUpLocked() {
		return time.Time{} // whatever ends the wait calls maybeRefreshLocked
	}
	return w.refresh.dueAt
}

// scheduleRefreshLocked sets the next refresh one interval after from.
func (w *Watchdog) scheduleRefreshLocked(from time.Time) {
	w.refresh.dueAt = time.Time{}
	if w.s.LoginRefresh > 0 {
		w.refresh.dueAt = from.Add(w.s.LoginRefresh)
	}
}

// loginSucceededLocked: a login by any worker renewed the token, so the
// next refresh is one interval from now.
func (w *Watchdog) loginSucceededLocked() {
	now := w.clock.Now()
	w.refresh.lastOK = now
	w.scheduleRefreshLocked(now)
}

// maybeRefreshLocked starts a refresh when one is due and the tunnel is up.
// Called on every tick and after every passing check or verified connect.
func (w *Watchdog) maybeRefreshLocked() {
	r := &w.refresh
	if w.s.LoginRefresh <= 0 {
		return
	}
	if !w.tunnelUpLocked() {
		return
	}
	if r.dueAt.IsZero() {
		// The first verified tunnel: the token's age is unknown, so the
		// first refresh comes one interval later.
		w.scheduleRefreshLocked(w.clock.Now())
		return
	}
	if !due(r.dueAt, w.clock.Now()) || r.running || w.f.auth.running {
		return
	}
	w.startRefreshLocked("refresh")
}

// startRefreshLocked starts one login round in the background. It runs
// outside the vendor operation: it changes nothing a connect depends on.
func (w *Watchdog) startRefreshLocked(why string) {
	r := &w.refresh
	if r.running || w.f.stopping {
		return
	}
	r.running, r.why = true, why
	r.gen++
	gen := r.gen
	retryCtx, stopRetry := context.WithCancel(w.opCtx)
	r.stopRetry = stopRetry
	loginCtx, s := w.opCtx, w.s
	w.ops.Add(1)
	go func() {
		defer w.ops.Done()
		defer stopRetry()
		defer w.send(refreshOver{gen: gen})
		w.loginTries(loginCtx, retryCtx, s, func(attempt int, err error) {
			w.send(refreshAttempt{gen: gen, attempt: attempt, err: err})
		})
	}()
	if why == "refresh" {
		w.log.Info("Refreshing the Surflare login while the tunnel is up")
	} else {
		w.logLocked(slog.LevelWarn, fmt.Sprintf("Connect failed the account check %d times in a row: the login token may have expired; trying a direct login", w.accountRetries))
	}
}

// stopRefreshRetriesLocked ends the retries of a running round when the
// tunnel it needs goes away; a login already running finishes (killing a
// vendor CLI mid-way can orphan its state, E7).
func (w *Watchdog) stopRefreshRetriesLocked() {
	if w.refresh.running && w.refresh.why == "refresh" && w.refresh.stopRetry != nil {
		w.refresh.stopRetry()
	}
}

func (w *Watchdog) onRefreshAttemptLocked(e refreshAttempt) {
	r := &w.refresh
	if e.gen != r.gen {
		return
	}
	now := w.clock.Now()
	r.lastAt = now
	w.counters.LoginAttempts++
	if e.err == nil {
		r.lastOutcome, r.lastError, r.failures = "ok", "", 0
		w.loginSucceededLocked()
		if r.why == "refresh" {
			r.refreshes++
			w.logLocked(slog.LevelInfo, fmt.Sprintf("Login refreshed; next refresh in %s", w.s.LoginRefresh))
		} else {
			w.logLocked(slog.LevelInfo, "Login succeeded")
			if !w.f.connected && !w.f.connecting {
				w.accountRetries = 0
				w.scheduleConnectLocked(w.node, now, "login succeeded")
				w.retryUnlimited = true
			}
		}
		w.updateLocked("login " + r.why + " succeeded")
		return
	}
	r.lastOutcome, r.lastError = "failed", e.err.Error()
	switch {
	case surflare.IsFatal(e.err):
		w.logLocked(slog.LevelWarn, fmt.Sprintf("Login %s failed (attempt %d, not retrying this round); the tunnel is not touched", r.why, e.attempt), "err", e.err)
	default:
		w.logLocked(slog.LevelWarn, fmt.Sprintf("Login %s failed (attempt %d); the tunnel is not touched", r.why, e.attempt), "err", e.err)
	}
	w.updateLocked("login " + r.why + " failed")
}

func (w *Watchdog) onRefreshOverLocked(e refreshOver) {
	r := &w.refresh
	if e.gen != r.gen {
		return
	}
	r.running, r.stopRetry = false, nil
	if r.lastOutcome == "failed" {
		r.failures++
		// Try again one interval after this round, not at once: the API
		// may stay unreachable for a while even through the tunnel.
		w.scheduleRefreshLocked(w.clock.Now())
	}
	w.updateLocked("login " + r.why + " over")
}

// loginTries is one login round: a try, then up to LoginRetries retries
// with delays from LoginBackoffMin doubling to LoginBackoffMax, until a
// success or a fatal error. Each login runs under loginCtx; the waits
// between them end early when retryCtx does. each is told every result.
func (w *Watchdog) loginTries(loginCtx, retryCtx context.Context, s Settings, each func(attempt int, err error)) {
	delay := s.LoginBackoffMin
	for attempt := 1; attempt <= s.LoginRetries+1; attempt++ {
		if attempt > 1 {
			select {
			case <-retryCtx.Done():
				return
			case <-w.clock.After(delay):
			}
			delay = min(delay*2, s.LoginBackoffMax)
		}
		err := w.d.Vendor.Login(loginCtx)
		if loginCtx.Err() != nil {
			return
		}
		each(attempt, err)
		if err == nil || surflare.IsFatal(err) {
			return
		}
	}
}

// accountWhyLocked is the why line while connects fail the account check
// (disconnected): plain about the cause, and red once the fallback login
// failed too, since the token then cannot be renewed from here.
func (w *Watchdog) accountWhyLocked(now time.Time) (string, string) {
	if w.accountRetries == 0 || w.retryAt.IsZero() {
		return "", ""
	}
	line := fmt.Sprintf("Kill switch on: Surflare cannot verify the account (%d connects in a row failed the account check); trying %s again in %s",
		w.accountRetries, orNode(w.retryNode, w.node), humanDuration(w.retryAt.Sub(now)))
	if w.accountRetries >= fallbackLoginAfter && w.refresh.lastOutcome == "failed" {
		return WhyAction, line + ". The login token has probably expired and the account API cannot be reached to renew it: where it answers only through the tunnel, keep login_refresh on"
	}
	return WhyWarn, line
}

// RefreshStatus is the proactive login refresh as status shows it.
type RefreshStatus struct {
	IntervalS int64      `json:"interval_s"` // 0: off
	Running   bool       `json:"running"`
	LastAt    *time.Time `json:"last_at,omitempty"` // last attempt
	AgeS      *int64     `json:"age_s,omitempty"`   // seconds since the last attempt
	Outcome   string     `json:"outcome,omitempty"` // ok or failed
	LastError string     `json:"last_error,omitempty"`
	LastOKAt  *time.Time `json:"last_ok_at,omitempty"` // last successful login
	NextAt    *time.Time `json:"next_at,omitempty"`
	Failures  int        `json:"failures"`  // failed rounds in a row
	Refreshes int        `json:"refreshes"` // successful refreshes since start
}

// refreshStatusLocked is the refresh part of Status.
func (w *Watchdog) refreshStatusLocked(now time.Time) *RefreshStatus {
	r := w.refresh
	st := &RefreshStatus{
		IntervalS: int64(w.s.LoginRefresh / time.Second), Running: r.running,
		Outcome: r.lastOutcome, LastError: r.lastError, Failures: r.failures, Refreshes: r.refreshes,
	}
	if !r.lastAt.IsZero() {
		t, age := r.lastAt, int64(now.Sub(r.lastAt)/time.Second)
		st.LastAt, st.AgeS = &t, &age
	}
	if !r.lastOK.IsZero() {
		t := r.lastOK
		st.LastOKAt = &t
	}
	if !r.dueAt.IsZero() && w.s.LoginRefresh > 0 {
		t := r.dueAt
		st.NextAt = &t
	}
	return st
}
