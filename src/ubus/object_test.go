package ubus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

const (
	testObjID  = 0xc0ffee01
	testCaller = 0x5eed0001
)

// invoke plays ubusd delivering a call to our object and collects the reply:
// the DATA members (nil if none) and the status. ok is false if nothing came.
func (w *wireEnd) invoke(seq uint16, objID uint32, method string, args Fields, withData bool) (Fields, Status, bool) {
	w.t.Helper()
	m := &Message{Type: MsgInvoke, Seq: seq, Peer: testCaller}
	m.add(u32Attr(AttrObjID, objID), strAttr(AttrMethod, method), strAttr(AttrUser, "root"), strAttr(AttrGroup, "root"))
	if withData {
		m.add(dataAttr(AttrData, args))
	}
	w.send(m)
	var data Fields
	for {
		r := w.recv()
		if r == nil {
			return nil, 0, false
		}
		if r.Seq != seq || r.Peer != testCaller {
			w.t.Fatalf("reply seq %d peer %08x, want the invoke's %d / %08x", r.Seq, r.Peer, seq, testCaller)
		}
		if id, _ := r.U32(AttrObjID); id != objID {
			w.t.Fatalf("reply OBJID %08x, want %08x", id, objID)
		}
		switch r.Type {
		case MsgData:
			data, _ = r.Fields(AttrData)
		case MsgStatus:
			st, _ := r.U32(AttrStatus)
			return data, Status(st), true
		default:
			w.t.Fatalf("unexpected %s in reply", r.Type)
		}
	}
}

type callLog struct{ n atomic.Int32 }

func serveTestObject(t *testing.T, methods ...Method) (*Conn, *wireEnd) {
	t.Helper()
	c, w := newPairConn(t, 0x1234abcd)
	done := make(chan error, 1)
	go func() { done <- c.AddObject(context.Background(), &Object{Name: "test", Methods: methods}) }()
	w.answerAddObject(testObjID, 0x7e570001)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return c, w
}

func TestServerChecksArgumentsAgainstPolicy(t *testing.T) {
	var seen atomic.Value
	echo := func(_ context.Context, r *Request) (Fields, error) {
		seen.Store(r.Args)
		return Fields{{"ok", Bool(true)}}, nil
	}
	_, w := serveTestObject(t,
		Method{Name: "rotate", Policy: map[string]BlobmsgType{"node": TypeString}, Required: []string{"node"}, Handler: echo},
		Method{Name: "log", Policy: map[string]BlobmsgType{"lines": TypeInt32}, Handler: echo},
		Method{Name: "diag", Policy: map[string]BlobmsgType{"enable": TypeBool}, Required: []string{"enable"}, Handler: echo},
	)
	cases := []struct {
		name, method string
		args         Fields
		want         Status
		wantArgs     string // JSON the handler saw; "" = handler must not run
	}{
		{"string ok", "rotate", Fields{{"node", String("Chicago")}}, StatusOK, `{"node":"Chicago"}`},
		{"string given as int", "rotate", Fields{{"node", Int32(5)}}, StatusInvalidArgument, ""},
		{"required missing", "rotate", Fields{}, StatusInvalidArgument, ""},
		{"unknown argument", "rotate", Fields{{"node", String("A")}, {"x", Int32(1)}}, StatusInvalidArgument, ""},
		{"LuCI's session id passes", "rotate", Fields{{"node", String("A")}, {SessionArg, String("0123abcd")}}, StatusOK, `{"node":"A","ubus_rpc_session":"0123abcd"}`},
		{"session id not a string", "rotate", Fields{{"node", String("A")}, {SessionArg, Int32(1)}}, StatusInvalidArgument, ""},
		{"int32 ok", "log", Fields{{"lines", Int32(200)}}, StatusOK, `{"lines":200}`},
		{"int64 where int32 is declared", "log", Fields{{"lines", Int64(200)}}, StatusInvalidArgument, ""},
		{"int16 where int32 is declared", "log", Fields{{"lines", Int16(200)}}, StatusInvalidArgument, ""},
		{"double where int32 is declared", "log", Fields{{"lines", Double(200)}}, StatusInvalidArgument, ""},
		{"optional int absent", "log", Fields{}, StatusOK, `{}`},
		{"bool ok", "diag", Fields{{"enable", Bool(false)}}, StatusOK, `{"enable":false}`},
		{"bool as JSON number 1", "diag", Fields{{"enable", Int32(1)}}, StatusInvalidArgument, ""},
		{"bool as string", "diag", Fields{{"enable", String("yes")}}, StatusInvalidArgument, ""},
		{"unknown method", "nosuchmethod", Fields{}, StatusMethodNotFound, ""},
	}
	for i, tc := range cases {
		seen.Store(Fields(nil))
		data, st, ok := w.invoke(uint16(100+i), testObjID, tc.method, tc.args, true)
		if !ok || st != tc.want {
			t.Errorf("%s: status %v (replied %v), want %v", tc.name, st, ok, tc.want)
			continue
		}
		got, _ := json.Marshal(seen.Load().(Fields))
		switch {
		case tc.wantArgs == "" && seen.Load().(Fields) != nil:
			t.Errorf("%s: handler ran with %s, want it not to run", tc.name, got)
		case tc.wantArgs != "" && string(got) != tc.wantArgs:
			t.Errorf("%s: handler saw %s, want %s", tc.name, got, tc.wantArgs)
		case tc.want == StatusOK && data == nil:
			t.Errorf("%s: no DATA reply", tc.name)
		case tc.want != StatusOK && data != nil:
			t.Errorf("%s: DATA sent with an error status", tc.name)
		}
	}
	if _, st, _ := w.invoke(200, testObjID, "rotate", nil, false); st != StatusInvalidArgument {
		t.Errorf("INVOKE without DATA: status %v, want invalid argument (libubus)", st)
	}
}

func TestServerMapsHandlerOutcomes(t *testing.T) {
	_, w := serveTestObject(t,
		Method{Name: "busy", Handler: func(context.Context, *Request) (Fields, error) {
			return nil, errors.Join(errors.New("node list not loaded yet"), StatusNoData)
		}},
		Method{Name: "broken", Handler: func(context.Context, *Request) (Fields, error) {
			return nil, errors.New("disk on fire")
		}},
		Method{Name: "panics", Handler: func(context.Context, *Request) (Fields, error) {
			var m map[string]int
			m["x"]++
			return nil, nil
		}},
		Method{Name: "later"}, // announced, not implemented
		Method{Name: "quiet", Handler: func(context.Context, *Request) (Fields, error) { return nil, nil }},
		Method{Name: "bad_reply", Handler: func(context.Context, *Request) (Fields, error) {
			return Fields{{"n", Value{Type: TypeInt8, Int: 1000}}}, nil
		}},
		// members with an error still go out (DATA, then the status): the
		// CLI prints why before "Command failed"
		Method{Name: "refuses", Handler: func(context.Context, *Request) (Fields, error) {
			return Fields{{"error", String("diag mode is on")}}, fmt.Errorf("%w: diag mode is on", StatusNotSupported)
		}},
	)
	for i, tc := range []struct {
		method string
		want   Status
		data   string
	}{
		{"busy", StatusNoData, ""}, {"broken", StatusUnknownError, ""}, {"panics", StatusUnknownError, ""},
		{"later", StatusNotSupported, ""}, {"quiet", StatusOK, ""}, {"bad_reply", StatusUnknownError, ""},
		{"refuses", StatusNotSupported, `{"error":"diag mode is on"}`},
	} {
		data, st, ok := w.invoke(uint16(i+1), testObjID, tc.method, nil, true)
		got := ""
		if data != nil {
			b, _ := data.MarshalJSON()
			got = string(b)
		}
		if !ok || st != tc.want || got != tc.data {
			t.Errorf("%s: status %v data %s (replied %v), want %v and data %q", tc.method, st, got, ok, tc.want, tc.data)
		}
	}
	// an INVOKE for an object that is not ours is NOT_FOUND, as libubus says
	if _, st, _ := w.invoke(50, 0xdeadbeef, "busy", nil, true); st != StatusNotFound {
		t.Errorf("unknown object: status %v, want not found", st)
	}
}

// A call marked NO_REPLY runs but is not answered.
func TestServerHonoursNoReply(t *testing.T) {
	var ran atomic.Int32
	_, w := serveTestObject(t, Method{Name: "m", Handler: func(context.Context, *Request) (Fields, error) {
		ran.Add(1)
		return Fields{{"x", Int32(1)}}, nil
	}})
	m := &Message{Type: MsgInvoke, Seq: 7, Peer: testCaller}
	m.add(u32Attr(AttrNoReply, 1), u32Attr(AttrObjID, testObjID), strAttr(AttrMethod, "m"), dataAttr(AttrData, nil))
	w.send(m)
	// the next call's reply must be the first thing on the wire
	if _, st, _ := w.invoke(8, testObjID, "m", nil, true); st != StatusOK {
		t.Fatalf("status %v", st)
	}
	// handlers run concurrently, so the unanswered call may still be running
	// when the answered one has replied: give it a moment before judging.
	deadline := time.Now().Add(2 * time.Second)
	for ran.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if ran.Load() != 2 {
		t.Errorf("handler ran %d times, want 2", ran.Load())
	}
}

// A slow handler does not hold up other calls, and a handler may itself use
// the connection (send an event) without deadlocking the reader.
func TestServerHandlersRunConcurrently(t *testing.T) {
	release := make(chan struct{})
	var c *Conn
	c, w := serveTestObject(t,
		Method{Name: "slow", Handler: func(ctx context.Context, _ *Request) (Fields, error) {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return Fields{{"slow", Bool(true)}}, nil
		}},
		Method{Name: "emit", Handler: func(ctx context.Context, _ *Request) (Fields, error) {
			return nil, c.SendEvent(ctx, EventState, Fields{{"state", String("up")}})
		}},
	)
	w.send((&Message{Type: MsgInvoke, Seq: 1, Peer: testCaller}).add(
		u32Attr(AttrObjID, testObjID), strAttr(AttrMethod, "slow"), dataAttr(AttrData, nil)))
	w.send((&Message{Type: MsgInvoke, Seq: 2, Peer: testCaller}).add(
		u32Attr(AttrObjID, testObjID), strAttr(AttrMethod, "emit"), dataAttr(AttrData, nil)))
	ev := w.recv()
	if ev == nil || ev.Type != MsgInvoke || ev.Peer != systemObjectEvent {
		t.Fatalf("want the handler's event send first, got %+v", ev)
	}
	w.send((&Message{Type: MsgStatus, Seq: ev.Seq, Peer: ev.Peer}).add(u32Attr(AttrStatus, 0)))
	if st := w.recv(); st == nil || st.Type != MsgStatus || st.Seq != 2 {
		t.Fatalf("want emit's STATUS (seq 2) while slow still runs, got %+v", st)
	}
	close(release)
	if d := w.recv(); d == nil || d.Type != MsgData || d.Seq != 1 {
		t.Fatalf("want slow's DATA, got %+v", d)
	}
}

func TestClientMatchesRepliesBySeqAndPeer(t *testing.T) {
	c, w := newPairConn(t, 0x1234abcd)
	type result struct {
		objs []ObjectInfo
		err  error
	}
	res := make(chan result, 1)
	go func() {
		objs, err := c.Lookup(context.Background(), "surflare")
		res <- result{objs, err}
	}()
	req := w.recv()
	if req == nil || req.Type != MsgLookup || req.Seq != 1 {
		t.Fatalf("want LOOKUP seq 1, got %+v", req)
	}
	data := func(seq uint16, peer, id uint32) *Message {
		return (&Message{Type: MsgData, Seq: seq, Peer: peer}).add(strAttr(AttrObjPath, "surflare"), u32Attr(AttrObjID, id))
	}
	status := func(seq uint16, peer uint32, st Status) *Message {
		return (&Message{Type: MsgStatus, Seq: seq, Peer: peer}).add(u32Attr(AttrStatus, uint32(st)))
	}
	w.send(data(9, 0, 0x999))               // another request's reply
	w.send(status(1, 0x77, StatusNotFound)) // right seq, wrong peer
	// right seq and peer, but the STATUS attribute is 2 bytes: malformed, dropped
	w.nc.Write([]byte{0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 12, 1, 0, 0, 6, 0, 0, 0, 0})
	w.send(data(1, 0, 0x4242))
	w.send(status(1, 0, StatusOK))
	r := <-res
	if r.err != nil || len(r.objs) != 1 || r.objs[0].ID != 0x4242 {
		t.Fatalf("got %+v, %v; want exactly object 0x4242", r.objs, r.err)
	}
}

func TestClientTimesOutAndDropsLateReply(t *testing.T) {
	c, w := newPairConn(t, 0x1234abcd)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := c.Invoke(ctx, 0x4000, "status", nil)
	if !errors.Is(err, StatusTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want a timeout", err)
	}
	req := w.recv()
	w.send((&Message{Type: MsgStatus, Seq: req.Seq, Peer: req.Peer}).add(u32Attr(AttrStatus, 0)))
	// the connection still works, and the next request gets the next seq
	go func() {
		next := w.recv()
		if next != nil {
			w.send((&Message{Type: MsgStatus, Seq: next.Seq, Peer: next.Peer}).add(u32Attr(AttrStatus, 0)))
		}
	}()
	if err := c.SendEvent(context.Background(), "x", nil); err != nil {
		t.Fatalf("after a timeout: %v", err)
	}
}

// A frame ubusd could never send (bad version, absurd length) ends the
// connection: the stream is out of step and only a reconnect can fix it.
func TestClientDropsConnectionOnFramingError(t *testing.T) {
	for name, frame := range map[string][]byte{
		"version 1":        {1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 4},
		"length 16 MiB":    {0, 1, 0, 1, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff},
		"length below hdr": {0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2},
	} {
		t.Run(name, func(t *testing.T) {
			c, w := newPairConn(t, 1)
			errc := make(chan error, 1)
			go func() { _, err := c.Lookup(context.Background(), ""); errc <- err }()
			w.recv()
			w.nc.Write(frame)
			if err := <-errc; !errors.Is(err, ErrClosed) {
				t.Errorf("pending request got %v, want ErrClosed", err)
			}
			<-c.Done()
			if !errors.Is(c.Err(), ErrClosed) {
				t.Errorf("Err() = %v", c.Err())
			}
		})
	}
}
