package ubus

import (
	"encoding/json"
	"fmt"
	"time"
)

// Notification types of the surflare object, for its subscribers (`ubus
// subscribe surflare`) and, through its EventLog, the events method that
// LuCI's live view polls.
const (
	// NotifyState is a transition, with the members of EventState:
	// {state, from, reason, node, exit}.
	NotifyState = "state"
	// NotifyHealth is a finished health check: {time, data} with the
	// check's result as data.
	NotifyHealth = "health"
	// NotifyLog is a user-facing log line: {time, data: {level, message}}.
	NotifyLog = "log"
)

// feedItem is what Publish sends: the web API's stream frame without its
// kind, which is the notification's type here.
type feedItem struct {
	Time time.Time `json:"time"`
	Data any       `json:"data"`
}

// Publish notifies obj's subscribers of an event of type typ that happened
// at at, as {"time": at, "data": data} (data is anything encoding/json
// takes). Without subscribers it does nothing, not even the encoding: the
// daemon may publish every log line without a cost while nobody watches.
func (c *Conn) Publish(obj *Object, typ string, at time.Time, data any) error {
	if !c.HasSubscribers(obj) {
		return nil
	}
	b, err := json.Marshal(feedItem{Time: at, Data: data})
	if err != nil {
		return fmt.Errorf("ubus notify %s: %w", typ, err)
	}
	f, err := ParseJSON(b)
	if err != nil {
		return fmt.Errorf("ubus notify %s: %w", typ, err)
	}
	return c.Notify(obj, typ, f)
}

// Publish publishes on the live connection (see Conn.Publish) and to
// obj's EventLog, if it has one, as an event of kind typ at at with data;
// while ubusd is away it returns ErrNotConnected and nothing is queued for
// subscribers.
func (s *Service) Publish(obj *Object, typ string, at time.Time, data any) error {
	if obj.events != nil {
		obj.events.Add(typ, at, data)
	}
	c, err := s.live()
	if err != nil {
		return fmt.Errorf("ubus notify %s: %w", typ, err)
	}
	return c.Publish(obj, typ, at, data)
}
