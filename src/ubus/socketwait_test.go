package ubus

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// attempts counts the Service's failed connection attempts from its log.
type attempts struct{ n atomic.Int32 }

func (a *attempts) Enabled(context.Context, slog.Level) bool { return true }
func (a *attempts) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "ubus unavailable") {
		a.n.Add(1)
	}
	return nil
}
func (a *attempts) WithAttrs([]slog.Attr) slog.Handler { return a }
func (a *attempts) WithGroup(string) slog.Handler      { return a }

// Where there is no ubusd (a laptop, the lab), the Service stops dialing
// once its backoff reaches the cap and waits for ubusd's socket instead
// (issue 19: an attempt every 8 s was 450 idle wake-ups an hour); when
// ubusd comes, it connects at once, not at the next attempt; and without
// ubusd it still dials again every SocketSafety.
func TestServiceWaitsForTheSocketOnceTheBackoffIsCapped(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "ubus.sock")
	obj, err := SurflareObject(nil)
	if err != nil {
		t.Fatal(err)
	}
	var a attempts
	connected := make(chan struct{}, 4)
	svc := &Service{Socket: sock, Objects: []*Object{obj}, Log: slog.New(&a),
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, SocketSafety: time.Minute,
		OnConnect: func(context.Context, *Conn) error { connected <- struct{}{}; return nil }}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- svc.Run(ctx) }()
	defer func() { cancel(); <-ran }()

	time.Sleep(time.Second)
	if n := a.n.Load(); n < 2 || n > 4 {
		t.Fatalf("no ubusd for 1 s with a 10-20 ms backoff: %d attempts, want the backoff's 2-4 and then none", n)
	}
	start := time.Now()
	startMiniUbusd(t, sock)
	select {
	case <-connected:
		t.Logf("connected %v after ubusd created its socket", time.Since(start))
	case <-time.After(5 * time.Second):
		t.Fatalf("ubusd's socket appeared and the Service did not connect within 5 s (attempts %d)", a.n.Load())
	}
}

// The safety dial: with no ubusd and a short SocketSafety, attempts go on
// at that pace, so a socket inotify could not report is still found.
func TestServiceDialsAgainAfterTheSocketSafety(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "ubus.sock")
	var a attempts
	svc := &Service{Socket: sock, Log: slog.New(&a),
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 10 * time.Millisecond, SocketSafety: 100 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- svc.Run(ctx) }()
	defer func() { cancel(); <-ran }()
	deadline := time.Now().Add(5 * time.Second)
	for a.n.Load() < 5 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := a.n.Load(); n < 5 {
		t.Fatalf("no ubusd, SocketSafety 100 ms: %d attempts in 5 s, want the safety dials to go on", n)
	}
}
