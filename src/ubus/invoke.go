package ubus

import (
	"encoding/binary"
	"fmt"
)

// A method call always gets a status, as from libubus: a caller must never
// wait for its timeout because our decoder disliked the request. ubusd
// checks the attributes it reads itself (object id, method name) before it
// forwards an INVOKE, but it passes the call's DATA on as it got it, and a
// client of ubusd may send anything there. libubus does not drop such a
// message either: it parses the top-level attributes one by one
// (blob_parse_untrusted with its policy), keeps those that check out, and
// hands DATA to the method's handler unchecked.

// salvageInvoke reads an INVOKE that Decode refused, the way libubus's
// ubus_parse_msg does: each top-level attribute is kept if it checks out
// by itself (a u32 of 4 bytes, a NUL-terminated string, a u8 of 1 byte; the
// last one of an id wins), iteration stops at the first attribute whose
// length leaves the message, and a DATA whose blobmsg content is malformed
// is left out (badData says why). It returns nil for anything but an INVOKE
// with a sound header.
func salvageInvoke(b []byte) *Message {
	if len(b) < headerLen+attrHeaderLen || b[0] != protoVersion || MsgType(b[1]) != MsgInvoke {
		return nil
	}
	m := &Message{Type: MsgInvoke, Seq: binary.BigEndian.Uint16(b[2:]), Peer: binary.BigEndian.Uint32(b[4:])}
	total := int(binary.BigEndian.Uint32(b[headerLen:]) & attrLenMask)
	if total < attrHeaderLen || total > len(b)-headerLen {
		return nil
	}
	got := map[AttrID]Attr{}
	var order []AttrID
	keep := func(a Attr) {
		if _, seen := got[a.ID]; !seen {
			order = append(order, a.ID)
		}
		got[a.ID] = a
	}
	body := b[headerLen+attrHeaderLen : headerLen+total]
	for len(body) >= attrHeaderLen {
		w := binary.BigEndian.Uint32(body)
		raw := int(w & attrLenMask)
		if raw < attrHeaderLen || padLen(raw) > len(body) {
			break
		}
		id, p := AttrID((w&attrIDMask)>>attrIDShift), body[attrHeaderLen:raw]
		body = body[padLen(raw):]
		switch id.kind() {
		case kindU32:
			if len(p) == 4 {
				keep(Attr{ID: id, Int: binary.BigEndian.Uint32(p)})
			}
		case kindU8:
			if len(p) == 1 {
				keep(Attr{ID: id, Int: uint32(p[0])})
			}
		case kindString:
			if len(p) > 0 && p[len(p)-1] == 0 {
				keep(Attr{ID: id, Str: cString(p)})
			}
		case kindFields:
			fs, err := decodeFields(p, 0)
			if err != nil {
				if id == AttrData {
					m.badData = err
				}
				continue
			}
			if id == AttrData {
				m.badData = nil
			}
			keep(Attr{ID: id, Fields: fs})
		}
	}
	for _, id := range order {
		m.Attrs = append(m.Attrs, got[id])
	}
	return m
}

// cString is the C string at the start of p: up to its first NUL.
func cString(p []byte) string {
	for i, c := range p {
		if c == 0 {
			return string(p[:i])
		}
	}
	return string(p)
}

// SessionArg is the argument uhttpd's ubus gateway adds to every call it
// makes for a LuCI session (its session id). rpcd lets it through every
// declared policy, and so must we, or no LuCI call would pass.
const SessionArg = "ubus_rpc_session"

// checkArgs holds the arguments against the method's policy the way rpcd
// holds the calls of the objects it serves from ucode
// (rpc_ucode_validate_call_args), the strictest check a real OpenWrt
// object makes, and the one LuCI users meet every day:
//
//   - every argument must be declared, with exactly the declared blobmsg
//     type: an INT64 is not an INT32 (the ubus CLI sends numbers beyond
//     32 bits as INT64), an INT32 is not a boolean (the CLI sends JSON true
//     and false as booleans, 1 and 0 as INT32), a DOUBLE is not an integer;
//   - the one undeclared argument allowed is SessionArg, as a string;
//   - and, our own addition, Required arguments must be present.
//
// A policy type of TypeUnspec accepts any type. Anything else is an error,
// which the caller answers with UBUS_STATUS_INVALID_ARGUMENT.
func (m *Method) checkArgs(args Fields) (Fields, error) {
	for _, a := range args {
		want, ok := m.Policy[a.Name]
		switch {
		case !ok && a.Name == SessionArg && a.Value.Type == TypeString:
		case !ok:
			return nil, fmt.Errorf("argument %q is not one of %s's", a.Name, m.Name)
		case want != TypeUnspec && a.Value.Type != want:
			return nil, fmt.Errorf("argument %q: got %s, want %s", a.Name, a.Value.Type, want)
		}
	}
	for _, r := range m.Required {
		if _, ok := args.Get(r); !ok {
			return nil, fmt.Errorf("missing required argument %q", r)
		}
	}
	return args, nil
}
