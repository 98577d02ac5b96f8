package ubus

import (
	"context"
	"fmt"
	"runtime/debug"
	"sort"
	"sync/atomic"
)

// Object is a ubus object this process serves, such as "surflare". It is a
// description only: the same Object can be registered again on a new
// connection after ubusd restarts.
type Object struct {
	Name    string
	Methods []Method

	// events, when set, records every notification sent through a
	// Service for the object's events method (SurflareObject sets it).
	events *EventLog
}

// Method is one method of an Object. Policy is its typed signature (what
// `ubus -v list` shows, and what arguments are checked against); Required
// lists the arguments that must be present. A nil Handler answers
// NOT_SUPPORTED, so a method can be announced before it is implemented.
type Method struct {
	Name     string
	Policy   map[string]BlobmsgType
	Required []string
	Handler  Handler
}

// Handler serves one method call. Returned members go back as one DATA
// reply (nil: no DATA, only a status); an error picks the status — a Status
// in its chain as is, anything else UNKNOWN_ERROR. Members returned with an
// error are still sent, before the status, as a libubus handler may
// ubus_send_reply and then fail: `ubus call` prints them and then "Command
// failed: … (<status>)", which is how a caller learns why.
type Handler func(ctx context.Context, req *Request) (Fields, error)

// Request is a method call as a handler sees it. Args have been checked
// against the method's policy, and integers converted to the policy's type.
type Request struct {
	Object string
	Method string
	Args   Fields
	// User and Group are the caller's, as ubusd reports them (ACL identity).
	User, Group string
	// Caller is the ubusd client id of the caller.
	Caller uint32
}

// String returns a string argument.
func (r *Request) String(name string) (string, bool) {
	v, ok := r.Args.Get(name)
	return v.Str, ok && v.Type == TypeString
}

// Bool returns a boolean argument.
func (r *Request) Bool(name string) (bool, bool) {
	v, ok := r.Args.Get(name)
	return v.Int != 0, ok && v.Type == TypeBool
}

// Int returns an integer argument of any width.
func (r *Request) Int(name string) (int64, bool) {
	v, ok := r.Args.Get(name)
	return v.Int, ok && v.Type.isInt()
}

// maxConcurrentCalls bounds method handlers running at once per connection.
const maxConcurrentCalls = 16

// registration is an object registered on this connection: a served Object,
// or an anonymous object receiving events or notifications (deliver).
type registration struct {
	id      uint32
	typeID  uint32
	obj     *Object
	active  atomic.Bool         // ubusd says the object has subscribers
	deliver func(m *Message)    // anonymous objects
	gone    func(target uint32) // UNSUBSCRIBE: the subscribed object went away
	calls   chan struct{}       // semaphore for handlers
}

func (o *Object) method(name string) *Method {
	for i := range o.Methods {
		if o.Methods[i].Name == name {
			return &o.Methods[i]
		}
	}
	return nil
}

// signature builds UBUS_ATTR_SIGNATURE: one table per method, in method
// order, each argument an INT32 holding its type. `ubus -v list` prints the
// arguments in this order, and a libubus server announces them in the order
// its policy array declares them: so required arguments come first, in
// Required's order, then the optional ones sorted by name (the same every
// time; a map has no order of its own).
func (o *Object) signature() Fields {
	sig := make(Fields, 0, len(o.Methods))
	for _, m := range o.Methods {
		names := make([]string, 0, len(m.Policy))
		required := map[string]bool{}
		for _, n := range m.Required {
			if !required[n] {
				required[n] = true
				names = append(names, n)
			}
		}
		optional := make([]string, 0, len(m.Policy))
		for n := range m.Policy {
			if !required[n] {
				optional = append(optional, n)
			}
		}
		sort.Strings(optional)
		names = append(names, optional...)
		args := make(Fields, 0, len(names))
		for _, n := range names {
			args = append(args, Field{Name: n, Value: Int32(int32(m.Policy[n]))})
		}
		sig = append(sig, Field{Name: m.Name, Value: Table(args...)})
	}
	return sig
}

func (o *Object) validate() error {
	if o.Name == "" {
		return fmt.Errorf("object without a name")
	}
	seen := map[string]bool{}
	for _, m := range o.Methods {
		if m.Name == "" || seen[m.Name] {
			return fmt.Errorf("object %s: empty or duplicate method name %q", o.Name, m.Name)
		}
		seen[m.Name] = true
		for arg, t := range m.Policy {
			if t > typeLast || arg == "" {
				return fmt.Errorf("object %s: method %s: bad policy entry %q: %s", o.Name, m.Name, arg, t)
			}
		}
		for _, arg := range m.Required {
			if _, ok := m.Policy[arg]; !ok {
				return fmt.Errorf("object %s: method %s: required argument %q not in the policy", o.Name, m.Name, arg)
			}
		}
	}
	return nil
}

// AddObject registers obj with ubusd, announcing its typed signature, and
// serves its methods on this connection until it is closed.
func (c *Conn) AddObject(ctx context.Context, obj *Object) error {
	if err := obj.validate(); err != nil {
		return fmt.Errorf("registering ubus object: %w", err)
	}
	m := &Message{Type: MsgAddObject}
	m.add(strAttr(AttrObjPath, obj.Name), dataAttr(AttrSignature, obj.signature()))
	reg := &registration{obj: obj, calls: make(chan struct{}, maxConcurrentCalls)}
	if err := c.addObject(ctx, m, reg); err != nil {
		return fmt.Errorf("registering ubus object %s: %w", obj.Name, err)
	}
	c.log.Info("ubus object registered", "object", obj.Name, "id", fmt.Sprintf("%08x", reg.id))
	return nil
}

// addObject runs an ADD_OBJECT request. The registration is entered from the
// read goroutine as soon as the DATA reply names the id, so an INVOKE that
// follows right behind it finds the object.
func (c *Conn) addObject(ctx context.Context, m *Message, reg *registration) error {
	_, err := c.request(ctx, m, func(d *Message) {
		id, ok := d.U32(AttrObjID)
		if !ok || reg.id != 0 {
			return
		}
		reg.id = id
		reg.typeID, _ = d.U32(AttrObjType)
		c.mu.Lock()
		c.objects[id] = reg
		if reg.obj != nil {
			c.byObject[reg.obj] = reg
		}
		c.mu.Unlock()
	})
	if err == nil && reg.id == 0 {
		err = StatusNoData
	}
	if err != nil && reg.id != 0 {
		c.forget(reg)
	}
	return err
}

func (c *Conn) forget(reg *registration) {
	c.mu.Lock()
	delete(c.objects, reg.id)
	if reg.obj != nil {
		delete(c.byObject, reg.obj)
	}
	c.mu.Unlock()
}

// removeObject unregisters an object from ubusd.
func (c *Conn) removeObject(ctx context.Context, reg *registration) error {
	c.forget(reg)
	m := &Message{Type: MsgRemoveObject}
	m.add(u32Attr(AttrObjID, reg.id))
	_, err := c.request(ctx, m, nil)
	return err
}

// RemoveObject unregisters an object added with AddObject.
func (c *Conn) RemoveObject(ctx context.Context, obj *Object) error {
	c.mu.Lock()
	reg := c.byObject[obj]
	c.mu.Unlock()
	if reg == nil {
		return fmt.Errorf("removing ubus object %s: not registered on this connection", obj.Name)
	}
	if err := c.removeObject(ctx, reg); err != nil {
		return fmt.Errorf("removing ubus object %s: %w", obj.Name, err)
	}
	return nil
}

// HasSubscribers reports whether ubusd says obj has subscribers.
func (c *Conn) HasSubscribers(obj *Object) bool {
	c.mu.Lock()
	reg := c.byObject[obj]
	c.mu.Unlock()
	return reg != nil && reg.active.Load()
}

// Notify sends a notification of the given type to obj's subscribers
// (`ubus subscribe`), without waiting for them, as ubus_notify with a
// negative timeout does. Without subscribers nothing is sent.
func (c *Conn) Notify(obj *Object, typ string, data Fields) error {
	c.mu.Lock()
	reg := c.byObject[obj]
	var seq uint16
	if reg != nil && reg.active.Load() {
		seq = c.nextSeqLocked()
	}
	c.mu.Unlock()
	if reg == nil {
		return fmt.Errorf("ubus notify %s: object %s not registered on this connection", typ, obj.Name)
	}
	if seq == 0 {
		return nil
	}
	m := &Message{Type: MsgNotify, Seq: seq, Peer: reg.id}
	m.add(u32Attr(AttrObjID, reg.id), strAttr(AttrMethod, typ), dataAttr(AttrData, data), u32Attr(AttrNoReply, 1))
	if err := c.send(m); err != nil {
		return fmt.Errorf("ubus notify %s %s: %w", obj.Name, typ, err)
	}
	return nil
}

// handleObjectMsg routes INVOKE, NOTIFY and UNSUBSCRIBE by the OBJID they
// name, like libubus's ubus_process_obj_msg.
func (c *Conn) handleObjectMsg(m *Message) {
	id, ok := m.U32(AttrObjID)
	if !ok {
		return
	}
	c.mu.Lock()
	reg := c.objects[id]
	c.mu.Unlock()
	switch m.Type {
	case MsgNotify:
		if active, ok := m.U32(AttrActive); ok && reg != nil {
			reg.active.Store(active != 0)
		}
	case MsgUnsubscribe:
		if target, ok := m.U32(AttrTarget); ok && reg != nil && reg.gone != nil {
			reg.gone(target)
		}
	case MsgInvoke:
		switch {
		case reg == nil:
			c.reply(m, id, nil, StatusNotFound)
		case reg.obj == nil:
			c.reply(m, id, nil, StatusOK)
			reg.deliver(m)
		default:
			go c.serve(reg, m)
		}
	}
}

// serve runs one method call and answers like libubus: DATA (if the handler
// returned members) then STATUS, both carrying the object id, with the seq
// and peer of the INVOKE; nothing at all when the caller asked for no reply.
func (c *Conn) serve(reg *registration, m *Message) {
	select {
	case reg.calls <- struct{}{}:
		defer func() { <-reg.calls }()
	case <-c.ctx.Done():
		return
	}
	data, st := c.runMethod(reg, m)
	c.reply(m, reg.id, data, st)
}

func (c *Conn) runMethod(reg *registration, m *Message) (Fields, Status) {
	name, ok := m.String(AttrMethod)
	if !ok {
		return nil, StatusInvalidArgument
	}
	meth := reg.obj.method(name)
	if meth == nil {
		return nil, StatusMethodNotFound
	}
	data, ok := m.Fields(AttrData)
	if !ok {
		if m.badData != nil {
			c.log.Info("rejecting ubus call with malformed arguments", "object", reg.obj.Name, "method", name, "err", m.badData)
		}
		return nil, StatusInvalidArgument
	}
	args, err := meth.checkArgs(data)
	if err != nil {
		c.log.Info("rejecting ubus call", "object", reg.obj.Name, "method", name, "err", err)
		return nil, StatusInvalidArgument
	}
	if meth.Handler == nil {
		return nil, StatusNotSupported
	}
	req := &Request{Object: reg.obj.Name, Method: name, Args: args, Caller: m.Peer}
	req.User, _ = m.String(AttrUser)
	req.Group, _ = m.String(AttrGroup)
	ctx, cancel := context.WithTimeout(c.ctx, DefaultTimeout)
	defer cancel()
	out, err := callHandler(ctx, meth.Handler, req)
	if err != nil {
		st := statusOf(err)
		c.log.Info("ubus call failed", "object", reg.obj.Name, "method", name, "status", st.Error(), "err", err)
		return out, st
	}
	return out, StatusOK
}

// callHandler turns a handler panic into UNKNOWN_ERROR: one bad request
// must not take the watchdog down.
func callHandler(ctx context.Context, h Handler, req *Request) (out Fields, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, fmt.Errorf("%w: handler panic: %v\n%s", StatusUnknownError, p, debug.Stack())
		}
	}()
	return h(ctx, req)
}

// reply answers an INVOKE unless it carried NO_REPLY: DATA first when
// there are members (whatever the status), then STATUS.
func (c *Conn) reply(inv *Message, objID uint32, data Fields, st Status) {
	if noReply, _ := inv.U32(AttrNoReply); noReply != 0 {
		return
	}
	if data != nil {
		d := &Message{Type: MsgData, Seq: inv.Seq, Peer: inv.Peer}
		d.add(u32Attr(AttrObjID, objID), dataAttr(AttrData, data))
		if err := c.send(d); err != nil {
			c.log.Warn("cannot send ubus reply", "seq", inv.Seq, "err", err)
			if st == StatusOK {
				st = StatusUnknownError
			}
		}
	}
	s := &Message{Type: MsgStatus, Seq: inv.Seq, Peer: inv.Peer}
	s.add(u32Attr(AttrStatus, uint32(st)), u32Attr(AttrObjID, objID))
	if err := c.send(s); err != nil {
		c.log.Debug("cannot send ubus status", "seq", inv.Seq, "err", err)
	}
}
