package watchdog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"surflare-watchdog/src/surflare"
)

// statusDone is a background `surflare status` answer.
type statusDone struct {
	st  surflare.Status
	err error
}

// loginAttempt is one login try by the worker.
type loginAttempt struct {
	gen     int
	attempt int
	err     error
}

// loginRoundOver: the worker stopped (success, fatal or retries used up).
type loginRoundOver struct{ gen int }

// startAuthCheckLocked asks the vendor, in the background, whether the
// session is still valid. Reactive: called after a failed check.
func (w *Watchdog) startAuthCheckLocked() {
	a := &w.f.auth
	if a.checking || a.running || a.fatal || !a.subscriptionUntil.IsZero() {
		return
	}
	a.checking = true
	ctx := w.opCtx
	w.ops.Add(1)
	go func() {
		defer w.ops.Done()
		st, err := w.d.Vendor.Status(ctx)
		w.send(statusDone{st: st, err: err})
	}()
}

func (w *Watchdog) onStatusLocked(e statusDone) {
	w.f.auth.checking = false
	if e.err != nil {
		return
	}
	switch e.st.State {
	case surflare.StateAuthNeeded:
		w.logLocked(slog.LevelWarn, "Vendor session needs a login: "+e.st.Reason)
		w.f.auth.needed = true
		w.startAuthLocked()
	case surflare.StateSubscriptionInactive:
		w.enterSubscriptionCooldownLocked()
	}
	w.updateLocked("vendor status " + string(e.st.State))
}

// enterSubscriptionCooldownLocked: no login, no connect for a while.
func (w *Watchdog) enterSubscriptionCooldownLocked() {
	w.f.auth.subscriptionUntil = w.clock.Now().Add(w.s.SubscriptionCooldown)
	w.f.auth.needed = false
	w.retryAt = time.Time{}
	w.logLocked(slog.LevelError, fmt.Sprintf("Subscription not active: not logging in; checking again in %s", w.s.SubscriptionCooldown))
	w.updateLocked("subscription not active")
}

// startAuthLocked starts the login worker unless it runs or a fatal error
// stopped it.
func (w *Watchdog) startAuthLocked() {
	a := &w.f.auth
	if a.running || a.fatal || w.f.stopping {
		return
	}
	a.running = true
	w.authRetryAt = time.Time{}
	w.authGen++
	gen := w.authGen
	ctx, cancel := context.WithCancel(w.opCtx)
	w.authCancel = cancel
	done := make(chan struct{})
	w.authDone = done
	s := w.s
	go func() {
		defer close(done)
		defer cancel()
		w.loginRound(ctx, s, gen)
	}()
	w.updateLocked("login started")
}

// loginRound tries to log in: once, then up to LoginRetries retries with
// delays from LoginBackoffMin doubling to LoginBackoffMax. It stops at the
// first success or fatal error. It reports each attempt to the loop and
// never blocks it.
func (w *Watchdog) loginRound(ctx context.Context, s Settings, gen int) {
	defer w.send(loginRoundOver{gen: gen})
	w.loginTries(ctx, ctx, s, func(attempt int, err error) {
		w.send(loginAttempt{gen: gen, attempt: attempt, err: err})
	})
}

func (w *Watchdog) onLoginLocked(e loginAttempt) {
	if e.gen != w.authGen {
		return
	}
	a := &w.f.auth
	w.counters.LoginAttempts++
	if e.err == nil {
		w.logLocked(slog.LevelInfo, "Login succeeded")
		w.loginSucceededLocked()
		wasOpen := a.failOpen
		// The worker returns right after a success; it is done.
		*a = authFacts{checking: a.checking}
		w.counters.LoginFailures = 0
		if wasOpen {
			ctx, cancel := context.WithTimeout(w.opCtx, w.s.StopTimeout)
			err := w.d.Firewall.Set(ctx, firewallMode(w.f))
			cancel()
			if err != nil {
				a.failOpen = true
				w.logLocked(slog.LevelError, "Re-arming the kill switch after fail-open failed", "err", err)
			} else {
				w.logLocked(slog.LevelInfo, "Kill switch re-armed after fail-open")
			}
		}
		if !w.f.connected && !w.f.connecting {
			w.scheduleConnectLocked(w.node, w.clock.Now(), "login succeeded")
		}
		w.updateLocked("login succeeded")
		return
	}
	a.failures++
	w.counters.LoginFailures = a.failures
	a.lastError = e.err.Error()
	w.loginFailedLocked(e.err) // a user's action waiting for this login
	if surflare.IsFatal(e.err) {
		a.fatal = true
		w.logLocked(slog.LevelError, "Login failed (fatal): not retrying until the config is reloaded or a reconnect is requested", "err", e.err)
	} else {
		w.logLocked(slog.LevelWarn, fmt.Sprintf("Login failed (attempt %d, will retry)", e.attempt), "err", e.err)
	}
	w.maybeFailOpenLocked()
	w.updateLocked("login failed")
}

// maybeFailOpenLocked drops the kill switch after FailOpenAfter failed
// logins, only when the user enabled fail-open.
func (w *Watchdog) maybeFailOpenLocked() {
	a := &w.f.auth
	if a.failOpen || a.failures < w.s.FailOpenAfter {
		return
	}
	if !w.s.FailOpen {
		if a.failures == w.s.FailOpenAfter {
			w.logLocked(slog.LevelWarn, fmt.Sprintf("%d login failures; fail_open is off, the kill switch stays armed", a.failures))
		}
		return
	}
	ctx, cancel := context.WithTimeout(w.opCtx, w.s.StopTimeout)
	defer cancel()
	open := w.f
	open.auth.failOpen, open.lanProxied = true, false
	if err := w.d.Firewall.Set(ctx, firewallMode(open)); err != nil {
		w.logLocked(slog.LevelError, "Fail-open failed; the kill switch stays armed", "err", err)
		return
	}
	a.failOpen, w.f.lanProxied = true, false
	w.logLocked(slog.LevelWarn, fmt.Sprintf("Fail-open: %d login failures; kill switch dropped, traffic is NOT protected until login succeeds", a.failures))
}

func (w *Watchdog) onLoginRoundOverLocked(e loginRoundOver) {
	if e.gen != w.authGen {
		return
	}
	a := &w.f.auth
	a.running = false
	w.authCancel = nil
	if !a.fatal && a.needed && !w.f.stopping {
		w.authRetryAt = w.clock.Now().Add(w.s.LoginBackoffMax)
	}
	w.updateLocked("login round over")
}

// waitAuth cancels the login worker and waits for it at most d.
func (w *Watchdog) waitAuth(d time.Duration) error {
	w.mu.Lock()
	cancel, done := w.authCancel, w.authDone
	w.mu.Unlock()
	if cancel == nil || done == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
		return nil
	case <-w.clock.After(d):
		return errors.New("login worker did not stop in time")
	}
}
