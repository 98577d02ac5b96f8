package ubus

import (
	"encoding/binary"
	"fmt"
)

// AttrID is a UBUS_ATTR_* id of a top-level attribute.
type AttrID uint8

// Top-level attribute ids, numbered as in ubusmsg.h.
const (
	AttrUnspec      AttrID = 0
	AttrStatus      AttrID = 1  // u32 status code
	AttrObjPath     AttrID = 2  // string
	AttrObjID       AttrID = 3  // u32
	AttrMethod      AttrID = 4  // string (method, or event name on delivery)
	AttrObjType     AttrID = 5  // u32
	AttrSignature   AttrID = 6  // blobmsg tables, one per method
	AttrData        AttrID = 7  // blobmsg members
	AttrTarget      AttrID = 8  // u32
	AttrActive      AttrID = 9  // u8
	AttrNoReply     AttrID = 10 // u8
	AttrSubscribers AttrID = 11 // container of OBJID
	AttrUser        AttrID = 12 // string
	AttrGroup       AttrID = 13 // string
)

// attrKind says how an attribute's payload is stored; it is the policy
// libubus checks (ubus_policy) before it trusts an attribute.
type attrKind uint8

const (
	kindRaw attrKind = iota
	kindU32
	kindU8
	kindString
	kindFields
	kindIDList
)

func (id AttrID) kind() attrKind {
	switch id {
	case AttrStatus, AttrObjID, AttrObjType, AttrTarget:
		return kindU32
	case AttrActive, AttrNoReply:
		return kindU8
	case AttrObjPath, AttrMethod, AttrUser, AttrGroup:
		return kindString
	case AttrSignature, AttrData:
		return kindFields
	case AttrSubscribers:
		return kindIDList
	}
	return kindRaw
}

// Attr is one top-level attribute. ID decides which field holds the payload:
// Int for u32/u8 ids, Str for strings, Fields for DATA and SIGNATURE, IDs for
// SUBSCRIBERS, Raw for ids this package does not know (kept as is).
type Attr struct {
	ID     AttrID
	Int    uint32
	Str    string
	Fields Fields
	IDs    []uint32
	Raw    []byte
}

// Message is one decoded ubus message. Attrs keep their wire order, so a
// decoded message encodes back to the same bytes.
type Message struct {
	Type  MsgType
	Seq   uint16
	Peer  uint32
	Attrs []Attr

	// badData is why a salvaged INVOKE has no DATA (see salvageInvoke).
	badData error
}

// Attribute constructors for building messages.

func u32Attr(id AttrID, v uint32) Attr        { return Attr{ID: id, Int: v} }
func strAttr(id AttrID, s string) Attr        { return Attr{ID: id, Str: s} }
func dataAttr(id AttrID, fs Fields) Attr      { return Attr{ID: id, Fields: fs} }
func u8Attr(id AttrID, v bool) Attr           { return Attr{ID: id, Int: map[bool]uint32{true: 1}[v]} }
func (m *Message) add(attrs ...Attr) *Message { m.Attrs = append(m.Attrs, attrs...); return m }

// find returns the last attribute with id, as libubus's parser keeps the last.
func (m *Message) find(id AttrID) (*Attr, bool) {
	for i := len(m.Attrs) - 1; i >= 0; i-- {
		if m.Attrs[i].ID == id {
			return &m.Attrs[i], true
		}
	}
	return nil, false
}

// U32 returns a u32 (or u8) attribute's value.
func (m *Message) U32(id AttrID) (uint32, bool) {
	a, ok := m.find(id)
	if !ok {
		return 0, false
	}
	return a.Int, true
}

// String returns a string attribute's value.
func (m *Message) String(id AttrID) (string, bool) {
	a, ok := m.find(id)
	if !ok {
		return "", false
	}
	return a.Str, true
}

// Fields returns the blobmsg members of a DATA or SIGNATURE attribute.
func (m *Message) Fields(id AttrID) (Fields, bool) {
	a, ok := m.find(id)
	if !ok {
		return nil, false
	}
	return a.Fields, true
}

// Decode parses one whole message (header + top-level blob), checking every
// length, alignment and attribute type. It never panics on hostile input.
func Decode(b []byte) (*Message, error) {
	if len(b) < headerLen+attrHeaderLen {
		return nil, fmt.Errorf("ubus message: %d bytes, shorter than a header", len(b))
	}
	if len(b) > headerLen+MaxMessageLen {
		return nil, fmt.Errorf("ubus message: %d bytes, above limit %d", len(b), MaxMessageLen)
	}
	if b[0] != protoVersion {
		return nil, fmt.Errorf("ubus message: version %d, want %d", b[0], protoVersion)
	}
	m := &Message{
		Type: MsgType(b[1]),
		Seq:  binary.BigEndian.Uint16(b[2:]),
		Peer: binary.BigEndian.Uint32(b[4:]),
	}
	w := binary.BigEndian.Uint32(b[headerLen:])
	if w&^attrLenMask != 0 {
		return nil, fmt.Errorf("ubus %s: top-level blob has id %d / extended flag set, want a plain id 0", m.Type, (w&attrIDMask)>>attrIDShift)
	}
	if raw := int(w & attrLenMask); raw != len(b)-headerLen {
		return nil, fmt.Errorf("ubus %s: top-level blob says %d bytes, message has %d", m.Type, raw, len(b)-headerLen)
	}
	attrs, err := splitAttrs(b[headerLen+attrHeaderLen:])
	if err != nil {
		return nil, fmt.Errorf("ubus %s: %w", m.Type, err)
	}
	for _, a := range attrs {
		at, err := decodeAttr(a)
		if err != nil {
			return nil, fmt.Errorf("ubus %s: attribute %d: %w", m.Type, a.id, err)
		}
		m.Attrs = append(m.Attrs, at)
	}
	return m, nil
}

func decodeAttr(a rawAttr) (Attr, error) {
	id := AttrID(a.id)
	at := Attr{ID: id}
	if a.extended {
		return at, fmt.Errorf("unexpected EXTENDED flag on a top-level attribute")
	}
	p := a.payload
	switch id.kind() {
	case kindU32:
		if len(p) != 4 {
			return at, fmt.Errorf("u32 of %d bytes", len(p))
		}
		at.Int = binary.BigEndian.Uint32(p)
	case kindU8:
		if len(p) != 1 {
			return at, fmt.Errorf("u8 of %d bytes", len(p))
		}
		at.Int = uint32(p[0])
	case kindString:
		if len(p) == 0 || p[len(p)-1] != 0 {
			return at, fmt.Errorf("string not NUL-terminated")
		}
		at.Str = string(p[:len(p)-1])
	case kindFields:
		fs, err := decodeFields(p, 0)
		if err != nil {
			return at, err
		}
		at.Fields = fs
	case kindIDList:
		subs, err := splitAttrs(p)
		if err != nil {
			return at, err
		}
		for _, s := range subs {
			if AttrID(s.id) != AttrObjID || s.extended || len(s.payload) != 4 {
				return at, fmt.Errorf("subscriber entry is not a u32 OBJID")
			}
			at.IDs = append(at.IDs, binary.BigEndian.Uint32(s.payload))
		}
	default:
		at.Raw = append([]byte(nil), p...)
	}
	return at, nil
}

// Encode serialises a message. It fails, rather than send something ubusd
// would refuse, when the result is larger than MaxMessageLen.
func (m *Message) Encode() ([]byte, error) {
	e := encoder{buf: make([]byte, headerLen, 64)}
	e.buf[0] = protoVersion
	e.buf[1] = byte(m.Type)
	binary.BigEndian.PutUint16(e.buf[2:], m.Seq)
	binary.BigEndian.PutUint32(e.buf[4:], m.Peer)
	top := e.open()
	for _, a := range m.Attrs {
		e.attr(a)
	}
	e.close(top, 0, false)
	if e.err != nil {
		return nil, fmt.Errorf("encoding ubus %s: %w", m.Type, e.err)
	}
	if n := len(e.buf) - headerLen; n > MaxMessageLen {
		return nil, fmt.Errorf("encoding ubus %s: %d bytes, above limit %d", m.Type, n, MaxMessageLen)
	}
	return e.buf, nil
}

func (e *encoder) attr(a Attr) {
	if a.ID > attrIDMask>>attrIDShift {
		e.fail(fmt.Errorf("attribute id %d does not fit 7 bits", a.ID))
		return
	}
	off := e.open()
	switch a.ID.kind() {
	case kindU32:
		e.u32(a.Int)
	case kindU8:
		e.buf = append(e.buf, byte(a.Int))
	case kindString:
		e.cstring(a.Str)
	case kindFields:
		e.fields(a.Fields, 0)
	case kindIDList:
		for _, id := range a.IDs {
			sub := e.open()
			e.u32(id)
			e.close(sub, uint8(AttrObjID), false)
		}
	default:
		e.buf = append(e.buf, a.Raw...)
	}
	e.close(off, uint8(a.ID), false)
}
