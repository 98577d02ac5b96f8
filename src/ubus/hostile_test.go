package ubus

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// Hostile calls to every method of the surflare object: random and
// oversized blobmsg arguments, through the project's own server (always)
// and through the real ubusd (when UBUSD/UBUS_CLI name it; see README.md).
//
// Protection checked: the object's policy check (Object dispatch against
// SurflareMethods' Policy and Required) — a handler only ever sees the
// declared names with the declared types and every required one; without
// it the handlers would see the random types below. And the decoder's
// bounds (MaxMessageLen, maxDepth): no input allocates beyond them.

// policyGuard wraps every surflare method with a handler that checks what
// it was given against the method's policy.
type policyGuard struct {
	t     *testing.T
	mu    sync.Mutex
	calls map[string]int
	bad   []string
}

func (g *policyGuard) handlers() SurflareHandlers {
	h := SurflareHandlers{}
	for _, m := range SurflareMethods() {
		h[m.Name] = func(_ context.Context, req *Request) (Fields, error) {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.calls[m.Name]++
			for _, f := range req.Args {
				want, ok := m.Policy[f.Name]
				if !ok {
					continue // libubus hands over undeclared members too; handlers look up names
				}
				if f.Value.Type != want {
					g.bad = append(g.bad, fmt.Sprintf("%s: %s has type %d, policy %d", m.Name, f.Name, f.Value.Type, want))
				}
			}
			for _, r := range m.Required {
				if _, ok := req.Args.Get(r); !ok {
					g.bad = append(g.bad, fmt.Sprintf("%s: required %s missing", m.Name, r))
				}
			}
			return Fields{{"ok", Bool(true)}}, nil
		}
	}
	return h
}

// randomValue draws a blobmsg value of any type, nested up to depth.
func randomValue(r *rand.Rand, depth int, big bool) Value {
	switch k := r.IntN(9); {
	case k == 0:
		n := r.IntN(64)
		if big {
			n = 1 << 18
		}
		return String(strings.Repeat(string(rune('a'+r.IntN(26))), n))
	case k == 1:
		return Int32(int32(r.Uint32()))
	case k == 2:
		return Int64(int64(r.Uint64()))
	case k == 3:
		return Bool(r.IntN(2) == 0)
	case k == 4:
		return Double(r.NormFloat64() * 1e300)
	case k == 5:
		return Int16(int16(r.Uint32()))
	case k == 6 && depth > 0:
		return Table(randomFields(r, depth-1, false)...)
	case k == 7 && depth > 0:
		var vs []Value
		for range r.IntN(4) {
			vs = append(vs, randomValue(r, depth-1, false))
		}
		return Array(vs...)
	}
	return Value{Type: TypeUnspec}
}

// randomFields draws members named like the policies' (and not).
func randomFields(r *rand.Rand, depth int, big bool) Fields {
	names := []string{"node", "enable", "lines", "action", "interface", "device", "username", "password", "", "x", strings.Repeat("n", 300), "node\x00evil"}
	var fs Fields
	for range r.IntN(6) {
		fs = append(fs, Field{Name: names[r.IntN(len(names))], Value: randomValue(r, depth, big && r.IntN(3) == 0)})
	}
	return fs
}

// hostileCalls yields (method, args) pairs: every method, random args,
// some near the message limit.
func hostileCalls(seed uint64, n int) [][2]any {
	r := rand.New(rand.NewPCG(seed, seed))
	methods := SurflareMethods()
	var out [][2]any
	for i := range n {
		m := methods[i%len(methods)].Name
		if i%17 == 0 {
			m = []string{"nosuch", "", strings.Repeat("m", 200)}[r.IntN(3)]
		}
		fs := randomFields(r, 4, i%11 == 0)
		if r.IntN(3) == 0 {
			// Every declared argument with its type, then the noise: the
			// handler must run, and see the declared ones as declared.
			var valid Fields
			for _, mm := range methods {
				if mm.Name != m {
					continue
				}
				for name, typ := range mm.Policy {
					v := map[BlobmsgType]Value{TypeString: String("Chicago"), TypeBool: Bool(true), TypeInt32: Int32(5)}[typ]
					valid = append(valid, Field{Name: name, Value: v})
				}
			}
			fs = append(valid, fs...)
		}
		out = append(out, [2]any{m, fs})
	}
	return out
}

func TestHostileCallsThroughOurServer(t *testing.T) {
	g := &policyGuard{t: t, calls: map[string]int{}}
	obj, err := SurflareObject(g.handlers())
	if err != nil {
		t.Fatal(err)
	}
	c, w := newPairConn(t, 0x1234abcd)
	done := make(chan error, 1)
	go func() { done <- c.AddObject(context.Background(), obj) }()
	w.answerAddObject(testObjID, 0x7e570001)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	answered := 0
	for i, call := range hostileCalls(21, 600) {
		method, args := call[0].(string), call[1].(Fields)
		if _, err := args.MarshalBinary(); err != nil {
			continue // our own encoder refuses it (too big): nothing to send
		}
		if _, _, ok := w.invoke(uint16(i), testObjID, method, args, true); ok {
			answered++
		} else {
			t.Fatalf("call %d (%s) got no reply: the server died or hung", i, method)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.bad) > 0 {
		t.Fatalf("handlers saw arguments their policy refuses (%d), e.g. %s", len(g.bad), g.bad[0])
	}
	for _, m := range SurflareMethods() {
		if g.calls[m.Name] == 0 {
			t.Errorf("method %s never reached with valid arguments: the generator does not cover it", m.Name)
		}
	}
	t.Logf("%d calls answered; handler calls %v", answered, g.calls)
}

// Protection: the frame length check in Decode/readRawFrame
// (MaxMessageLen): a header announcing 2 GiB closes the connection without
// allocating it.
func TestOversizedFrameClosesTheConnectionWithoutAllocating(t *testing.T) {
	c, w := newPairConn(t, 0x1234abcd)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	hdr := make([]byte, 12)
	hdr[0], hdr[1] = 0, byte(MsgInvoke)
	binary.BigEndian.PutUint16(hdr[2:], 7)
	binary.BigEndian.PutUint32(hdr[4:], testCaller)
	binary.BigEndian.PutUint32(hdr[8:], 0x7fffffff) // blob header: id 0, length 2 GiB
	w.nc.Write(hdr)
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the connection stayed up after a 2 GiB frame header")
	}
	runtime.ReadMemStats(&after)
	if d := after.TotalAlloc - before.TotalAlloc; d > 8<<20 {
		t.Fatalf("a 2 GiB frame header allocated %d MiB", d>>20)
	}
}

// The same calls through the real ubusd: its own checks and ours
// together; ubusd and our object must both still answer afterwards.
func TestHostileCallsThroughRealUbusd(t *testing.T) {
	r := needRealUbus(t)
	g := &policyGuard{t: t, calls: map[string]int{}}
	obj, err := SurflareObject(g.handlers())
	if err != nil {
		t.Fatal(err)
	}
	svc := &Service{Socket: r.sock, Objects: []*Object{obj}}
	recvOrFail(t, runService(t, svc), "registration")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := Dial(ctx, r.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	id, err := cl.LookupID(ctx, ObjectName)
	if err != nil {
		t.Fatal(err)
	}
	for i, call := range hostileCalls(22, 300) {
		method, args := call[0].(string), call[1].(Fields)
		if _, err := args.MarshalBinary(); err != nil {
			continue
		}
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := cl.Invoke(cctx, id, method, args)
		timedOut := cctx.Err() != nil
		ccancel()
		if timedOut {
			t.Fatalf("call %d (%s) timed out through ubusd: %v", i, method, err)
		}
		if cl.Err() != nil { // ubusd may drop a client that sent too much: come back
			if cl, err = Dial(ctx, r.sock); err != nil {
				t.Fatalf("after call %d: ubusd gone: %v", i, err)
			}
			defer cl.Close()
		}
	}
	if out, code := r.run("call", ObjectName, "status"); code != 0 || !strings.Contains(out, `"ok": true`) {
		t.Fatalf("after the hostile calls, ubus call surflare status: %q exit %d", out, code)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.bad) > 0 {
		t.Fatalf("handlers saw arguments their policy refuses (%d), e.g. %s", len(g.bad), g.bad[0])
	}
	t.Logf("handler calls %v", g.calls)
}
