package ubus

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

func seqs(r EventsReply) []int64 {
	out := []int64{}
	for _, e := range r.Events {
		out = append(out, e.Seq)
	}
	return out
}

// A caller starts with since 0 (Reset, Last), then gets exactly the events
// after what it saw; a since the log never gave (a daemon restart) is a
// Reset; events dropped from the bounded log are flagged Missed.
func TestEventLogSince(t *testing.T) {
	l := NewEventLog(3)
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	if r := l.Wait(context.Background(), 0, 0); !r.Reset || r.Last != 0 || len(r.Events) != 0 {
		t.Errorf("empty log, since 0: %+v", r)
	}
	l.Add("log", at, map[string]string{"message": "one"})
	l.Add("state", at, map[string]string{"state": "healthy"})
	r := l.Wait(context.Background(), 1, 0)
	if got := seqs(r); len(got) != 1 || got[0] != 2 || r.Reset || r.Missed || r.Last != 2 {
		t.Errorf("since 1: %+v", r)
	}
	if r.Events[0].Kind != "state" || string(r.Events[0].Data) != `{"state":"healthy"}` || !r.Events[0].Time.Equal(at) {
		t.Errorf("event: %+v", r.Events[0])
	}
	if r := l.Wait(context.Background(), 7, 0); !r.Reset || len(r.Events) != 0 || r.Last != 2 {
		t.Errorf("since beyond the log: %+v", r)
	}
	for i := 0; i < 3; i++ {
		l.Add("log", at, i)
	}
	if r := l.Wait(context.Background(), 1, 0); !r.Missed || len(seqs(r)) != 3 || seqs(r)[0] != 3 {
		t.Errorf("since 1 after the log dropped 1 and 2: %+v", r)
	}
}

// A waiting call answers as soon as an event comes, and a quiet one after
// its wait, with nothing.
func TestEventLogWaitWakesOnAdd(t *testing.T) {
	l := NewEventLog(10)
	l.Add("log", time.Now(), "before")
	got := make(chan EventsReply, 1)
	start := time.Now()
	go func() { got <- l.Wait(context.Background(), 1, 10*time.Second) }()
	for l.waiters() == 0 {
		time.Sleep(time.Millisecond)
	}
	l.Add("state", time.Now(), "after")
	r := <-got
	if s := seqs(r); len(s) != 1 || s[0] != 2 {
		t.Errorf("woken call: %+v", r)
	}
	if time.Since(start) > 5*time.Second {
		t.Error("the call waited out its time instead of waking")
	}
	if r := l.Wait(context.Background(), 2, 20*time.Millisecond); len(r.Events) != 0 || r.Reset || r.Last != 2 {
		t.Errorf("quiet call: %+v", r)
	}
}

// Past maxEventsWaiters a call answers at once: open pages never take all
// of the object's concurrent calls.
func TestEventLogBoundsWaiters(t *testing.T) {
	l := NewEventLog(10)
	l.Add("log", time.Now(), "x")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := 0; i < maxEventsWaiters; i++ {
		go l.Wait(ctx, 1, time.Minute)
	}
	for l.waiters() < maxEventsWaiters {
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	if r := l.Wait(context.Background(), 1, time.Minute); len(r.Events) != 0 || time.Since(start) > time.Second {
		t.Errorf("a call past the bound waited (%s): %+v", time.Since(start), r)
	}
}

// The handler takes {since, wait} and answers the reply as ubus members.
func TestEventLogHandler(t *testing.T) {
	l := NewEventLog(10)
	l.Add("health", time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), map[string]string{"outcome": "OK"})
	f, err := l.Handler()(context.Background(), &Request{Args: Fields{{Name: "since", Value: Int32(0)}}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(f)
	if string(b) != `{"last":1,"events":[],"reset":true}` {
		t.Errorf("since 0: %s", b)
	}
	f, err = l.Handler()(context.Background(), &Request{Args: Fields{{Name: "since", Value: Int32(1)}, {Name: "wait", Value: Int32(0)}}})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ = json.Marshal(f); string(b) != `{"last":1,"events":[]}` {
		t.Errorf("since 1, no wait: %s", b)
	}
}

func (l *EventLog) waiters() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.waiting
}

// The surflare object serves events from what the daemon notifies through
// its Service, whatever else it wires: a transition the daemon sends as
// "state" (as it always has) reaches the events method, ubusd or not.
func TestSurflareObjectServesItsNotificationsAsEvents(t *testing.T) {
	obj, err := SurflareObject(SurflareHandlers{})
	if err != nil {
		t.Fatal(err)
	}
	svc := &Service{Objects: []*Object{obj}, Socket: t.TempDir() + "/absent.sock"}
	events := obj.method(MethodEvents).Handler
	if events == nil {
		t.Fatal("no events handler")
	}
	call := func(since int32) string {
		f, err := events(context.Background(), &Request{Args: Fields{{Name: "since", Value: Int32(since)}}})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(f)
		return string(b)
	}
	if got := call(0); got != `{"last":0,"events":[],"reset":true}` {
		t.Errorf("before any notification: %s", got)
	}
	state := Fields{{Name: "state", Value: String("connecting")}, {Name: "from", Value: String("healthy")}}
	if err := svc.Notify(obj, NotifyState, state); err == nil {
		t.Error("Notify without ubusd reported success")
	}
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	svc.Publish(obj, NotifyLog, at, map[string]string{"message": "Node rotation: Dallas -> Miami (requested)"})
	if first := eventsSince(t, events, 0); first.Last != 2 {
		t.Errorf("last %d, want 2 (state, log)", first.Last)
	}
	got := eventsSince(t, events, 1)
	if len(got.Events) != 1 || got.Events[0].Kind != NotifyLog || !got.Events[0].Time.Equal(at) {
		t.Errorf("after the state: %+v", got)
	}
	if e := obj.events.entries[0]; e.Kind != NotifyState || string(e.Data) != `{"state":"connecting","from":"healthy"}` {
		t.Errorf("the state notification was kept as %+v", e)
	}
}

// eventsSince calls an events handler without waiting.
func eventsSince(t *testing.T, h Handler, since int32) EventsReply {
	t.Helper()
	f, err := h(context.Background(), &Request{Args: Fields{{Name: "since", Value: Int32(since)}}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(f)
	var r EventsReply
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}
