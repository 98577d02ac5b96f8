package ubus

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// Every message the real ubusd and libubus exchanged decodes without error
// and encodes back to the very same bytes.
func TestCodecRoundTripsEveryFixtureMessage(t *testing.T) {
	total := 0
	for _, name := range allTraces(t) {
		for i, l := range loadTrace(t, name) {
			m, err := Decode(l.msg)
			if err != nil {
				t.Errorf("%s #%d: decode: %v", name, i, err)
				continue
			}
			got, err := m.Encode()
			if err != nil {
				t.Errorf("%s #%d: encode: %v", name, i, err)
				continue
			}
			if !bytes.Equal(got, l.msg) {
				t.Errorf("%s #%d: re-encoded bytes differ\n got %x\nwant %x", name, i, got, l.msg)
			}
			total++
		}
	}
	t.Logf("%d fixture messages round-tripped", total)
}

// The decoded values are the ones the ubus CLI printed for call_status.
func TestCodecDecodesStatusReplyAsCLIShowsIt(t *testing.T) {
	tr := loadTrace(t, "call_status.trace")
	m, err := Decode(tr[5].msg) // S>C DATA with the status reply
	if err != nil {
		t.Fatal(err)
	}
	if m.Type != MsgData || m.Seq != 2 {
		t.Fatalf("got %s seq %d, want DATA seq 2", m.Type, m.Seq)
	}
	data, ok := m.Fields(AttrData)
	if !ok {
		t.Fatal("no DATA attribute")
	}
	got, err := json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"state":"up","node":"Paris","uptime":42,"healthy":true,"peers":["Dallas","Tokyo"]}`
	if string(got) != want {
		t.Errorf("DATA as JSON:\n got %s\nwant %s", got, want)
	}
	if v, _ := data.Get("uptime"); v.Type != TypeInt32 {
		t.Errorf("uptime type %s, want int32", v.Type)
	}
}

// Hostile or broken input is refused with an error that says what is wrong,
// never a panic or an out-of-bounds read.
func TestDecodeRejectsMalformedMessages(t *testing.T) {
	hdr := func(top ...byte) []byte { return append([]byte{0, byte(MsgStatus), 0, 1, 0, 0, 0, 0}, top...) }
	cases := map[string][]byte{
		"short":                    {0, 1, 0},
		"version 1":                {1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 4},
		"top-level says longer":    hdr(0, 0, 0, 8),
		"top-level says shorter":   hdr(0, 0, 0, 4, 0, 0, 0, 0),
		"top-level extended":       hdr(0x80, 0, 0, 4),
		"top-level id 3":           hdr(3, 0, 0, 4),
		"attr length below 4":      hdr(0, 0, 0, 8, 1, 0, 0, 2),
		"attr runs past container": hdr(0, 0, 0, 8, 1, 0, 0, 9),
		"stray bytes":              hdr(0, 0, 0, 10, 1, 0),
		"u32 of 2 bytes":           hdr(0, 0, 0, 12, 1, 0, 0, 6, 0, 0, 0, 0),
		"string without NUL":       hdr(0, 0, 0, 12, 2, 0, 0, 6, 'a', 'b', 0, 0),
		"u8 of 4 bytes":            hdr(0, 0, 0, 12, 9, 0, 0, 8, 0, 0, 0, 1),
		"extended top-level attr":  hdr(0, 0, 0, 12, 0x81, 0, 0, 8, 0, 0, 0, 1),
		"bad subscriber entry":     hdr(0, 0, 0, 16, 11, 0, 0, 12, 4, 0, 0, 8, 0, 0, 0, 1),
		// DATA containing one blobmsg attribute each
		"blobmsg without name hdr": hdr(0, 0, 0, 16, 7, 0, 0, 12, 3, 0, 0, 8, 'a', 'b', 'c', 0),
		"blobmsg name overruns":    hdr(0, 0, 0, 16, 7, 0, 0, 12, 0x83, 0, 0, 8, 0, 9, 'a', 0),
		"blobmsg name not NUL":     hdr(0, 0, 0, 16, 7, 0, 0, 12, 0x83, 0, 0, 8, 0, 1, 'a', 'b'),
		"blobmsg type 9":           hdr(0, 0, 0, 16, 7, 0, 0, 12, 0x89, 0, 0, 8, 0, 0, 0, 0),
		"int32 of 2 bytes":         hdr(0, 0, 0, 20, 7, 0, 0, 16, 0x85, 0, 0, 10, 0, 0, 0, 0, 0, 1, 0, 0),
		"bool of 2 bytes":          hdr(0, 0, 0, 20, 7, 0, 0, 16, 0x87, 0, 0, 10, 0, 0, 0, 0, 0, 1, 0, 0),
		"double of 4 bytes":        hdr(0, 0, 0, 20, 7, 0, 0, 16, 0x88, 0, 0, 12, 0, 0, 0, 0, 0, 0, 0, 1),
		"blobmsg string no NUL":    hdr(0, 0, 0, 20, 7, 0, 0, 16, 0x83, 0, 0, 12, 0, 0, 0, 0, 'a', 'b', 'c', 'd'),
		"table with bad child":     hdr(0, 0, 0, 20, 7, 0, 0, 16, 0x82, 0, 0, 12, 0, 0, 0, 0, 0x85, 0, 0, 3),
	}
	for name, b := range cases {
		if m, err := Decode(b); err == nil {
			t.Errorf("%s: decoded without error: %+v", name, m)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

// Deep nesting is cut off instead of recursing without bound.
func TestDecodeLimitsNesting(t *testing.T) {
	v := String("x")
	for range maxDepth + 5 {
		v = Table(Field{Name: "t", Value: v})
	}
	b, err := (&Message{Type: MsgData}).add(dataAttr(AttrData, Fields{{Name: "t", Value: v}})).Encode()
	if err == nil {
		if _, err := Decode(b); err == nil {
			t.Fatal("decoded a message nested beyond the limit")
		}
	}
}

// Nothing larger than ubusd accepts is ever put on the wire.
func TestEncodeRefusesOversizedMessage(t *testing.T) {
	big := string(make([]byte, MaxMessageLen))
	_, err := (&Message{Type: MsgData}).add(dataAttr(AttrData, Fields{{Name: "blob", Value: String(big)}})).Encode()
	if err == nil {
		t.Fatal("encoded a message above MaxMessageLen")
	}
}

// JSON arguments are typed the way the ubus CLI types them: the bytes of
// send_listen's event payload come out exactly.
func TestParseJSONTypesLikeTheCLI(t *testing.T) {
	fs, err := ParseJSON([]byte(`{"s":"x","i":3,"big":5000000000,"f":1.5,"b":false,"n":null,"a":[1,"two"],"t":{"k":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []BlobmsgType{TypeString, TypeInt32, TypeInt64, TypeDouble, TypeBool, TypeUnspec, TypeArray, TypeTable}
	for i, f := range fs {
		if f.Value.Type != want[i] {
			t.Errorf("%s: type %s, want %s", f.Name, f.Value.Type, want[i])
		}
	}
	back, _ := json.Marshal(fs)
	if string(back) != `{"s":"x","i":3,"big":5000000000,"f":1.5,"b":false,"n":null,"a":[1,"two"],"t":{"k":true}}` {
		t.Errorf("JSON round trip: %s", back)
	}
	for _, bad := range []string{`{node:`, `[1]`, `"x"`, `{"a":1} {}`, ``} {
		if _, err := ParseJSON([]byte(bad)); !errors.Is(err, StatusParseError) {
			t.Errorf("ParseJSON(%q) = %v, want a parse error", bad, err)
		}
	}
}

func TestValueOfAndMapRoundTrip(t *testing.T) {
	in := map[string]any{"s": "x", "b": true, "i": 7, "u": uint32(0xf6708bec), "f": 2.5,
		"arr": []string{"a", "b"}, "t": map[string]any{"n": int64(1) << 40}}
	fs, err := FromMap(in)
	if err != nil {
		t.Fatal(err)
	}
	got := fs.Map()
	want := map[string]any{"s": "x", "b": true, "i": int32(7), "u": int32(-160396308), "f": 2.5,
		"arr": []any{"a", "b"}, "t": map[string]any{"n": int64(1) << 40}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v\nwant %#v", got, want)
	}
	if _, err := FromMap(map[string]any{"ch": make(chan int)}); err == nil {
		t.Error("a channel converted without error")
	}
}
