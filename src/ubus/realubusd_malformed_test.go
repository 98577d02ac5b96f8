package ubus

import (
	"bufio"
	"context"
	"net"
	"testing"
	"time"
)

// TestMalformedCallsThroughRealUbusd sends, as a raw client of the real
// ubusd, calls whose DATA is not valid blobmsg (ubusd forwards DATA as it
// gets it) to the daemon's surflare object: each caller gets
// INVALID_ARGUMENT back through ubusd, as from a libubus server, instead
// of waiting for its timeout; the handler never runs; a good call works
// after them.
func TestMalformedCallsThroughRealUbusd(t *testing.T) {
	r := needRealUbus(t)
	log := &handlerLog{}
	obj, err := SurflareObject(SurflareHandlers{MethodRotate: func(_ context.Context, req *Request) (Fields, error) {
		log.add(req.Method, req.Args)
		return Fields{{"rotated", Bool(true)}}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	recvOrFail(t, runService(t, &Service{Socket: r.sock, Objects: []*Object{obj}}), "registration")

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Dial(ctx, r.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	id, err := c.LookupID(ctx, ObjectName)
	if err != nil {
		t.Fatal(err)
	}

	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", r.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	rd := bufio.NewReader(nc)
	nc.SetDeadline(time.Now().Add(15 * time.Second))
	if _, err := readFrame(rd); err != nil { // ubusd's HELLO
		t.Fatalf("no HELLO from ubusd: %v", err)
	}
	str := func(s string) []byte { return append([]byte(s), 0) }
	good := blobmsgAttr(TypeString, "node", str("Chicago"))
	cases := []struct {
		name string
		data []byte
	}{
		{"member without a name header", blobAttr(uint8(TypeString), false, str("Chicago"))},
		{"string without its NUL", blobmsgAttr(TypeString, "node", []byte("Chicago"))},
		{"int32 of two bytes", blobmsgAttr(TypeInt32, "node", []byte{0, 1})},
		{"unknown blobmsg type", blobmsgAttr(BlobmsgType(42), "node", str("x"))},
		{"member running past DATA", append(good, 0, 0, 0, 64)},
	}
	for i, tc := range cases {
		seq := uint16(500 + i)
		if _, err := nc.Write(rawInvoke(seq, id, str(MethodRotate), tc.data)); err != nil {
			t.Fatal(err)
		}
		for {
			b, err := readFrame(rd)
			if err != nil {
				t.Fatalf("%s: no status from ubusd (%v): the caller would wait for its timeout", tc.name, err)
			}
			m, err := Decode(b)
			if err != nil {
				t.Fatalf("%s: ubusd sent something undecodable: %v", tc.name, err)
			}
			if m.Type != MsgStatus || m.Seq != seq {
				continue
			}
			if st, _ := m.U32(AttrStatus); Status(st) != StatusInvalidArgument {
				t.Errorf("%s: status %v, want %v", tc.name, Status(st), StatusInvalidArgument)
			}
			break
		}
	}
	if calls := log.take(); len(calls) != 0 {
		t.Errorf("the handler ran on malformed calls: %q", calls)
	}
	out, code := r.run("call", ObjectName, MethodRotate, `{"node":"Chicago"}`)
	if code != 0 || len(log.take()) != 1 {
		t.Errorf("a good call after the malformed ones: exit %d\n%s", code, out)
	}
}
