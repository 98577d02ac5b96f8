package ubus

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
)

// Conversions between blobmsg and the shapes Go code and users deal in:
// JSON text (what `ubus call` takes and prints) and plain Go values.

// MarshalJSON renders the members as a JSON object in wire order, the way
// the ubus CLI prints a reply (INT8 as a boolean).
func (fs Fields) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	if err := writeJSONObject(&b, fs); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// MarshalJSON renders one value as JSON.
func (v Value) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	if err := writeJSONValue(&b, v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func writeJSONObject(b *bytes.Buffer, fs Fields) error {
	b.WriteByte('{')
	for i, f := range fs {
		if i > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(f.Name)
		b.Write(name)
		b.WriteByte(':')
		if err := writeJSONValue(b, f.Value); err != nil {
			return err
		}
	}
	b.WriteByte('}')
	return nil
}

func writeJSONValue(b *bytes.Buffer, v Value) error {
	switch v.Type {
	case TypeTable:
		return writeJSONObject(b, v.Items)
	case TypeArray:
		b.WriteByte('[')
		for i, it := range v.Items {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSONValue(b, it.Value); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case TypeString:
		s, _ := json.Marshal(v.Str)
		b.Write(s)
	case TypeBool:
		b.WriteString(strconv.FormatBool(v.Int != 0))
	case TypeInt16, TypeInt32, TypeInt64:
		b.WriteString(strconv.FormatInt(v.Int, 10))
	case TypeDouble:
		if math.IsNaN(v.Float) || math.IsInf(v.Float, 0) {
			b.WriteString("null")
			return nil
		}
		b.WriteString(strconv.FormatFloat(v.Float, 'g', -1, 64))
	case TypeUnspec:
		b.WriteString("null")
	default:
		return fmt.Errorf("unknown blobmsg type %d", v.Type)
	}
	return nil
}

// ParseJSON turns a JSON object into members with the ubus CLI's typing:
// integers become INT32 (INT64 when they do not fit), other numbers DOUBLE,
// booleans INT8, null UNSPEC; key order is kept. A parse error wraps
// StatusParseError, the code the CLI reports for bad JSON.
func ParseJSON(text []byte) (Fields, error) {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	v, err := parseJSONValue(dec, 0)
	if err == nil && v.Type != TypeTable {
		err = fmt.Errorf("want a JSON object, got %s", v.Type)
	}
	if err == nil {
		if _, extra := dec.Token(); extra == nil {
			err = fmt.Errorf("trailing data after the JSON object")
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", StatusParseError, err)
	}
	return v.Items, nil
}

func parseJSONValue(dec *json.Decoder, depth int) (Value, error) {
	if depth > maxDepth {
		return Value{}, fmt.Errorf("nesting deeper than %d", maxDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return Value{}, err
	}
	switch t := tok.(type) {
	case json.Delim:
		v := Value{Type: TypeArray, Items: Fields{}}
		if t == '{' {
			v.Type = TypeTable
		} else if t != '[' {
			return Value{}, fmt.Errorf("unexpected %q", t)
		}
		for dec.More() {
			var f Field
			if v.Type == TypeTable {
				k, err := dec.Token()
				if err != nil {
					return Value{}, err
				}
				f.Name, _ = k.(string)
			}
			if f.Value, err = parseJSONValue(dec, depth+1); err != nil {
				return Value{}, err
			}
			v.Items = append(v.Items, f)
		}
		_, err := dec.Token() // closing delimiter
		return v, err
	case string:
		return String(t), nil
	case bool:
		return Bool(t), nil
	case nil:
		return Value{Type: TypeUnspec}, nil
	case json.Number:
		return numberValue(t)
	}
	return Value{}, fmt.Errorf("unexpected JSON token %v", tok)
}

// Map converts members to plain Go values: string, bool (INT8), int16,
// int32, int64, float64, map[string]any (TABLE), []any (ARRAY), nil
// (UNSPEC). A repeated name keeps its last value.
func (fs Fields) Map() map[string]any {
	m := make(map[string]any, len(fs))
	for _, f := range fs {
		m[f.Name] = f.Value.Any()
	}
	return m
}

// Any converts a value to a plain Go value (see Fields.Map).
func (v Value) Any() any {
	switch v.Type {
	case TypeString:
		return v.Str
	case TypeBool:
		return v.Int != 0
	case TypeInt16:
		return int16(v.Int)
	case TypeInt32:
		return int32(v.Int)
	case TypeInt64:
		return v.Int
	case TypeDouble:
		return v.Float
	case TypeTable:
		return v.Items.Map()
	case TypeArray:
		out := make([]any, len(v.Items))
		for i, it := range v.Items {
			out[i] = it.Value.Any()
		}
		return out
	}
	return nil
}

// FromMap converts a map of plain Go values (see ValueOf) to members, keys
// sorted so the bytes on the wire do not depend on map iteration order.
func FromMap(m map[string]any) (Fields, error) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fs := make(Fields, 0, len(m))
	for _, k := range keys {
		v, err := ValueOf(m[k])
		if err != nil {
			return nil, fmt.Errorf("%q: %w", k, err)
		}
		fs = append(fs, Field{Name: k, Value: v})
	}
	return fs, nil
}

// ValueOf converts a plain Go value: Value and Fields pass through; string;
// bool → INT8; int8/uint8 → INT8; int16/uint16 → INT16; int32 → INT32;
// uint32 → INT32 bits (like blobmsg_add_u32); int, int64, uint → INT32
// when it fits, else INT64 (as the CLI does for JSON); float32/64 → DOUBLE; []byte → UNSPEC; nil → UNSPEC; maps with
// string keys → TABLE; slices and arrays → ARRAY.
func ValueOf(x any) (Value, error) {
	switch t := x.(type) {
	case nil:
		return Value{Type: TypeUnspec}, nil
	case Value:
		return t, nil
	case Fields:
		return Table(t...), nil
	case string:
		return String(t), nil
	case bool:
		return Bool(t), nil
	case int8:
		return Value{Type: TypeInt8, Int: int64(t)}, nil
	case uint8:
		return Value{Type: TypeInt8, Int: int64(t)}, nil
	case int16:
		return Int16(t), nil
	case uint16:
		return Value{Type: TypeInt16, Int: int64(t)}, nil
	case int32:
		return Int32(t), nil
	case int:
		return intValue(int64(t)), nil
	case int64:
		return intValue(t), nil
	case uint32:
		// u32 values (object ids) travel as INT32 bits, like blobmsg_add_u32.
		return Value{Type: TypeInt32, Int: int64(t)}, nil
	case uint:
		if uint64(t) > math.MaxInt64 {
			return Value{}, fmt.Errorf("%d does not fit int64", t)
		}
		return intValue(int64(t)), nil
	case float32:
		return Double(float64(t)), nil
	case float64:
		return Double(t), nil
	case []byte:
		return Value{Type: TypeUnspec, Raw: t}, nil
	case json.Number:
		return numberValue(t)
	case map[string]any:
		fs, err := FromMap(t)
		return Table(fs...), err
	}
	rv := reflect.ValueOf(x)
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		items := make(Fields, rv.Len())
		for i := range items {
			v, err := ValueOf(rv.Index(i).Interface())
			if err != nil {
				return Value{}, fmt.Errorf("[%d]: %w", i, err)
			}
			items[i].Value = v
		}
		return Value{Type: TypeArray, Items: items}, nil
	case reflect.Map:
		if rv.Type().Key().Kind() == reflect.String {
			m := make(map[string]any, rv.Len())
			for it := rv.MapRange(); it.Next(); {
				m[it.Key().String()] = it.Value().Interface()
			}
			fs, err := FromMap(m)
			return Table(fs...), err
		}
	}
	return Value{}, fmt.Errorf("cannot send a %T over ubus", x)
}

// intValue mirrors the CLI: INT32 when the value fits, INT64 otherwise.
func intValue(n int64) Value {
	if n >= math.MinInt32 && n <= math.MaxInt32 {
		return Int32(int32(n))
	}
	return Int64(n)
}

// numberValue types a JSON number the way the CLI does.
func numberValue(n json.Number) (Value, error) {
	if i, err := n.Int64(); err == nil {
		return intValue(i), nil
	}
	f, err := n.Float64()
	if err != nil {
		return Value{}, err
	}
	return Double(f), nil
}
