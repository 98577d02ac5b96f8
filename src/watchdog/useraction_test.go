package watchdog

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"surflare-watchdog/src/surflare"
)

// fakeNodes is `surflare nodes` behind a surflare.NodeCache-like resolver:
// the vendor lists Tokyo and auto besides the US nodes (E1).
type fakeNodes struct {
	mu    sync.Mutex
	calls int
}

func (f *fakeNodes) Resolve(_ context.Context, input string, candidates []string) (string, error) {
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
	listed := []string{"Dallas", "Los Angeles", "Chicago", "New York", "Atlanta", "Miami", "Tokyo"}
	return surflare.ResolveNode(input, listed, candidates)
}

// rotateAndWait runs RotateAndWait in the bubble while time advances by d.
func (h *harness) rotateAndWait(node string, d time.Duration) (Outcome, error) {
	type res struct {
		o   Outcome
		err error
	}
	ch := make(chan res, 1)
	go func() {
		o, err := h.w.RotateAndWait(context.Background(), node)
		ch <- res{o, err}
	}()
	h.advance(d)
	select {
	case r := <-ch:
		return r.o, r.err
	default:
		h.t.Errorf("rotate %s: no answer within %s", node, d)
		return Outcome{}, errors.New("no answer")
	}
}

func TestRotateUnknownNodeChangesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		nodes := &fakeNodes{}
		h := start(t, testSettings(t), wd, func(d *Deps) { d.Nodes = nodes })
		h.advance(time.Minute)
		h.requireState(StateHealthy)
		before, st := wd.get(), h.w.Status()
		attempts := h.w.attempts

		for _, typo := range []string{"Narnia", "Chicagoo"} {
			err := h.w.Rotate(t.Context(), typo)
			var unknown *surflare.UnknownNodeError
			if !errors.As(err, &unknown) {
				t.Fatalf("rotate %s: %v, want an UnknownNodeError", typo, err)
			}
			// Through the control socket's dispatch, waiting, as the CLI asks.
			_, err = h.w.HandleCommand(t.Context(), "rotate", map[string]any{"node": typo, "wait": true})
			if err == nil || !strings.HasPrefix(err.Error(), `unknown node "`+typo+`"`) {
				t.Errorf("rotate %s (wait): %v", typo, err)
			}
		}
		if err := h.w.Rotate(t.Context(), "Chicagoo"); err == nil || !strings.Contains(err.Error(), `did you mean "Chicago"?`) {
			t.Errorf("a near miss is answered with %v", err)
		}
		h.advance(time.Second)
		after := h.w.Status()
		if got := wd.get().calls[len(before.calls):]; slices.ContainsFunc(got, func(c string) bool { return !strings.HasPrefix(c, "fw.Set lan-proxy") }) {
			t.Errorf("an unknown node touched the vendor or the firewall: %q", got)
		}
		if after.Node != "Dallas" || after.State != StateHealthy || after.Counters.Rotations != st.Counters.Rotations ||
			after.Counters.ConnectAttempts != st.Counters.ConnectAttempts || h.w.attempts != attempts {
			t.Errorf("after refused rotations: node %s state %s counters %+v (before %+v), %d attempts (before %d)",
				after.Node, after.State, after.Counters, st.Counters, h.w.attempts, attempts)
		}

		// Case, spaces and dashes do not matter; a node the vendor lists
		// outside the candidates is a node.
		for typed, want := range map[string]string{"los-angeles": "Los Angeles", "TOKYO": "Tokyo"} {
			o, err := h.rotateAndWait(typed, 5*time.Second)
			if err != nil || !o.OK || o.Node != want || !strings.HasPrefix(o.Message, "rotated to "+want+" in ") {
				t.Errorf("rotate %q: %+v, %v", typed, o, err)
			}
		}
		if nodes.calls == 0 {
			t.Error("the node list was never asked")
		}
		h.stop()
	})
}

func TestUserRotateFailureFallsBackAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		h := start(t, testSettings(t), wd)
		h.advance(time.Minute)
		attempts := h.w.attempts
		wd.set(func(w *world) { w.dead["Chicago"] = true })

		o, err := h.rotateAndWait("chicago", 2*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if o.OK || !o.FellBack || o.Node != "Dallas" || o.Target != "Chicago" ||
			!strings.HasPrefix(o.Message, "could not switch to Chicago (") || !strings.HasSuffix(o.Message, "); back on Dallas") {
			t.Errorf("outcome %+v", o)
		}
		// One try of the new node, one connect back: no retry of Chicago,
		// no cascade through the other candidates.
		if c := h.connects(); !slices.Equal(c, []string{"Dallas", "Chicago", "Dallas"}) {
			t.Errorf("connects %q, want Dallas, Chicago, Dallas", c)
		}
		h.advance(5 * time.Minute)
		h.requireState(StateHealthy)
		st := h.w.Status()
		if len(h.connects()) != 3 || st.Node != "Dallas" || st.Counters.FailedReconnects != 0 {
			t.Errorf("after the fallback: connects %q, node %s, failed reconnects %d", h.connects(), st.Node, st.Counters.FailedReconnects)
		}
		if h.w.attempts != attempts {
			t.Errorf("the user's switch used %d of the automatic budget", h.w.attempts-attempts)
		}
		if h.logged("Could not switch to Chicago; going back to Dallas") != 1 || h.logged("Cascade") != 0 {
			t.Errorf("logs:\n%s", strings.Join(h.logs(), "\n"))
		}
		h.stop()
	})
}

func TestUserActionsLeaveTheAutomaticBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		s := testSettings(t)
		s.ReconnectLimit = 3
		h := start(t, s, wd) // automatic attempt 1 (startup)
		ctx := t.Context()
		for _, node := range []string{"Miami", "Chicago", "Dallas"} {
			if o, err := h.rotateAndWait(node, 5*time.Second); err != nil || !o.OK {
				t.Fatalf("rotate %s: %+v %v", node, o, err)
			}
		}
		for range 2 {
			go h.w.ReconnectAndWait(ctx)
			h.advance(5 * time.Second)
		}
		if n := len(h.connects()); n != 6 {
			t.Fatalf("%d connects, want 6", n)
		}
		// Two proxy crashes, each before its tunnel passed a check (so
		// its attempt stays counted, refundAttemptLocked): the engine's
		// attempts 2 and 3, within its budget of 3 per window however
		// often the user rotated.
		for range 2 {
			h.advance(5 * time.Second)
			wd.set(func(w *world) { w.proxyDown = true })
			h.advance(31 * time.Second)
		}
		if n := len(h.connects()); n != 8 || h.logged("Reconnect rate limit") != 0 {
			t.Errorf("%d connects (want 8); logs:\n%s", n, strings.Join(h.logs(), "\n"))
		}
		h.requireState(StateHealthy)
		// The engine's own fourth attempt goes after the 30 s backoff (its
		// crash is seen a check later), and its fifth is held back for 1
		// min: the count is the engine's 4, not the user's rotations too.
		for range 2 {
			h.advance(5 * time.Second)
			wd.set(func(w *world) { w.proxyDown = true })
			h.advance(31 * time.Second)
		}
		if n := len(h.connects()); n != 9 || h.logged("Reconnect rate limit: 4 attempts without a lasting tunnel; next attempt in") != 1 {
			t.Errorf("%d connects, want the engine's 5th held back; logs:\n%s", n, strings.Join(h.logs(), "\n"))
		}
		h.stop()
	})
}

func TestCheckAndReconnectOutcomes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		h := start(t, testSettings(t), wd)
		h.advance(time.Minute)
		ctx := t.Context()
		answer := func(f func() (Outcome, error), d time.Duration) Outcome {
			ch := make(chan Outcome, 1)
			go func() {
				o, err := f()
				if err != nil {
					t.Errorf("refused: %v", err)
				}
				ch <- o
			}()
			h.advance(d)
			select {
			case o := <-ch:
				return o
			default:
				t.Errorf("no answer within %s", d)
				return Outcome{}
			}
		}
		if o := answer(func() (Outcome, error) { return h.w.CheckAndWait(ctx) }, time.Second); !o.OK || o.Message != "check passed: exit 198.18.20.6 (US) in 0.2 s" {
			t.Errorf("check on a working tunnel: %+v", o)
		}
		if o := answer(func() (Outcome, error) { return h.w.ReconnectAndWait(ctx) }, 5*time.Second); !o.OK || !strings.HasPrefix(o.Message, "reconnected to Dallas in ") {
			t.Errorf("reconnect: %+v", o)
		}
		wd.set(func(w *world) { w.dead["Dallas"] = true })
		if o := answer(func() (Outcome, error) { return h.w.CheckAndWait(ctx) }, time.Second); o.OK || o.Message != "check failed on Dallas: no probe answered (0.2 s)" {
			t.Errorf("check on a dead tunnel: %+v", o)
		}
		h.stop()
	})
}

func TestReconnectWaitsThroughALogin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		h := start(t, testSettings(t), wd)
		h.advance(time.Minute)
		reconnect := func() (Outcome, error) {
			ch := make(chan Outcome, 1)
			go func() { o, _ := h.w.ReconnectAndWait(t.Context()); ch <- o }()
			h.advance(10 * time.Second)
			select {
			case o := <-ch:
				return o, nil
			default:
				return Outcome{}, errors.New("no answer within 10 s")
			}
		}
		// The session expired: the connect finds it, the engine logs in
		// (2 s) and connects again; the user hears how that ended.
		wd.set(func(w *world) { w.authGone = true })
		if o, err := reconnect(); err != nil || !o.OK || !strings.HasPrefix(o.Message, "reconnected to Dallas in 2.") {
			t.Errorf("reconnect through a login: %+v %v", o, err)
		}
		wd.set(func(w *world) {
			w.authGone, w.logins = true, []error{errors.New("surflare login: network unreachable")}
		})
		o, err := reconnect()
		if err != nil || o.OK || o.Message != "could not reconnect to Dallas: the vendor session expired and the login failed (surflare login: network unreachable)" {
			t.Errorf("reconnect with a failing login: %+v %v", o, err)
		}
		h.stop()
	})
}
