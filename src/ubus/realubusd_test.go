package ubus

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestAgainstRealUbusd runs our Service and client against the real ubusd
// when one is available: set UBUSD to its path (Debian does not package
// ubus, so this normally skips; on an OpenWrt box or a dev machine with a
// built ubusd it runs). It needs root because ubusd's ACLs let only root
// (or configured users) register objects.
func TestAgainstRealUbusd(t *testing.T) {
	bin := os.Getenv("UBUSD")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("ubusd"); err != nil {
			t.Skip("no real ubusd: set UBUSD=/path/to/ubusd (Debian has no ubus package)")
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: ubusd ACLs allow object registration by root only")
	}
	sock := filepath.Join(t.TempDir(), "ubus.sock")
	start := func() *exec.Cmd {
		cmd := exec.Command(bin, "-s", sock)
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting %s: %v", bin, err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	waitDial := func(ctx context.Context) *Conn {
		for {
			c, err := Dial(ctx, sock)
			if err == nil {
				t.Cleanup(func() { c.Close() })
				return c
			}
			select {
			case <-ctx.Done():
				t.Fatalf("ubusd never answered: %v", err)
			case <-time.After(20 * time.Millisecond): // real process start-up: a poll is the only way
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ubusd := start()

	obj, err := SurflareObject(SurflareHandlers{
		MethodStatus: func(context.Context, *Request) (Fields, error) {
			return Fields{{"state", String("up")}}, nil
		},
		MethodRotate: func(_ context.Context, r *Request) (Fields, error) {
			node, _ := r.String("node")
			return Fields{{"node", String(node)}}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	connected := make(chan struct{}, 4)
	svc := &Service{Socket: sock, Objects: []*Object{obj}, MinBackoff: 20 * time.Millisecond,
		OnConnect: func(context.Context, *Conn) error { connected <- struct{}{}; return nil }}
	runCtx, stop := context.WithCancel(ctx)
	runDone := make(chan struct{})
	go func() { svc.Run(runCtx); close(runDone) }()
	t.Cleanup(func() { stop(); <-runDone })
	waitDial(ctx) // ubusd is up
	recvOrFail(t, connected, "service registration")

	c := waitDial(ctx)
	info, err := c.Lookup(ctx, ObjectName)
	if err != nil || len(info) != 1 || len(info[0].Methods()) != len(SurflareMethods()) {
		t.Fatalf("lookup: %+v, %v", info, err)
	}
	got, err := c.Call(ctx, ObjectName, MethodRotate, map[string]any{"node": "Chicago"})
	if err != nil || got["node"] != "Chicago" {
		t.Fatalf("rotate: %v, %v", got, err)
	}
	if _, err := c.Call(ctx, ObjectName, MethodRotate, map[string]any{"node": 5}); !errors.Is(err, StatusInvalidArgument) {
		t.Errorf("rotate with an int: %v, want invalid argument", err)
	}
	if _, err := c.Call(ctx, ObjectName, "nosuch", nil); !errors.Is(err, StatusMethodNotFound) {
		t.Errorf("unknown method: %v, want method not found", err)
	}
	events := make(chan Event, 1)
	if err := c.Listen(ctx, "surflare.*", func(e Event) { events <- e }); err != nil {
		t.Fatal(err)
	}
	if err := svc.SendEvent(ctx, EventState, Fields{{"state", String("up")}}); err != nil {
		t.Fatal(err)
	}
	if e := recvOrFail(t, events, "event"); e.Name != EventState {
		t.Errorf("event %q", e.Name)
	}

	// ubusd restarts: the Service registers again by itself
	ubusd.Process.Kill()
	ubusd.Wait()
	os.Remove(sock)
	start()
	recvOrFail(t, connected, "re-registration after ubusd restart")
	c2 := waitDial(ctx)
	if got, err := c2.Call(ctx, ObjectName, MethodStatus, nil); err != nil || got["state"] != "up" {
		t.Fatalf("status after restart: %v, %v", got, err)
	}
}
