package ubus

import (
	"context"
	"fmt"
	"time"
)

// Event is a ubus event delivered to a listener (`ubus send` / `ubus listen`).
type Event struct {
	Name string
	Data Fields
}

// Notification is a message an object sent to its subscribers.
type Notification struct {
	Object string // path of the object that sent it
	Type   string
	Data   Fields
}

// deliveryQueue is how many events or notifications wait for a slow
// callback before newer ones are dropped (and logged): a stuck consumer must
// not stall the connection that also serves method calls.
const deliveryQueue = 64

// removeTimeout bounds the REMOVE_OBJECT sent when a listener is cancelled.
const removeTimeout = 5 * time.Second

// Listen registers for events whose name matches pattern ("*" for all, a
// trailing "*" for a prefix) and calls fn for each, in order, on a goroutine
// of its own, until ctx is cancelled or the connection ends.
func (c *Conn) Listen(ctx context.Context, pattern string, fn func(Event)) error {
	q := make(chan Event, deliveryQueue)
	reg, err := c.addAnonymous(ctx, func(m *Message) {
		name, _ := m.String(AttrMethod)
		data, _ := m.Fields(AttrData)
		select {
		case q <- Event{Name: name, Data: data}:
		default:
			c.log.Warn("ubus event listener is behind, dropping event", "event", name)
		}
	})
	if err != nil {
		return fmt.Errorf("listening for ubus events %q: %w", pattern, err)
	}
	m := &Message{Type: MsgInvoke, Peer: systemObjectEvent}
	m.add(u32Attr(AttrObjID, systemObjectEvent), strAttr(AttrMethod, "register"), dataAttr(AttrData, Fields{
		{Name: "object", Value: Value{Type: TypeInt32, Int: int64(reg.id)}},
		{Name: "pattern", Value: String(pattern)},
	}))
	if _, err := c.request(ctx, m, nil); err != nil {
		c.dropAnonymous(reg)
		return fmt.Errorf("listening for ubus events %q: %w", pattern, err)
	}
	go pump(ctx, c, reg, q, fn)
	return nil
}

// Subscribe subscribes to the notifications of the object at path and calls
// fn for each, in order, until ctx is cancelled or the connection ends.
func (c *Conn) Subscribe(ctx context.Context, path string, fn func(Notification)) error {
	q := make(chan Notification, deliveryQueue)
	reg, err := c.addAnonymous(ctx, func(m *Message) {
		typ, _ := m.String(AttrMethod)
		data, _ := m.Fields(AttrData)
		select {
		case q <- Notification{Object: path, Type: typ, Data: data}:
		default:
			c.log.Warn("ubus subscriber is behind, dropping notification", "object", path, "type", typ)
		}
	})
	if err != nil {
		return fmt.Errorf("subscribing to ubus object %s: %w", path, err)
	}
	reg.gone = func(uint32) { c.log.Info("ubus object went away, subscription ended", "object", path) }
	target, err := c.LookupID(ctx, path)
	if err == nil {
		m := &Message{Type: MsgSubscribe}
		m.add(u32Attr(AttrObjID, reg.id), u32Attr(AttrTarget, target))
		_, err = c.request(ctx, m, nil)
	}
	if err != nil {
		c.dropAnonymous(reg)
		return fmt.Errorf("subscribing to ubus object %s: %w", path, err)
	}
	go pump(ctx, c, reg, q, fn)
	return nil
}

// addAnonymous registers a nameless object: ubusd gives it an id that
// events and notifications are then addressed to.
func (c *Conn) addAnonymous(ctx context.Context, deliver func(*Message)) (*registration, error) {
	reg := &registration{deliver: deliver}
	if err := c.addObject(ctx, &Message{Type: MsgAddObject}, reg); err != nil {
		return nil, err
	}
	return reg, nil
}

// dropAnonymous unregisters an anonymous object in the background.
func (c *Conn) dropAnonymous(reg *registration) {
	c.forget(reg)
	go func() {
		ctx, cancel := context.WithTimeout(c.ctx, removeTimeout)
		defer cancel()
		if err := c.removeObject(ctx, reg); err != nil && c.Err() == nil {
			c.log.Debug("cannot remove anonymous ubus object", "id", reg.id, "err", err)
		}
	}()
}

// pump hands queued deliveries to fn until ctx or the connection ends.
func pump[T any](ctx context.Context, c *Conn, reg *registration, q <-chan T, fn func(T)) {
	for {
		select {
		case v := <-q:
			fn(v)
		case <-ctx.Done():
			c.dropAnonymous(reg)
			return
		case <-c.Done():
			return
		}
	}
}
