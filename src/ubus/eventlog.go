package ubus

import (
	"context"
	"encoding/json"
	"sync"
	"time"
)

// EventLog keeps the daemon's last events, numbered, for the surflare
// object's events method: a long poll (`ubus call surflare events
// '{"since":N,"wait":S}'`) that answers as soon as there is an event after
// N, or after S seconds with none. LuCI's live view polls it through
// uhttpd's JSON-RPC on its own origin (http or https), with rpcd's ACL on
// every call, and nothing stays open between calls: uhttpd's own event
// stream (/ubus/subscribe) keeps a connection slot for every page that ever
// subscribed (docs/luci-live.md). An event's kind is the notification's
// type (NotifyState, NotifyHealth, NotifyLog). Safe for concurrent use.
type EventLog struct {
	size int

	mu      sync.Mutex
	entries []LoggedEvent // oldest first, at most size
	last    int64         // seq of the newest entry; 0 before the first
	wake    chan struct{} // closed and replaced by every Add
	waiting int           // calls waiting in Wait now
}

// LoggedEvent is one event of the log, as the events method returns it:
// the web API's stream frame with a sequence number.
type LoggedEvent struct {
	Seq  int64           `json:"seq"`
	Time time.Time       `json:"time"`
	Kind string          `json:"kind"`
	Data json.RawMessage `json:"data"`
}

// Bounds of the events method.
const (
	// MaxEventsWait caps a call's wait: below LuCI's rpc timeout (20 s by
	// default) and ubusd's and uhttpd's, so a quiet minute is a few calls.
	MaxEventsWait = 15 * time.Second
	// maxEventsWaiters is how many calls may wait at once. Each holds one
	// of the object's concurrent calls (16): past this bound a call answers
	// at once, so status and rotate are never starved by open pages.
	maxEventsWaiters = 6
)

// NewEventLog keeps the last size events (at least 1).
func NewEventLog(size int) *EventLog {
	return &EventLog{size: max(size, 1), wake: make(chan struct{})}
}

// Add appends an event of kind at at; data is anything encoding/json takes.
// It wakes every waiting call.
func (l *EventLog) Add(kind string, at time.Time, data any) {
	raw, err := json.Marshal(data)
	if err != nil {
		raw = json.RawMessage(`null`)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last++
	l.entries = append(l.entries, LoggedEvent{Seq: l.last, Time: at, Kind: kind, Data: raw})
	if n := len(l.entries) - l.size; n > 0 {
		l.entries = append([]LoggedEvent(nil), l.entries[n:]...)
	}
	close(l.wake)
	l.wake = make(chan struct{})
}

// EventsReply is the events method's answer. Last is the newest sequence
// number, to pass as since next time. Reset says since was not one of this
// log's (the daemon restarted, or the caller starts): the caller reads the
// whole state again. Missed says events after since were dropped before it
// asked (the log is bounded).
type EventsReply struct {
	Last   int64         `json:"last"`
	Events []LoggedEvent `json:"events"`
	Reset  bool          `json:"reset,omitempty"`
	Missed bool          `json:"missed,omitempty"`
}

// Wait returns the events after since, waiting up to wait (capped at
// MaxEventsWait) for the first one, or until ctx ends. A since of 0 or one
// beyond the newest answers at once with Reset and no events: the caller
// starts from Last.
func (l *EventLog) Wait(ctx context.Context, since int64, wait time.Duration) EventsReply {
	wait = min(wait, MaxEventsWait)
	var timer <-chan time.Time
	for first := true; ; first = false {
		l.mu.Lock()
		r := l.afterLocked(since)
		if r.Reset || len(r.Events) > 0 || wait <= 0 || (first && l.waiting >= maxEventsWaiters) {
			l.mu.Unlock()
			return r
		}
		wake := l.wake
		if first {
			l.waiting++
			defer func() { l.mu.Lock(); l.waiting--; l.mu.Unlock() }()
			t := time.NewTimer(wait)
			defer t.Stop()
			timer = t.C
		}
		l.mu.Unlock()
		select {
		case <-wake:
		case <-timer:
			wait = 0 // answer with what there is (nothing)
		case <-ctx.Done():
			wait = 0
		}
	}
}

func (l *EventLog) afterLocked(since int64) EventsReply {
	r := EventsReply{Last: l.last, Events: []LoggedEvent{}}
	if since <= 0 || since > l.last {
		r.Reset = true
		return r
	}
	for i, e := range l.entries {
		if e.Seq > since {
			r.Events = append(r.Events, l.entries[i:]...)
			r.Missed = e.Seq > since+1
			break
		}
	}
	return r
}

// Handler serves the surflare object's events method from the log:
// {since, wait} (seconds) as Wait takes them.
func (l *EventLog) Handler() Handler {
	return func(ctx context.Context, req *Request) (Fields, error) {
		since, _ := req.Int("since")
		wait, _ := req.Int("wait")
		b, err := json.Marshal(l.Wait(ctx, since, time.Duration(wait)*time.Second))
		if err != nil {
			return nil, err
		}
		return ParseJSON(b)
	}
}
