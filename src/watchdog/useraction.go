package watchdog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"surflare-watchdog/src/health"
	"surflare-watchdog/src/surflare"
)

// A user's action (check, rotate, reconnect) is answered twice: Check,
// Rotate and Reconnect return once the engine has taken it; CheckAndWait,
// RotateAndWait and ReconnectAndWait return its Outcome once it has played
// out, which is what `surflare-watchdog rotate Chicago` prints ("rotated to
// Chicago in 2.1 s").
//
// Actions that cannot hurt:
//
//   - A node name is resolved before anything changes (resolveNode): an
//     unknown one is refused with "did you mean", and the tunnel, the
//     counters and the rate limit are as they were.
//   - The vendor runs one tunnel at a time, so a switch cannot keep the
//     old tunnel while the new node is tried. When a user's switch away
//     from a working tunnel fails on the node, the engine goes back to
//     the old node at once (one connect) instead of cascading through the
//     other candidates; only the node that failed is marked failed.
//   - User connects neither wait for nor use up the automatic reconnect
//     budget (origin byUser).

// Action names, as in Outcome.Action and the control commands.
const (
	ActionCheck     = "check"
	ActionRotate    = "rotate"
	ActionReconnect = "reconnect"
)

// Outcome is what a user's action came to. OK is false when it failed,
// when it was interrupted, and when the wait for it ended first (Pending).
type Outcome struct {
	Action   string         `json:"action"`
	OK       bool           `json:"ok"`
	Message  string         `json:"message"`          // one line for people
	Node     string         `json:"node"`             // the node in use (or being connected) afterwards
	Target   string         `json:"target,omitempty"` // the node asked for
	From     string         `json:"from,omitempty"`   // the working node a rotation left
	FellBack bool           `json:"fell_back,omitempty"`
	Pending  bool           `json:"pending,omitempty"` // still running when the wait ended
	Error    string         `json:"error,omitempty"`   // why not, in the engine's words
	ElapsedS float64        `json:"elapsed_s"`
	Check    *health.Result `json:"check,omitempty"`
}

// Summary is the line a person reads (control.Outcome).
func (o Outcome) Summary() string { return o.Message }

// Failed reports an action that did not do what was asked (control.Outcome).
func (o Outcome) Failed() bool { return !o.OK }

// actionSlack is how much longer than its own timeouts a wait for an
// action lasts: the vendor's CLI calls around a connect (status,
// disconnect, connect) take a few seconds of their own.
const actionSlack = 10 * time.Second

// checkWait bounds the wait for a check: its probes have their own,
// shorter timeouts.
const checkWait = 30 * time.Second

// userAction is a user's action being played out, and its waiters.
type userAction struct {
	kind    string
	target  string // rotate, reconnect: the node asked for
	from    string // rotate: the working node to go back to; "" = none
	started time.Time
	gen     int // the vendorGen (connect) or checkGen (check) it waits for
	// afterLogin: the connect found the vendor session expired; the
	// action carries over to the connect that follows the login.
	afterLogin bool
	fellBack   bool
	why        string // why target failed, once fallen back
	done       chan Outcome
}

func (a *userAction) waitsFor(check bool, gen int) bool {
	return (a.kind == ActionCheck) == check && a.gen == gen && !a.afterLogin
}

// resolveNode turns a typed name into the vendor's tag. It runs on the
// caller's goroutine: a refresh of `surflare nodes` (Deps.Nodes) never
// holds the loop.
func (w *Watchdog) resolveNode(ctx context.Context, input string) (string, error) {
	w.mu.Lock()
	cands := slices.Clone(w.s.candidates())
	w.mu.Unlock()
	if w.d.Nodes != nil {
		return w.d.Nodes.Resolve(ctx, input, cands)
	}
	return surflare.ResolveNode(input, nil, cands)
}

// rotate is Rotate; with wait it registers the action for RotateAndWait.
func (w *Watchdog) rotate(ctx context.Context, node string, wait bool) (*userAction, error) {
	if node != "" {
		n, err := w.resolveNode(ctx, node)
		if err != nil {
			return nil, err
		}
		node = n
	}
	var a *userAction
	err := w.do(ctx, func() error {
		if err := w.connectRefusedLocked(); err != nil {
			return err
		}
		if node == "" {
			next, ok := w.pickNextLocked(w.node, false)
			if !ok {
				return errors.New("no other candidate to rotate to")
			}
			node = next
		}
		from := ""
		if (w.state == StateHealthy || w.state == StateDegraded) && w.node != node {
			from = w.node // a working tunnel to go back to
		}
		w.logLocked(slog.LevelInfo, fmt.Sprintf("Node rotation: %s -> %s (requested)", w.node, node))
		w.counters.Rotations++
		w.userConnectLocked(node, "rotate requested")
		if wait || from != "" {
			a = w.addActionLocked(ActionRotate, node, w.vendorGen)
			a.from = from
		}
		return nil
	})
	return a, err
}

// connectRefusedLocked says why a user's rotate or reconnect cannot start
// now (diagnostics hold the tunnel, a node probe runs, or the router is
// blocked), or nil.
func (w *Watchdog) connectRefusedLocked() error {
	if w.f.diag {
		return ErrDiag
	}
	if w.f.probing {
		return ErrProbing
	}
	return w.blockedErrLocked()
}

// reconnect is Reconnect; with wait it registers the action.
func (w *Watchdog) reconnect(ctx context.Context, wait bool) (*userAction, error) {
	var a *userAction
	err := w.do(ctx, func() error {
		if err := w.connectRefusedLocked(); err != nil {
			return err
		}
		w.userConnectLocked(w.node, "reconnect requested")
		if wait {
			a = w.addActionLocked(ActionReconnect, w.node, w.vendorGen)
		}
		return nil
	})
	return a, err
}

// check is Check; with wait it registers the action (joining a check
// already running).
func (w *Watchdog) check(ctx context.Context, wait bool) (*userAction, error) {
	var a *userAction
	err := w.do(ctx, func() error {
		if w.f.probing {
			return ErrProbing
		}
		attempts := w.counters.ConnectAttempts
		w.preflightNowLocked() // a fixed local cause is noticed at once (and connects)
		w.updateLocked("check")
		if w.counters.ConnectAttempts != attempts {
			// The cause is gone and a connect started: it checks health
			// itself, and a waiting caller hears how it went.
			if wait {
				a = w.addActionLocked(ActionReconnect, w.node, w.vendorGen)
			}
			return nil
		}
		if err := w.blockedErrLocked(); err != nil {
			return err
		}
		if w.f.connecting {
			return errors.New("a connect is in progress; it checks health itself")
		}
		if !w.checkInFlight {
			w.startCheckLocked()
		}
		if wait {
			a = w.addActionLocked(ActionCheck, w.node, w.checkGen)
		}
		return nil
	})
	return a, err
}

// RotateAndWait is Rotate, answered once the switch has played out: the
// new node proven, or the old one back after it failed.
func (w *Watchdog) RotateAndWait(ctx context.Context, node string) (Outcome, error) {
	a, err := w.rotate(ctx, node, true)
	if err != nil {
		return Outcome{}, err
	}
	w.mu.Lock()
	bound := w.s.Phase1Timeout + w.s.Phase2Timeout + actionSlack
	w.mu.Unlock()
	if a.from != "" {
		bound *= 2 // and back
	}
	return w.await(ctx, a, bound), nil
}

// ReconnectAndWait is Reconnect, answered once the connect has finished.
func (w *Watchdog) ReconnectAndWait(ctx context.Context) (Outcome, error) {
	a, err := w.reconnect(ctx, true)
	if err != nil {
		return Outcome{}, err
	}
	w.mu.Lock()
	bound := w.s.Phase1Timeout + w.s.Phase2Timeout + actionSlack
	w.mu.Unlock()
	return w.await(ctx, a, bound), nil
}

// CheckAndWait is Check, answered with the check's result.
func (w *Watchdog) CheckAndWait(ctx context.Context) (Outcome, error) {
	a, err := w.check(ctx, true)
	if err != nil {
		return Outcome{}, err
	}
	return w.await(ctx, a, checkWait), nil
}

func (w *Watchdog) addActionLocked(kind, target string, gen int) *userAction {
	a := &userAction{kind: kind, target: target, started: w.clock.Now(), gen: gen, done: make(chan Outcome, 1)}
	w.actions = append(w.actions, a)
	return a
}

// await waits for a's outcome, at most bound (and while ctx lasts). The
// engine carries on either way.
func (w *Watchdog) await(ctx context.Context, a *userAction, bound time.Duration) Outcome {
	o := Outcome{Action: a.kind, Target: a.target, Node: a.target}
	doing := map[string]string{ActionCheck: "checking", ActionRotate: "switching to " + a.target,
		ActionReconnect: "reconnecting to " + a.target}[a.kind]
	select {
	case o := <-a.done:
		return o
	case <-w.loopDone:
		o.Message = "the watchdog stopped while " + doing
		return o
	case <-ctx.Done():
	case <-w.clock.After(bound):
	}
	waited := w.clock.Now().Sub(a.started)
	o.Pending = true
	o.ElapsedS = waited.Seconds()
	o.Message = fmt.Sprintf("still %s after %s; the watchdog carries on (see status)", doing, seconds(waited))
	return o
}

// seconds is a duration as people read it: "2.1 s", "0.04 s".
func seconds(d time.Duration) string {
	if d < 100*time.Millisecond {
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// nodeFailure: a connect failed because of the node, not because of the
// account, the vendor's session or a cancel.
func nodeFailure(err error) bool {
	return err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, errAuthNeeded) &&
		!errors.Is(err, surflare.ErrSubscriptionInactive) && !errors.Is(err, surflare.ErrAccountCheck)
}

// takeActionLocked removes and returns the action waiting for gen.
func (w *Watchdog) takeActionLocked(check bool, gen int) *userAction {
	for i, a := range w.actions {
		if a.waitsFor(check, gen) {
			w.actions = slices.Delete(w.actions, i, i+1)
			return a
		}
	}
	return nil
}

func (w *Watchdog) answerLocked(a *userAction, o Outcome) {
	o.Action, o.Target = a.kind, a.target
	if a.kind == ActionRotate {
		o.From = a.from
	}
	o.FellBack = a.fellBack
	o.Node = w.node
	o.ElapsedS = w.clock.Now().Sub(a.started).Seconds()
	a.done <- o // buffered, answered once
}

// supersededLocked answers an action whose operation was replaced (by
// another command, a stop, a WAN-down) before it finished.
func (w *Watchdog) supersededLocked(check bool, gen int) {
	a := w.takeActionLocked(check, gen)
	if a == nil {
		return
	}
	what := map[string]string{ActionCheck: "the check", ActionRotate: "the switch to " + a.target,
		ActionReconnect: "the reconnect to " + a.target}[a.kind]
	w.answerLocked(a, Outcome{Message: what + " was interrupted (another command, a stop or the WAN going down)"})
}

// fallBackLocked: a user's switch away from a working tunnel failed on the
// node. Go back to the old node at once (one connect, not counted) instead
// of the automatic cascade; only the node that failed is marked failed.
// It reports whether it took over e.
func (w *Watchdog) fallBackLocked(e connectDone) bool {
	var a *userAction
	for _, x := range w.actions {
		if x.waitsFor(false, e.gen) {
			a = x
		}
	}
	if a == nil || a.kind != ActionRotate || a.from == "" || a.fellBack || !nodeFailure(e.err) || w.pausedLocked() {
		return false
	}
	if w.localCauseLocked() {
		// The router, not the node, failed (the client is gone): going
		// back would fail the same way, and the node is not to blame.
		return false
	}
	a.fellBack, a.why = true, e.err.Error()
	w.tried[e.node] = true
	w.rememberFailedLocked(e.node)
	w.logLocked(slog.LevelWarn, fmt.Sprintf("Could not switch to %s; going back to %s", e.node, a.from), "err", e.err)
	w.startConnectLocked(a.from, "back after a failed switch to "+e.node, byUser)
	a.gen = w.vendorGen
	return true
}

// connectAnsweredLocked answers the action waiting for the connect e. A
// connect that found the session expired is not the end of it: the
// engine logs in and connects again, and the action waits for that.
func (w *Watchdog) connectAnsweredLocked(e connectDone) {
	if errors.Is(e.err, errAuthNeeded) && w.f.auth.running {
		for _, a := range w.actions {
			if a.waitsFor(false, e.gen) {
				a.afterLogin = true
			}
		}
		return
	}
	a := w.takeActionLocked(false, e.gen)
	if a == nil {
		return
	}
	o := Outcome{OK: e.err == nil}
	if e.err != nil {
		o.Error = e.err.Error()
	}
	took := seconds(w.clock.Now().Sub(a.started))
	switch {
	case errors.Is(e.err, context.Canceled):
		o.Message = fmt.Sprintf("%s %s was interrupted", a.kind, e.node)
	case a.fellBack && e.err == nil:
		o.OK, o.Error = false, a.why
		o.Message = fmt.Sprintf("could not switch to %s (%s); back on %s", a.target, a.why, e.node)
	case a.fellBack:
		o.Message = fmt.Sprintf("could not switch to %s (%s); going back to %s failed too (%v)", a.target, a.why, e.node, e.err)
	case a.kind == ActionRotate && e.err == nil:
		o.Message = fmt.Sprintf("rotated to %s in %s", e.node, took)
	case a.kind == ActionRotate:
		o.Message = fmt.Sprintf("could not switch to %s (%v)", e.node, e.err)
	case e.err == nil:
		o.Message = fmt.Sprintf("reconnected to %s in %s", e.node, took)
	default:
		o.Message = fmt.Sprintf("could not reconnect to %s (%v)", e.node, e.err)
	}
	w.answerLocked(a, o)
}

// checkAnsweredLocked answers the action waiting for the check e.
func (w *Watchdog) checkAnsweredLocked(e checkDone) {
	a := w.takeActionLocked(true, e.gen)
	if a == nil {
		return
	}
	r := e.r
	o := Outcome{OK: r.Outcome.Healthy(), Check: &r}
	took := seconds(w.clock.Now().Sub(a.started))
	switch {
	case o.OK && r.ExitIP != "":
		o.Message = fmt.Sprintf("check passed: exit %s (%s) in %s", r.ExitIP, orUnknown(r.ExitCountry), took)
	case o.OK:
		o.Message = "check passed in " + took
	default:
		o.Error = r.Reason
		o.Message = fmt.Sprintf("check failed on %s: %s (%s)", w.node, orUnknown(r.Reason), took)
	}
	w.answerLocked(a, o)
}

// connectStartedLocked carries the actions waiting for a login over to
// the connect to their node that just started (after the login).
func (w *Watchdog) connectStartedLocked(node string) {
	for _, a := range w.actions {
		if a.afterLogin && a.target == node {
			a.afterLogin, a.gen = false, w.vendorGen
		}
	}
}

// loginFailedLocked answers the actions waiting for a login that failed;
// the engine's own retries go on in the background.
func (w *Watchdog) loginFailedLocked(err error) {
	kept := w.actions[:0]
	var failed []*userAction
	for _, a := range w.actions {
		if a.afterLogin {
			failed = append(failed, a)
		} else {
			kept = append(kept, a)
		}
	}
	w.actions = kept
	for _, a := range failed {
		what := map[string]string{ActionRotate: "switch to ", ActionReconnect: "reconnect to "}[a.kind] + a.target
		w.answerLocked(a, Outcome{Error: err.Error(),
			Message: fmt.Sprintf("could not %s: the vendor session expired and the login failed (%v)", what, err)})
	}
}
