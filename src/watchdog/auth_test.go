package watchdog

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"surflare-watchdog/src/surflare"
)

var (
	errRetry = &surflare.LoginError{Reason: "dial tcp: i/o timeout"}
	errFatal = &surflare.LoginError{Fatal: true, Reason: "Too Many Requests: 429"}
)

func TestAuthExpiredLoginInBackgroundWhileHealthContinues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		h := start(t, testSettings(t), wd)
		h.advance(time.Minute)
		// The session expires: the tunnel stops working and status says so.
		// Four logins fail (retryable), the fifth succeeds: that takes longer
		// than the failure threshold (4 checks, 10 s apart).
		wd.set(func(w *world) { w.authGone = true; w.logins = []error{errRetry, errRetry, errRetry, errRetry, nil} })
		h.advance(30 * time.Second) // failed check -> background status -> login #1
		h.advance(70 * time.Second)
		got := wd.get()
		if len(got.loginAt) != 5 {
			t.Fatalf("logins at %v, want 5", got.loginAt)
		}
		var gaps []time.Duration
		for i := 1; i < len(got.loginAt); i++ {
			gaps = append(gaps, got.loginAt[i]-got.loginAt[i-1]-2*time.Second) // minus the 2 s attempt
		}
		if want := []time.Duration{3 * time.Second, 6 * time.Second, 12 * time.Second, 24 * time.Second}; !slices.Equal(gaps, want) {
			t.Errorf("login backoff %v, want %v", gaps, want)
		}
		// Health checks kept running while the worker was logging in.
		during := 0
		for _, at := range got.checkAt {
			if at > got.loginAt[0] && at < got.loginAt[4] {
				during++
			}
		}
		if during < 4 {
			t.Errorf("%d health checks during the login, want the usual ones every 10 s (checks at %v, logins at %v)", during, got.checkAt, got.loginAt)
		}
		// Rotation cannot fix a dead session: none happened although the
		// threshold was passed.
		if c := h.connects(); !slices.Equal(c, []string{"Dallas"}) {
			t.Errorf("connects = %q, want no rotation while logging in", c)
		}
		h.advance(20 * time.Second)
		h.requireState(StateHealthy)
		if st := h.w.Status(); st.Conditions.Auth.State != "ok" || st.Counters.LoginAttempts != 5 || st.Counters.LoginFailures != 0 {
			t.Errorf("auth %+v counters %+v", st.Conditions.Auth, st.Counters)
		}
		h.stop()
	})
}

func TestLoginBackoffSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		wd.status = surflare.StateAuthNeeded
		wd.logins = slices.Repeat([]error{errRetry}, 20)
		h := start(t, testSettings(t), wd)
		h.advance(4 * time.Minute)
		at := wd.get().loginAt
		if len(at) < 8 {
			t.Fatalf("logins at %v", at)
		}
		var gaps []time.Duration
		for i := 1; i < 8; i++ {
			gaps = append(gaps, at[i]-at[i-1]-2*time.Second) // minus the attempt itself
		}
		// 5 retries with 3, 6, 12, 24, 48 s; the next round starts 60 s after
		// the last attempt's round ended, then 3 s again.
		want := []time.Duration{3 * time.Second, 6 * time.Second, 12 * time.Second, 24 * time.Second, 48 * time.Second, 60 * time.Second, 3 * time.Second}
		if !slices.Equal(gaps, want) {
			t.Errorf("backoff = %v, want %v", gaps, want)
		}
		h.requireState(StateAuthWait)
		if c := h.connects(); len(c) != 0 {
			t.Errorf("connected %q without a session", c)
		}
		h.stop()
	})
}

func TestFatalLoginStopsRetryingUntilReload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		wd.status = surflare.StateAuthNeeded
		wd.logins = []error{errFatal}
		s := testSettings(t)
		s.FailOpen = true // one fatal failure is not five
		h := start(t, s, wd)
		h.advance(time.Hour)
		if n := len(wd.get().loginAt); n != 1 {
			t.Errorf("%d logins in an hour after a fatal error, want 1", n)
		}
		h.requireState(StateAuthFailed)
		if wd.count("fw.Set fail-open") != 0 {
			t.Error("failed open after a single fatal error")
		}
		if st := h.w.Status(); st.Conditions.Auth.State != "failed" || !strings.Contains(st.Conditions.Auth.LastError, "429") {
			t.Errorf("auth = %+v", st.Conditions.Auth)
		}
		// The user fixes the account and reloads: one more login, it works.
		if err := h.w.Reload(t.Context(), s); err != nil {
			t.Fatal(err)
		}
		h.advance(10 * time.Second)
		if n := len(wd.get().loginAt); n != 2 {
			t.Errorf("%d logins after reload, want 2", n)
		}
		h.requireState(StateHealthy)
		h.stop()
	})
}

func TestSubscriptionInactiveCoolsDownWithoutLogin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		wd.status = surflare.StateSubscriptionInactive
		h := start(t, testSettings(t), wd)
		h.requireState(StateSubscription)
		h.advance(59 * time.Minute)
		if n := len(wd.get().loginAt); n != 0 {
			t.Errorf("%d logins with an inactive subscription", n)
		}
		if c := h.connects(); len(c) != 0 {
			t.Errorf("connects %q during the subscription cooldown", c)
		}
		if st := h.w.Status(); st.Conditions.Auth.SubscriptionUntil == nil {
			t.Error("status lacks subscription_until")
		}
		wd.set(func(w *world) { w.status = "" }) // renewed
		h.advance(2 * time.Minute)
		h.requireState(StateHealthy)
		h.stop()
	})
}

func TestFailOpenOnAfterFiveFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		wd.status = surflare.StateAuthNeeded
		wd.logins = slices.Repeat([]error{errRetry}, 6)
		s := testSettings(t)
		s.FailOpen = true
		h := start(t, s, wd)
		h.advance(30 * time.Second) // attempts at 0, 5, 13, 27 s: 4 failures
		if wd.count("fw.Set fail-open") != 0 {
			t.Fatal("failed open before 5 failures")
		}
		h.advance(30 * time.Second) // 5th failure at ~53 s
		if wd.count("fw.Set fail-open") != 1 {
			t.Fatalf("fail-open calls = %d after 5 failures, want 1", wd.count("fw.Set fail-open"))
		}
		h.requireState(StateFailOpen)
		// Login finally works: kill switch re-armed, then connect.
		h.advance(3 * time.Minute)
		calls := wd.get().calls
		i := slices.Index(calls, "fw.Set fail-open")
		if !slices.Contains(calls[i:], "fw.Set kill-switch") {
			t.Errorf("kill switch not re-armed after a successful login: %q", calls[i:])
		}
		h.requireState(StateHealthy)
		h.stop()
	})
}

func TestFailOpenOffStaysClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		wd.status = surflare.StateAuthNeeded
		wd.logins = slices.Repeat([]error{errRetry}, 100)
		h := start(t, testSettings(t), wd) // FailOpen defaults to off
		h.advance(20 * time.Minute)
		if n := len(wd.get().loginAt); n < 10 {
			t.Fatalf("only %d logins", n)
		}
		if wd.count("fw.Set fail-open") != 0 {
			t.Error("failed open with fail_open off")
		}
		if h.logged("5 login failures; fail_open is off, the kill switch stays armed") != 1 {
			t.Errorf("missing log:\n%s", strings.Join(h.logs(), "\n"))
		}
		h.requireState(StateAuthWait)
		h.stop()
	})
}

func TestConnectSaysAuthNeeded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		wd.connectErr["Dallas"] = []error{errors.Join(surflare.ErrAuthNeeded, errors.New("not logged in"))}
		h := start(t, testSettings(t), wd)
		h.advance(10 * time.Second)
		if n := len(wd.get().loginAt); n != 1 {
			t.Errorf("%d logins, want 1", n)
		}
		if c := h.connects(); !slices.Equal(c, []string{"Dallas", "Dallas"}) {
			t.Errorf("connects = %q: want a retry on the same node after login, no rotation", c)
		}
		if fr := h.w.Status().Counters.FailedReconnects; fr != 0 {
			t.Errorf("an auth problem counted as %d failed reconnects", fr)
		}
		h.requireState(StateHealthy)
		h.stop()
	})
}

func TestSubscriptionLapsesWhileConnectedNoRotation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		h := start(t, testSettings(t), wd)
		h.advance(time.Minute)
		wd.set(func(w *world) { w.status = surflare.StateSubscriptionInactive; w.dead["Dallas"] = true })
		flushes := wd.count("fw.FlushVendor")
		h.advance(5 * time.Minute)
		h.requireState(StateSubscription)
		if r := h.w.Status().Counters.Rotations; r != 0 || wd.count("fw.FlushVendor") != flushes {
			t.Errorf("%d rotations, %d vendor flushes with an inactive subscription; want none",
				r, wd.count("fw.FlushVendor")-flushes)
		}
		if n := len(wd.get().loginAt); n != 0 {
			t.Errorf("%d logins with an inactive subscription", n)
		}
		h.stop()
	})
}
