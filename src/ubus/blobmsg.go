package ubus

import (
	"encoding/binary"
	"fmt"
	"math"
)

// BlobmsgType is a blobmsg value type. Method signatures carry these numbers
// to say what each argument must be.
type BlobmsgType uint8

// Blobmsg types, numbered as in libubox's blobmsg.h.
const (
	TypeUnspec BlobmsgType = 0
	TypeArray  BlobmsgType = 1
	TypeTable  BlobmsgType = 2
	TypeString BlobmsgType = 3
	TypeInt64  BlobmsgType = 4
	TypeInt32  BlobmsgType = 5
	TypeInt16  BlobmsgType = 6
	TypeInt8   BlobmsgType = 7
	TypeDouble BlobmsgType = 8
	// TypeBool is how JSON booleans travel: an INT8 holding 0 or 1.
	TypeBool = TypeInt8

	typeLast = TypeDouble
)

var blobmsgTypeNames = [...]string{"unspec", "array", "table", "string", "int64", "int32", "int16", "bool", "double"}

func (t BlobmsgType) String() string {
	if t <= typeLast {
		return blobmsgTypeNames[t]
	}
	return fmt.Sprintf("type%d", uint8(t))
}

// isInt reports whether t is one of the integer types (bool included).
func (t BlobmsgType) isInt() bool { return t >= TypeInt64 && t <= TypeInt8 }

// intRange is the range an integer type accepts on encode: signed, or the
// unsigned values the C helpers (blobmsg_add_u32, …) put in the same bits.
func (t BlobmsgType) intRange() (lo, hi int64) {
	switch t {
	case TypeInt8:
		return math.MinInt8, math.MaxUint8
	case TypeInt16:
		return math.MinInt16, math.MaxUint16
	case TypeInt32:
		return math.MinInt32, math.MaxUint32
	default:
		return math.MinInt64, math.MaxInt64
	}
}

// signedRange is the range an integer type holds as a signed number, which
// is what an argument of another width must fit to be converted.
func (t BlobmsgType) signedRange() (lo, hi int64) {
	switch t {
	case TypeInt8:
		return math.MinInt8, math.MaxInt8
	case TypeInt16:
		return math.MinInt16, math.MaxInt16
	case TypeInt32:
		return math.MinInt32, math.MaxInt32
	default:
		return math.MinInt64, math.MaxInt64
	}
}

// maxDepth bounds table/array nesting on decode so hostile input cannot
// drive deep recursion; real ubus payloads nest a handful of levels.
const maxDepth = 64

// Value is one blobmsg value. Type says which of the other fields is used:
// Int for the integer types (bool = INT8 0/1), Float for DOUBLE, Str for
// STRING, Items for TABLE (named) and ARRAY (names empty), Raw for UNSPEC.
type Value struct {
	Type  BlobmsgType
	Int   int64
	Float float64
	Str   string
	Items Fields
	Raw   []byte
}

// Field is a named value: a member of a table, or an array element (no name).
type Field struct {
	Name  string
	Value Value
}

// Fields is an ordered list of blobmsg members: the body of a table, and the
// payload of a DATA attribute (the JSON object of a call or an event). Order
// is kept because it is what callers see in `ubus call` output.
type Fields []Field

// Get returns the value of the last member named name, the one libubox's
// blobmsg_parse would pick.
func (fs Fields) Get(name string) (Value, bool) {
	for i := len(fs) - 1; i >= 0; i-- {
		if fs[i].Name == name {
			return fs[i].Value, true
		}
	}
	return Value{}, false
}

// Value constructors, one per wire type.

// String returns a STRING value.
func String(s string) Value { return Value{Type: TypeString, Str: s} }

// Bool returns an INT8 0/1, how ubus carries booleans.
func Bool(b bool) Value {
	if b {
		return Value{Type: TypeBool, Int: 1}
	}
	return Value{Type: TypeBool}
}

// Int16 returns an INT16 value.
func Int16(v int16) Value { return Value{Type: TypeInt16, Int: int64(v)} }

// Int32 returns an INT32 value, the type JSON integers get from the ubus CLI.
func Int32(v int32) Value { return Value{Type: TypeInt32, Int: int64(v)} }

// Int64 returns an INT64 value.
func Int64(v int64) Value { return Value{Type: TypeInt64, Int: v} }

// Double returns a DOUBLE value.
func Double(v float64) Value { return Value{Type: TypeDouble, Float: v} }

// Table returns a TABLE value with the given members in order.
func Table(fs ...Field) Value { return Value{Type: TypeTable, Items: Fields(fs)} }

// Array returns an ARRAY value with the given elements.
func Array(vs ...Value) Value {
	items := make(Fields, len(vs))
	for i, v := range vs {
		items[i].Value = v
	}
	return Value{Type: TypeArray, Items: items}
}

// decodeFields decodes a container payload of blobmsg attributes.
func decodeFields(b []byte, depth int) (Fields, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("nesting deeper than %d", maxDepth)
	}
	attrs, err := splitAttrs(b)
	if err != nil {
		return nil, err
	}
	fs := make(Fields, 0, len(attrs))
	for i, a := range attrs {
		f, err := decodeField(a, depth)
		if err != nil {
			return nil, fmt.Errorf("member %d: %w", i, err)
		}
		fs = append(fs, f)
	}
	return fs, nil
}

// decodeField checks and decodes one blobmsg attribute: the name header
// (u16 length, name, NUL, padding to 4) and a value of exactly the size its
// type needs, like libubox's blobmsg_check_attr.
func decodeField(a rawAttr, depth int) (Field, error) {
	t := BlobmsgType(a.id)
	if !a.extended {
		return Field{}, fmt.Errorf("%s attribute without a name header (EXTENDED bit clear)", t)
	}
	if t > typeLast {
		return Field{}, fmt.Errorf("unknown blobmsg type %d", a.id)
	}
	p := a.payload
	if len(p) < 2 {
		return Field{}, fmt.Errorf("%s attribute: %d bytes, too short for a name header", t, len(p))
	}
	nameLen := int(binary.BigEndian.Uint16(p))
	hdr := padLen(2 + nameLen + 1)
	if hdr > len(p) {
		return Field{}, fmt.Errorf("%s attribute: name of %d bytes runs past the attribute (%d bytes)", t, nameLen, len(p))
	}
	if p[2+nameLen] != 0 {
		return Field{}, fmt.Errorf("%s attribute: name not NUL-terminated", t)
	}
	f := Field{Name: string(p[2 : 2+nameLen])}
	v, err := decodeValue(t, p[hdr:], depth)
	if err != nil {
		return Field{}, fmt.Errorf("%q: %w", f.Name, err)
	}
	f.Value = v
	return f, nil
}

var intSizes = map[BlobmsgType]int{TypeInt8: 1, TypeInt16: 2, TypeInt32: 4, TypeInt64: 8}

func decodeValue(t BlobmsgType, d []byte, depth int) (Value, error) {
	v := Value{Type: t}
	switch t {
	case TypeUnspec:
		v.Raw = append([]byte(nil), d...)
	case TypeTable, TypeArray:
		items, err := decodeFields(d, depth+1)
		if err != nil {
			return Value{}, err
		}
		v.Items = items
	case TypeString:
		if len(d) == 0 || d[len(d)-1] != 0 {
			return Value{}, fmt.Errorf("string not NUL-terminated")
		}
		v.Str = string(d[:len(d)-1])
	case TypeDouble:
		if len(d) != 8 {
			return Value{}, fmt.Errorf("double of %d bytes, want 8", len(d))
		}
		v.Float = math.Float64frombits(binary.BigEndian.Uint64(d))
	default: // integers
		if n := intSizes[t]; len(d) != n {
			return Value{}, fmt.Errorf("%s of %d bytes, want %d", t, len(d), n)
		}
		switch t {
		case TypeInt8:
			v.Int = int64(int8(d[0]))
		case TypeInt16:
			v.Int = int64(int16(binary.BigEndian.Uint16(d)))
		case TypeInt32:
			v.Int = int64(int32(binary.BigEndian.Uint32(d)))
		case TypeInt64:
			v.Int = int64(binary.BigEndian.Uint64(d))
		}
	}
	return v, nil
}

// fields appends each member as a blobmsg attribute.
func (e *encoder) fields(fs Fields, depth int) {
	if depth > maxDepth {
		e.fail(fmt.Errorf("nesting deeper than %d", maxDepth))
		return
	}
	for _, f := range fs {
		e.field(f, depth)
		if e.err != nil {
			return
		}
	}
}

func (e *encoder) field(f Field, depth int) {
	v := f.Value
	if v.Type > typeLast {
		e.fail(fmt.Errorf("member %q: unknown blobmsg type %d", f.Name, v.Type))
		return
	}
	if len(f.Name) > math.MaxUint16 {
		e.fail(fmt.Errorf("member name of %d bytes is too long", len(f.Name)))
		return
	}
	off := e.open()
	e.buf = binary.BigEndian.AppendUint16(e.buf, uint16(len(f.Name)))
	e.cstring(f.Name)
	for (len(e.buf)-off)%blobAlign != 0 {
		e.buf = append(e.buf, 0)
	}
	switch v.Type {
	case TypeUnspec:
		e.buf = append(e.buf, v.Raw...)
	case TypeTable, TypeArray:
		e.fields(v.Items, depth+1)
	case TypeString:
		e.cstring(v.Str)
	case TypeDouble:
		e.buf = binary.BigEndian.AppendUint64(e.buf, math.Float64bits(v.Float))
	default:
		if lo, hi := v.Type.intRange(); v.Int < lo || v.Int > hi {
			e.fail(fmt.Errorf("member %q: %d out of range for %s", f.Name, v.Int, v.Type))
			return
		}
		switch v.Type {
		case TypeInt8:
			e.buf = append(e.buf, byte(v.Int))
		case TypeInt16:
			e.buf = binary.BigEndian.AppendUint16(e.buf, uint16(v.Int))
		case TypeInt32:
			e.u32(uint32(v.Int))
		case TypeInt64:
			e.buf = binary.BigEndian.AppendUint64(e.buf, uint64(v.Int))
		}
	}
	e.close(off, uint8(v.Type), true)
}

// MarshalBinary encodes the members as the payload of a DATA attribute.
func (fs Fields) MarshalBinary() ([]byte, error) {
	var e encoder
	e.fields(fs, 0)
	return e.buf, e.err
}

// UnmarshalFields decodes the payload of a DATA attribute (or a table body),
// checking every length, alignment and type on the way.
func UnmarshalFields(b []byte) (Fields, error) { return decodeFields(b, 0) }
