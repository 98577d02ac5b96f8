package ubus

import (
	"context"
	"encoding/binary"
	"sync/atomic"
	"testing"
)

// blobAttr encodes one blob attribute: id (with the EXTENDED bit when
// extended), length word, payload, zero padding to 4 bytes.
func blobAttr(id uint8, extended bool, payload []byte) []byte {
	w := uint32(id)<<attrIDShift | uint32(attrHeaderLen+len(payload))
	if extended {
		w |= attrExtended
	}
	b := binary.BigEndian.AppendUint32(nil, w)
	b = append(b, payload...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// blobmsgAttr is a blobmsg member: name header, then the value bytes.
func blobmsgAttr(t BlobmsgType, name string, value []byte) []byte {
	p := binary.BigEndian.AppendUint16(nil, uint16(len(name)))
	p = append(p, name...)
	p = append(p, 0)
	for len(p)%4 != 0 {
		p = append(p, 0)
	}
	return blobAttr(uint8(t), true, append(p, value...))
}

// rawInvoke is an INVOKE as ubusd forwards it, with DATA's content given
// byte for byte.
func rawInvoke(seq uint16, objID uint32, method []byte, data []byte) []byte {
	var body []byte
	body = append(body, blobAttr(uint8(AttrObjID), false, binary.BigEndian.AppendUint32(nil, objID))...)
	body = append(body, blobAttr(uint8(AttrMethod), false, method)...)
	if data != nil {
		body = append(body, blobAttr(uint8(AttrData), false, data)...)
	}
	hdr := []byte{protoVersion, byte(MsgInvoke), 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint16(hdr[2:], seq)
	binary.BigEndian.PutUint32(hdr[4:], testCaller)
	return append(hdr, blobAttr(0, false, body)...)
}

// TestMalformedCallsGetAStatus sends calls our decoder cannot read (ubusd
// forwards DATA as it got it): each gets the status libubus would give,
// none goes unanswered, and no handler runs.
func TestMalformedCallsGetAStatus(t *testing.T) {
	var ran atomic.Bool
	_, w := serveTestObject(t,
		Method{Name: "rotate", Policy: map[string]BlobmsgType{"node": TypeString}, Handler: func(context.Context, *Request) (Fields, error) {
			ran.Store(true)
			return nil, nil
		}})
	str := func(s string) []byte { return append([]byte(s), 0) }
	good := blobmsgAttr(TypeString, "node", str("Chicago"))
	cases := []struct {
		name   string
		method []byte
		data   []byte
		want   Status
	}{
		{"member without a name header", str("rotate"), blobAttr(uint8(TypeString), false, str("Chicago")), StatusInvalidArgument},
		{"string value without its NUL", str("rotate"), blobmsgAttr(TypeString, "node", []byte("Chicago")), StatusInvalidArgument},
		{"int32 of two bytes", str("rotate"), blobmsgAttr(TypeInt32, "node", []byte{0, 1}), StatusInvalidArgument},
		{"unknown blobmsg type", str("rotate"), blobmsgAttr(BlobmsgType(42), "node", str("x")), StatusInvalidArgument},
		{"name longer than the member", str("rotate"), blobAttr(uint8(TypeString), true, []byte{0, 40, 'n', 'o'}), StatusInvalidArgument},
		{"member running past DATA", str("rotate"), append(good, 0, 0, 0, 64), StatusInvalidArgument},
		{"bad member inside a table", str("rotate"), blobmsgAttr(TypeTable, "t", blobAttr(uint8(TypeInt32), false, []byte{0, 0, 0, 1})), StatusInvalidArgument},
		{"method name without its NUL", []byte("rotate"), good, StatusInvalidArgument},
		{"unknown method, malformed data", str("nosuch"), []byte{1, 2, 3}, StatusMethodNotFound},
	}
	for i, tc := range cases {
		seq := uint16(300 + i)
		if _, err := w.nc.Write(rawInvoke(seq, testObjID, tc.method, tc.data)); err != nil {
			t.Fatal(err)
		}
		r := w.recv()
		if r == nil {
			t.Fatalf("%s: no reply at all (the caller would wait for its timeout)", tc.name)
		}
		st, ok := r.U32(AttrStatus)
		if r.Type != MsgStatus || !ok || Status(st) != tc.want || r.Seq != seq || r.Peer != testCaller {
			t.Errorf("%s: got %s status %v seq %d peer %08x, want STATUS %v for seq %d", tc.name, r.Type, Status(st), r.Seq, r.Peer, tc.want, seq)
		}
	}
	if ran.Load() {
		t.Error("a handler ran on a malformed call")
	}
	// The connection survives them all.
	if _, st, ok := w.invoke(400, testObjID, "rotate", Fields{{"node", String("Chicago")}}, true); !ok || st != StatusOK || !ran.Load() {
		t.Errorf("a good call after the malformed ones: status %v (replied %v, handler ran %v)", st, ok, ran.Load())
	}
}
