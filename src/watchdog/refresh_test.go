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

func refreshSettings(t *testing.T, every time.Duration) Settings {
	s := testSettings(t)
	s.LoginRefresh = every
	s.HeartbeatInterval = 0
	return s
}

// loginMinutes is when the vendor's login ran, in whole minutes since t0.
func loginMinutes(wd *world) []int {
	var out []int
	for _, d := range wd.get().loginAt {
		out = append(out, int(d/time.Minute))
	}
	return out
}

// E9: the login is renewed every interval while the tunnel is healthy, and
// the tunnel never notices: one connect, no disconnect, healthy throughout.
func TestLoginRefreshedWhileTunnelHealthy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		h := start(t, refreshSettings(t, 10*time.Minute), wd)
		h.advance(35 * time.Minute)

		if got := loginMinutes(wd); !slices.Equal(got, []int{10, 20, 30}) {
			t.Errorf("logins at minutes %v, want [10 20 30]", got)
		}
		if got := h.connects(); !slices.Equal(got, []string{"Dallas"}) {
			t.Errorf("connects = %q: a refresh must not reconnect", got)
		}
		if n := wd.count("vendor.Disconnect"); n != 0 {
			t.Errorf("%d disconnects, want 0", n)
		}
		st := h.w.Status()
		if st.State != StateHealthy {
			t.Errorf("state %s, want healthy", st.State)
		}
		first := slices.IndexFunc(st.Transitions, func(tr Transition) bool { return tr.To == StateHealthy })
		for _, tr := range st.Transitions[first+1:] {
			t.Errorf("transition during refreshes: %s -> %s (%s)", tr.From, tr.To, tr.Reason)
		}
		r := st.Conditions.Auth.Refresh
		if r == nil || r.Outcome != "ok" || r.Refreshes != 3 || r.Failures != 0 || r.IntervalS != 600 {
			t.Fatalf("refresh status = %+v, want 3 ok refreshes every 600 s", r)
		}
		if r.AgeS == nil || *r.AgeS < 4*60 || *r.AgeS > 6*60 {
			t.Errorf("refresh age %v s, want about 5 min", r.AgeS)
		}
		if r.NextAt == nil || r.NextAt.Sub(*r.LastOKAt) != 10*time.Minute {
			t.Errorf("next refresh %v, want 10 min after the last (%v)", r.NextAt, r.LastOKAt)
		}
		if h.logged("Login refreshed; next refresh in 10m0s") != 3 {
			t.Errorf("log:\n%s", strings.Join(h.logs(), "\n"))
		}
		h.stop()
	})
}

// A refresh that cannot reach the account API, even through the tunnel, is
// retried with the login backoff, then given up until the next interval.
// It is not a fault: no reconnect, no rotation, no fail-open, the state
// stays healthy, and status says what failed.
func TestLoginRefreshFailureLeavesTunnelAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		s := refreshSettings(t, 10*time.Minute)
		s.FailOpen, s.FailOpenAfter = true, 1
		netErr := &surflare.LoginError{Reason: "network error: connection reset by peer"}
		for range s.LoginRetries + 1 {
			wd.logins = append(wd.logins, netErr)
		}
		h := start(t, s, wd)
		h.advance(15 * time.Minute)

		at := wd.get().loginAt
		if len(at) != s.LoginRetries+1 {
			t.Fatalf("%d login attempts, want %d (one round)", len(at), s.LoginRetries+1)
		}
		var gaps []time.Duration
		for i := 1; i < len(at); i++ {
			gaps = append(gaps, (at[i] - at[i-1] - 2*time.Second).Round(time.Second)) // a login takes 2 s
		}
		if !slices.Equal(gaps, []time.Duration{3 * time.Second, 6 * time.Second, 12 * time.Second, 24 * time.Second, 48 * time.Second}) {
			t.Errorf("retry gaps %v, want the login backoff 3 6 12 24 48 s", gaps)
		}
		st := h.w.Status()
		if st.State != StateHealthy || !slices.Equal(h.connects(), []string{"Dallas"}) {
			t.Errorf("state %s, connects %q: a failed refresh must not touch the tunnel", st.State, h.connects())
		}
		if wd.count("fw.Set fail-open") != 0 || st.Conditions.Auth.State != "ok" || st.Conditions.Auth.Failures != 0 {
			t.Errorf("a refresh failure counted as a login failure: auth %+v", st.Conditions.Auth)
		}
		r := st.Conditions.Auth.Refresh
		if r == nil || r.Outcome != "failed" || r.Failures != 1 || !strings.Contains(r.LastError, "network error") {
			t.Fatalf("refresh status = %+v, want one failed round with its error", r)
		}
		if r.NextAt == nil || r.NextAt.Sub(*r.LastAt) != 10*time.Minute {
			t.Errorf("next refresh %v, want one interval after the round (%v)", r.NextAt, r.LastAt)
		}
		// The next round, one interval later, succeeds.
		h.advance(10 * time.Minute)
		if r := h.w.Status().Conditions.Auth.Refresh; r.Outcome != "ok" || r.Failures != 0 || r.Refreshes != 1 {
			t.Errorf("after the next round: %+v", r)
		}
		h.stop()
	})
}

// A fatal answer (429) ends the round at once: retrying it gets the
// account locked.
func TestLoginRefreshStopsAtFatalError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		wd.logins = []error{&surflare.LoginError{Fatal: true, Reason: "Too Many Requests (HTTP 429)"}}
		h := start(t, refreshSettings(t, 10*time.Minute), wd)
		h.advance(15 * time.Minute)
		if n := len(wd.get().loginAt); n != 1 {
			t.Errorf("%d attempts after a 429, want 1", n)
		}
		st := h.w.Status()
		if st.State != StateHealthy || st.Conditions.Auth.State != "ok" {
			t.Errorf("state %s auth %s: a refused refresh is not an auth failure", st.State, st.Conditions.Auth.State)
		}
		h.stop()
	})
}

// A refresh is only tried through a working tunnel: while the checks fail
// it waits, and runs after the next passing check.
func TestLoginRefreshWaitsForAHealthyTunnel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		s := refreshSettings(t, 10*time.Minute)
		s.FailThreshold = 1000 // stay on the node, degraded
		h := start(t, s, wd)
		h.advance(9 * time.Minute)
		wd.set(func(w *world) { w.dead["Dallas"] = true })
		h.advance(5 * time.Minute)
		if n := len(wd.get().loginAt); n != 0 {
			t.Errorf("%d logins while the tunnel fails, want 0", n)
		}
		wd.set(func(w *world) { w.dead["Dallas"] = false })
		h.advance(time.Minute)
		if got := loginMinutes(wd); len(got) != 1 || got[0] != 14 {
			t.Errorf("logins at minutes %v, want one right after the tunnel recovered (14)", got)
		}
		h.stop()
	})
}

func TestLoginRefreshOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		h := start(t, refreshSettings(t, 0), wd)
		h.advance(2 * time.Hour)
		if n := len(wd.get().loginAt); n != 0 {
			t.Errorf("%d logins with login_refresh 0, want none", n)
		}
		if r := h.w.Status().Conditions.Auth.Refresh; r == nil || r.IntervalS != 0 || r.NextAt != nil {
			t.Errorf("refresh status with login_refresh 0: %+v", r)
		}
		h.stop()
	})
}

// The fallback: connects keep failing the account check (an expired token
// where the API is reachable without the tunnel). After
// fallbackLoginAfter of them the watchdog logs in directly and connects at
// once when that works.
func TestAccountCheckFailuresFallBackToALogin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		h := start(t, refreshSettings(t, 0), wd)
		api := errors.Join(surflare.ErrAccountCheck, errors.New("✘ Account check failed — Could not verify account status. Check network."))
		wd.set(func(w *world) {
			w.connectErr["Los Angeles"] = slices.Repeat([]error{api}, fallbackLoginAfter)
			w.connectErr["Los Angeles"] = append(w.connectErr["Los Angeles"], api) // the retry racing the login
		})
		failDallas(h)
		h.advance(2 * time.Minute)

		if n := len(wd.get().loginAt); n != 1 {
			t.Fatalf("%d logins, want 1 fallback login after %d failed account checks\n%s", n, fallbackLoginAfter, strings.Join(h.logs(), "\n"))
		}
		if h.logged("the login token may have expired; trying a direct login") != 1 {
			t.Errorf("no plain fallback line:\n%s", strings.Join(h.logs(), "\n"))
		}
		st := h.w.Status()
		if st.State != StateHealthy || st.Node != "Los Angeles" {
			t.Errorf("state %s on %s, want healthy on Los Angeles", st.State, st.Node)
		}
		h.stop()
	})
}

// Where the fallback login fails too (the API answers only through the
// tunnel), the daemon stays down and its why line says why, in red.
func TestAccountCheckFailuresSayWhyWhenTheLoginFailsToo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		h := start(t, refreshSettings(t, 0), wd)
		api := errors.Join(surflare.ErrAccountCheck, errors.New("✘ Account check failed — Could not verify account status. Check network."))
		netErr := &surflare.LoginError{Reason: "network error"}
		wd.set(func(w *world) {
			w.connectErr["Los Angeles"] = slices.Repeat([]error{api}, 100)
			w.logins = slices.Repeat([]error{netErr}, 100)
		})
		failDallas(h)
		h.advance(5 * time.Minute)
		st := h.w.Status()
		if st.State != StateDisconnected {
			t.Fatalf("state %s, want disconnected", st.State)
		}
		if y := st.Why; y.Severity != WhyAction || !strings.Contains(y.Line, "failed the account check") || !strings.Contains(y.Line, "login token has probably expired") {
			t.Errorf("why = %+v", y)
		}
		if n := len(wd.get().loginAt); n != s0LoginRetries+1 {
			t.Errorf("%d fallback logins in 5 min, want one round (%d): they are spaced %s", n, s0LoginRetries+1, fallbackLoginEvery)
		}
		h.stop()
	})
}

// s0LoginRetries is the default login retries per round.
var s0LoginRetries = DefaultSettings().LoginRetries
