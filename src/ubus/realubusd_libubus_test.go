package ubus

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer collects a child's stderr while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestClientAgainstLibubusServer drives our client against a real libubus
// server: the example server of openwrt/ubus (examples/server.c, object
// "test" with hello, watch and count) behind the real ubusd. It runs when
// UBUS_EXAMPLE_SERVER names that binary.
func TestClientAgainstLibubusServer(t *testing.T) {
	bin := os.Getenv("UBUS_EXAMPLE_SERVER")
	if bin == "" {
		t.Skip("no libubus example server: set UBUS_EXAMPLE_SERVER=/path/to/examples/server (see src/ubus/README.md)")
	}
	r := needRealUbus(t)
	stderr := &lockedBuffer{}
	server := exec.Command(bin, "-s", r.sock)
	server.Stderr = stderr
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	serverDone := make(chan struct{})
	go func() { server.Wait(); close(serverDone) }()
	t.Cleanup(func() { server.Process.Kill(); <-serverDone })

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Dial(ctx, r.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var info []ObjectInfo
	waitFor(t, "the example server's object", func() bool {
		info, err = c.Lookup(ctx, "test")
		return err == nil
	})
	if got := fmt.Sprint(info[0].Methods()); got != "map[count:map[string:string to:int32] hello:map[id:int32 msg:string] watch:map[counter:int32 id:int32]]" {
		t.Errorf("signature of the libubus object: %s", got)
	}

	// count answers at once; hello is deferred (1 s) and its STATUS
	// carries a pipe's fd as SCM_RIGHTS, which we must not leak.
	got, err := c.Call(ctx, "test", "count", map[string]any{"to": 3, "string": "0 1 2 "})
	if err != nil || got["rc"] != int32(0) {
		t.Errorf("count: %v, %v", got, err)
	}
	if _, err := c.Call(ctx, "test", "count", map[string]any{"to": 3}); !errors.Is(err, StatusInvalidArgument) {
		t.Errorf("count without string: %v, want invalid argument", err)
	}
	if _, err := c.Call(ctx, "test", "nosuch", nil); !errors.Is(err, StatusMethodNotFound) {
		t.Errorf("unknown method on a libubus object: %v", err)
	}
	fds := openFDs(t)
	got, err = c.Call(ctx, "test", "hello", map[string]any{"id": 1, "msg": "from Go"})
	if err != nil || got["message"] != "test received a message: from Go" {
		t.Errorf("hello: %v, %v", got, err)
	}
	if n := openFDs(t); n > fds {
		t.Errorf("open fds went from %d to %d after a reply that carried an fd", fds, n)
	}

	// The libubus server subscribes to our object (watch): ubusd tells
	// us (ACTIVE 1), our Notify reaches it, and when it dies ACTIVE 0.
	obj := &Object{Name: "surflare", Methods: []Method{{Name: "status"}}}
	svc := &Service{Socket: r.sock, Objects: []*Object{obj}}
	conn := recvOrFail(t, runService(t, svc), "registration")
	id, err := c.LookupID(ctx, "surflare")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(ctx, "test", "watch", map[string]any{"id": id}); err != nil {
		t.Fatalf("watch: %v", err)
	}
	waitFor(t, "ACTIVE 1 from the libubus subscriber", func() bool { return conn.HasSubscribers(obj) })
	if !strings.Contains(stderr.String(), fmt.Sprintf("Watching object %08x: Success", id)) {
		t.Errorf("example server says %q", stderr.String())
	}
	if err := svc.Notify(obj, "state", Fields{{"state", String("up")}}); err != nil {
		t.Fatal(err)
	}
	// Our object going away reaches the libubus subscriber as UNSUBSCRIBE.
	if err := conn.RemoveObject(ctx, obj); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the libubus subscriber to see our object go", func() bool {
		return strings.Contains(stderr.String(), fmt.Sprintf("Object %08x went away", id))
	})
	select {
	case <-serverDone:
		t.Fatalf("the libubus server died: %s", stderr.String())
	default:
	}
}
