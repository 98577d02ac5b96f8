package ubus

import (
	"context"
	"fmt"
	"strings"
)

// ObjectInfo describes an object found by Lookup.
type ObjectInfo struct {
	Path   string
	ID     uint32
	TypeID uint32
	// Signature holds one table per method; its members are the arguments,
	// each an INT32 whose value is the expected BlobmsgType.
	Signature Fields
}

// Methods returns the signature as method → argument → type.
func (o ObjectInfo) Methods() map[string]map[string]BlobmsgType {
	out := make(map[string]map[string]BlobmsgType, len(o.Signature))
	for _, m := range o.Signature {
		args := map[string]BlobmsgType{}
		for _, a := range m.Value.Items {
			args[a.Name] = BlobmsgType(a.Value.Int)
		}
		out[m.Name] = args
	}
	return out
}

// Lookup lists objects: all of them for an empty path, those starting with
// the prefix for a path ending in "*", else the one object with that path.
// An unknown path is StatusNotFound.
func (c *Conn) Lookup(ctx context.Context, path string) ([]ObjectInfo, error) {
	m := &Message{Type: MsgLookup}
	if path != "" {
		m.add(strAttr(AttrObjPath, path))
	}
	replies, err := c.request(ctx, m, nil)
	if err != nil {
		return nil, fmt.Errorf("looking up ubus object %q: %w", path, err)
	}
	var out []ObjectInfo
	for _, r := range replies {
		id, ok := r.U32(AttrObjID)
		if !ok {
			continue
		}
		info := ObjectInfo{ID: id}
		info.Path, _ = r.String(AttrObjPath)
		info.TypeID, _ = r.U32(AttrObjType)
		info.Signature, _ = r.Fields(AttrSignature)
		out = append(out, info)
	}
	return out, nil
}

// LookupID returns the id of the object at exactly path.
func (c *Conn) LookupID(ctx context.Context, path string) (uint32, error) {
	if path == "" || strings.HasSuffix(path, "*") {
		return 0, fmt.Errorf("looking up ubus object %q: %w: need an exact path", path, StatusInvalidArgument)
	}
	objs, err := c.Lookup(ctx, path)
	if err != nil {
		return 0, err
	}
	if len(objs) == 0 {
		return 0, fmt.Errorf("looking up ubus object %q: %w", path, StatusNotFound)
	}
	return objs[0].ID, nil
}

// Invoke calls method on the object with id and returns the members of each
// DATA reply (usually one, none for methods that only return a status).
// args may be nil: an empty DATA is sent, as the CLI does.
func (c *Conn) Invoke(ctx context.Context, id uint32, method string, args Fields) ([]Fields, error) {
	m := &Message{Type: MsgInvoke, Peer: id}
	m.add(u32Attr(AttrObjID, id), strAttr(AttrMethod, method), dataAttr(AttrData, args))
	replies, err := c.request(ctx, m, nil)
	var out []Fields
	for _, r := range replies {
		if fs, ok := r.Fields(AttrData); ok {
			out = append(out, fs)
		}
	}
	return out, err
}

// CallFields looks up path and invokes method on it, returning the members
// of all DATA replies in order.
func (c *Conn) CallFields(ctx context.Context, path, method string, args Fields) (Fields, error) {
	id, err := c.LookupID(ctx, path)
	if err != nil {
		return nil, err
	}
	replies, err := c.Invoke(ctx, id, method, args)
	var out Fields
	for _, r := range replies {
		out = append(out, r...)
	}
	if err != nil {
		return out, fmt.Errorf("ubus call %s %s: %w", path, method, err)
	}
	return out, nil
}

// Call is `ubus call path method args` with plain Go values (see ValueOf
// and Fields.Map). A non-zero status comes back as a Status error.
func (c *Conn) Call(ctx context.Context, path, method string, args map[string]any) (map[string]any, error) {
	fs, err := FromMap(args)
	if err != nil {
		return nil, fmt.Errorf("ubus call %s %s: arguments: %w", path, method, err)
	}
	out, err := c.CallFields(ctx, path, method, fs)
	if err != nil {
		return nil, err
	}
	return out.Map(), nil
}

// CallJSON is Call with the arguments as JSON text, typed like the ubus CLI
// types them. Bad JSON fails with StatusParseError before anything is sent.
func (c *Conn) CallJSON(ctx context.Context, path, method, args string) (Fields, error) {
	var fs Fields
	if strings.TrimSpace(args) != "" {
		var err error
		if fs, err = ParseJSON([]byte(args)); err != nil {
			return nil, fmt.Errorf("ubus call %s %s: %w", path, method, err)
		}
	}
	return c.CallFields(ctx, path, method, fs)
}

// SendEvent broadcasts an event (`ubus send name data`) through ubusd's
// event object. ubusd acknowledges it whether or not anyone listens.
func (c *Conn) SendEvent(ctx context.Context, name string, data Fields) error {
	if data == nil {
		data = Fields{}
	}
	m := &Message{Type: MsgInvoke, Peer: systemObjectEvent}
	m.add(u32Attr(AttrObjID, systemObjectEvent), strAttr(AttrMethod, "send"),
		dataAttr(AttrData, Fields{{Name: "id", Value: String(name)}, {Name: "data", Value: Table(data...)}}))
	if _, err := c.request(ctx, m, nil); err != nil {
		return fmt.Errorf("sending ubus event %s: %w", name, err)
	}
	return nil
}
