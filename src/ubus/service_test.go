package ubus

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"
)

func recvOrFail[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}

// When ubusd restarts, the Service reconnects with growing backoff and
// registers the surflare object again with its full signature; events flow
// again afterwards. The backoff waits are injected, so nothing sleeps.
func TestServiceReconnectsAndReregisters(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "ubus.sock")
	u := startMiniUbusd(t, sock)
	obj, err := SurflareObject(nil)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var waits []time.Duration
	restarted := make(chan struct{})
	connected := make(chan *Conn, 4)
	svc := &Service{
		Socket:     sock,
		Objects:    []*Object{obj},
		MinBackoff: 100 * time.Millisecond,
		MaxBackoff: 300 * time.Millisecond,
		OnConnect:  func(_ context.Context, c *Conn) error { connected <- c; return nil },
		Sleep: func(ctx context.Context, d time.Duration) error {
			mu.Lock()
			waits = append(waits, d)
			n := len(waits)
			mu.Unlock()
			if n == 4 { // ubusd comes back after three failed attempts
				u.listen()
				close(restarted)
			}
			return ctx.Err()
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	runDone := make(chan struct{})
	go func() { ran <- svc.Run(ctx); close(runDone) }()
	t.Cleanup(func() { // also when the test fails early: Run must be gone before TempDir is
		cancel()
		<-runDone
	})

	first := recvOrFail(t, u.added, "first ADD_OBJECT")
	c1 := recvOrFail(t, connected, "first connection")
	if err := svc.SendEvent(ctx, EventState, Fields{{"state", String("up")}}); err != nil {
		t.Fatalf("event on first connection: %v", err)
	}
	recvOrFail(t, u.events, "first event")

	u.stop() // ubusd goes away: socket and connections gone
	<-c1.Done()
	recvOrFail(t, restarted, "ubusd restart")
	second := recvOrFail(t, u.added, "ADD_OBJECT after restart")
	c2 := recvOrFail(t, connected, "second connection")
	if c2 == c1 || c2.ClientID() == c1.ClientID() {
		t.Errorf("second connection is not new (client ids %08x, %08x)", c1.ClientID(), c2.ClientID())
	}
	b1, _ := first.Encode()
	b2, _ := second.Encode()
	if !bytes.Equal(b1, b2) {
		t.Errorf("re-registration differs:\n%x\n%x", b1, b2)
	}
	if sig, _ := second.Fields(AttrSignature); len(sig) != len(SurflareMethods()) {
		t.Errorf("re-registered with %d methods, want %d", len(sig), len(SurflareMethods()))
	}
	if err := svc.SendEvent(ctx, EventState, Fields{{"state", String("reconnecting")}}); err != nil {
		t.Fatalf("event after reconnect: %v", err)
	}
	if ev := recvOrFail(t, u.events, "event after reconnect"); len(ev) != 1 || ev[0].Value.Str != "reconnecting" {
		t.Errorf("event after reconnect: %+v", ev)
	}
	cancel()
	if err := recvOrFail(t, ran, "Run to return"); err != nil {
		t.Errorf("Run returned %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	// lost → wait min; fail → min; fail → 2×min; fail → capped at max; then up
	want := []time.Duration{100 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond}
	if !reflect.DeepEqual(waits[:4], want) {
		t.Errorf("backoff waits %v, want %v first", waits, want)
	}
}

func TestServiceReportsNotConnected(t *testing.T) {
	svc := &Service{Socket: filepath.Join(t.TempDir(), "absent.sock")}
	err := svc.SendEvent(context.Background(), EventState, nil)
	if !errors.Is(err, ErrNotConnected) {
		t.Errorf("SendEvent without ubusd: %v, want ErrNotConnected", err)
	}
	if _, err := svc.Call(context.Background(), "network", "status", nil); !errors.Is(err, ErrNotConnected) {
		t.Errorf("Call without ubusd: %v, want ErrNotConnected", err)
	}
}

// The surflare object announces exactly this signature (what `ubus -v list
// surflare` shows and LuCI's ACL refers to), arguments in declared order.
func TestSurflareSignature(t *testing.T) {
	obj, err := SurflareObject(SurflareHandlers{MethodStatus: func(context.Context, *Request) (Fields, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(obj.signature())
	want := `{"status":{},"check":{},"rotate":{"node":3},"reconnect":{},"diag":{"enable":7},"nodes":{},` +
		`"probe":{"node":3},"reload":{},"log":{"lines":5},"history":{"buckets":5,"span":5},"hotplug":{"action":3,"interface":3,"device":3},` +
		`"token":{},"token_write":{},"set_credentials":{"username":3,"password":3},"events":{"since":5,"wait":5}}`
	if string(got) != want {
		t.Errorf("signature\n got %s\nwant %s", got, want)
	}
	if obj.method(MethodStatus).Handler == nil || obj.method(MethodRotate).Handler != nil {
		t.Error("handlers not wired by name")
	}
	if _, err := SurflareObject(SurflareHandlers{"rotat": nil}); err == nil {
		t.Error("a handler for a misspelt method was accepted")
	}
}

// What the hotplug script sends reaches the handler; an unimplemented method
// answers NOT_SUPPORTED; a hotplug call without an interface is refused.
func TestSurflareObjectServesHotplug(t *testing.T) {
	got := make(chan *Request, 1)
	obj, err := SurflareObject(SurflareHandlers{MethodHotplug: func(_ context.Context, r *Request) (Fields, error) {
		got <- r
		return nil, nil
	}})
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
	args, _ := ParseJSON([]byte(`{"action":"ifdown","interface":"wan","device":"eth1"}`))
	if _, st, _ := w.invoke(1, testObjID, MethodHotplug, args, true); st != StatusOK {
		t.Fatalf("hotplug: status %v", st)
	}
	r := recvOrFail(t, got, "hotplug handler")
	if a, _ := r.String("action"); a != "ifdown" {
		t.Errorf("action %q", a)
	}
	if i, _ := r.String("interface"); i != "wan" {
		t.Errorf("interface %q", i)
	}
	if _, st, _ := w.invoke(2, testObjID, MethodHotplug, Fields{{"action", String("ifup")}}, true); st != StatusInvalidArgument {
		t.Errorf("hotplug without interface: %v, want invalid argument", st)
	}
	if _, st, _ := w.invoke(3, testObjID, MethodToken, nil, true); st != StatusNotSupported {
		t.Errorf("token without handler: %v, want not supported", st)
	}
}
