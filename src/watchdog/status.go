package watchdog

import (
	"slices"
	"time"
)

// Status returns a snapshot of the watchdog's state.
func (w *Watchdog) Status() Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.statusLocked()
}

func (w *Watchdog) statusLocked() Status {
	now := w.clock.Now()
	st := Status{
		State:       w.state,
		Node:        w.node,
		Transit:     w.transit,
		Mode:        w.s.Mode,
		Exit:        w.exit,
		Counters:    w.counters,
		StartedAt:   w.startedAt,
		UpdatedAt:   now,
		Transitions: slices.Clone(w.transitions),
	}
	if st.Transitions == nil {
		st.Transitions = []Transition{}
	}
	if !w.startedAt.IsZero() {
		st.UptimeS = int64(now.Sub(w.startedAt) / time.Second)
	}
	if w.lastCheck != nil {
		c := *w.lastCheck
		st.LastCheck = &c
	}
	a := w.f.auth
	sig := Conditions{
		Diag:          w.f.diag,
		WANDown:       w.f.wanDown,
		WANDownProbed: w.f.wanDownProbed,
		Auth:          AuthStatus{State: authState(a, now), Failures: a.failures, LastError: a.lastError, Refresh: w.refreshStatusLocked(now)},
	}
	if now.Before(w.f.cooldownUntil) {
		t := w.f.cooldownUntil
		sig.StormCooldownUntil = &t
	}
	if now.Before(w.rateLimitedUntil) {
		t := w.rateLimitedUntil
		sig.RateLimitedUntil = &t
	}
	if now.Before(a.subscriptionUntil) {
		t := a.subscriptionUntil
		sig.Auth.SubscriptionUntil = &t
	}
	if w.d.Detectors != nil {
		sig.Detectors = w.d.Detectors.DetectorStates()
	}
	st.Conditions = sig
	for _, c := range w.s.candidates() {
		dead, n := w.deadLocked(c)
		st.Candidates = append(st.Candidates, CandidateStatus{
			Node: c, Current: c == w.node, Failed: w.tried[c], Dead: dead, LogErrors: n, LatencyMS: w.latency[c],
		})
	}
	st.CheckIntervalS = int64(w.s.CheckInterval / time.Second)
	if w.preflight != nil {
		r := *w.preflight
		st.Preflight = &r
	}
	st.Why = w.whyLocked(st, now)
	return st
}

func authState(a authFacts, now time.Time) string {
	switch {
	case a.failOpen:
		return "fail_open"
	case now.Before(a.subscriptionUntil):
		return "subscription_inactive"
	case a.fatal:
		return "failed"
	case a.running:
		return "logging_in"
	case a.needed:
		return "login_needed"
	case a.checking:
		return "checking"
	default:
		return "ok"
	}
}

// subscriberBuffer is how many events a slow subscriber may lag behind
// before further events are dropped for it.
const subscriberBuffer = 64

// Subscribe returns a channel of events (transitions, health results, log
// lines) and a function that ends the subscription. Delivery never blocks
// the watchdog: a subscriber that falls subscriberBuffer events behind
// misses events (counted in Counters.DroppedEvents). The channel is closed
// by cancel or when the watchdog stops.
func (w *Watchdog) Subscribe() (<-chan Event, func()) {
	ch := make(chan Event, subscriberBuffer)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f.stopped {
		close(ch)
		return ch, func() {}
	}
	id := w.nextSub
	w.nextSub++
	w.subs[id] = ch
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if c, ok := w.subs[id]; ok {
			close(c)
			delete(w.subs, id)
		}
	}
}

// emitLocked fans an event out without blocking.
func (w *Watchdog) emitLocked(ev Event) {
	ev.Node, ev.Transit = w.node, w.transit
	for _, ch := range w.subs {
		select {
		case ch <- ev:
		default:
			w.counters.DroppedEvents++
		}
	}
}
