package control

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// start serves h on a fresh socket and returns its path; the server stops
// (and must have removed its socket) when the test ends.
func start(t *testing.T, h Handler) string {
	t.Helper()
	path := SocketPath(t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, path, h) }()
	waitFor(t, path)
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve returned %v after cancel, want nil", err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("Serve did not return after cancel")
		}
		if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("socket %s still there after Serve returned (err=%v)", path, err)
		}
	})
	return path
}

// waitFor polls for the socket to appear: Serve creates it asynchronously.
func waitFor(t *testing.T, path string) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if _, err := os.Lstat(path); err == nil {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("socket %s never appeared", path)
}

func TestCallRoundTrip(t *testing.T) {
	path := start(t, HandlerFunc(func(ctx context.Context, req Request) (any, error) {
		switch req.Cmd {
		case CmdStatus:
			return map[string]any{"state": "healthy", "node": "Dallas"}, nil
		case CmdRotate:
			return map[string]any{"to": req.Args["node"]}, nil
		case CmdReconnect:
			return nil, nil
		}
		return nil, errors.New("unknown command " + req.Cmd)
	}))
	ctx := context.Background()

	resp, err := Call(ctx, path, Request{Cmd: CmdStatus})
	if err != nil || !resp.OK {
		t.Fatalf("status: resp=%+v err=%v", resp, err)
	}
	var st map[string]string
	if err := json.Unmarshal(resp.Data, &st); err != nil || st["state"] != "healthy" || st["node"] != "Dallas" {
		t.Errorf("status data = %s (%v)", resp.Data, err)
	}

	resp, err = Call(ctx, path, Request{Cmd: CmdRotate, Args: map[string]any{"node": "Los Angeles"}})
	if err != nil || !resp.OK || string(resp.Data) != `{"to":"Los Angeles"}` {
		t.Errorf("rotate: resp=%+v data=%s err=%v", resp, resp.Data, err)
	}

	resp, err = Call(ctx, path, Request{Cmd: CmdReconnect})
	if err != nil || !resp.OK || resp.Data != nil || resp.Err() != nil {
		t.Errorf("reconnect: resp=%+v err=%v", resp, err)
	}

	resp, err = Call(ctx, path, Request{Cmd: "bogus"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.OK || resp.Error != "unknown command bogus" || resp.Err() == nil {
		t.Errorf("bogus: resp=%+v, want the handler's error", resp)
	}
}

func TestSocketIsPrivate(t *testing.T) {
	path := start(t, HandlerFunc(func(context.Context, Request) (any, error) { return nil, nil }))
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&fs.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode = %v, want a socket with 0600", fi.Mode())
	}
	// No temporary file is left next to it.
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("run dir holds %d entries, want only the socket", len(entries))
	}
}

func TestCallNotRunning(t *testing.T) {
	dir := t.TempDir()
	// Missing socket.
	_, err := Call(context.Background(), SocketPath(dir), Request{Cmd: CmdStatus})
	if !errors.Is(err, ErrNotRunning) || !strings.Contains(err.Error(), SocketPath(dir)) {
		t.Errorf("missing socket: err = %v, want ErrNotRunning naming the path", err)
	}
	// A socket file nobody listens on (a crashed daemon's).
	stale := staleSocket(t, dir)
	_, err = Call(context.Background(), stale, Request{Cmd: CmdStatus})
	if !errors.Is(err, ErrNotRunning) {
		t.Errorf("stale socket: err = %v, want ErrNotRunning", err)
	}
}

// staleSocket leaves a socket file behind with no listener, as a killed
// daemon does.
func staleSocket(t *testing.T, dir string) string {
	t.Helper()
	path := SocketPath(dir)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	return path
}

func TestServeReplacesStaleSocket(t *testing.T) {
	dir := t.TempDir()
	path := staleSocket(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, path, HandlerFunc(func(context.Context, Request) (any, error) { return "pong", nil }))
	}()
	var resp *Response
	var err error
	for i := 0; i < 500; i++ {
		if resp, err = Call(ctx, path, Request{Cmd: "ping"}); err == nil {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	if err != nil || string(resp.Data) != `"pong"` {
		t.Fatalf("after replacing a stale socket: resp=%+v err=%v", resp, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

func TestServeRefusesLiveSocketAndNonSocket(t *testing.T) {
	path := start(t, HandlerFunc(func(context.Context, Request) (any, error) { return nil, nil }))
	err := Serve(context.Background(), path, HandlerFunc(func(context.Context, Request) (any, error) { return nil, nil }))
	if err == nil || !strings.Contains(err.Error(), "already listening") {
		t.Errorf("second Serve on a live socket: %v, want an error", err)
	}
	// The first daemon still answers.
	if _, err := Call(context.Background(), path, Request{Cmd: "x"}); err != nil {
		t.Errorf("first daemon lost its socket: %v", err)
	}

	file := filepath.Join(t.TempDir(), SocketName)
	os.WriteFile(file, []byte("not a socket"), 0o600)
	err = Serve(context.Background(), file, HandlerFunc(func(context.Context, Request) (any, error) { return nil, nil }))
	if err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("Serve over a regular file: %v, want a refusal", err)
	}
	if b, _ := os.ReadFile(file); string(b) != "not a socket" {
		t.Errorf("Serve clobbered a regular file")
	}
}

func TestBadRequestsAndPanics(t *testing.T) {
	path := start(t, HandlerFunc(func(ctx context.Context, req Request) (any, error) {
		if req.Cmd == "boom" {
			panic("handler bug")
		}
		if req.Cmd == "unmarshalable" {
			return func() {}, nil
		}
		return "fine", nil
	}))
	raw := func(payload string) Response {
		t.Helper()
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, payload)
		var r Response
		if err := json.NewDecoder(c).Decode(&r); err != nil {
			t.Fatalf("no answer to %q: %v", payload, err)
		}
		return r
	}
	if r := raw("this is not json\n"); r.OK || !strings.HasPrefix(r.Error, "bad request") {
		t.Errorf("garbage: %+v", r)
	}
	if r := raw(`{"args":{}}` + "\n"); r.OK || !strings.Contains(r.Error, "no cmd") {
		t.Errorf("no cmd: %+v", r)
	}
	if r := raw(`{"cmd":"boom"}`); r.OK || !strings.Contains(r.Error, "internal error") {
		t.Errorf("panicking handler: %+v", r)
	}
	if r := raw(`{"cmd":"unmarshalable"}`); r.OK || !strings.Contains(r.Error, "encoding") {
		t.Errorf("unmarshalable result: %+v", r)
	}
	// An oversized request is cut off at the limit and answered with an
	// error instead of being read forever.
	big := `{"cmd":"x","args":{"pad":"` + strings.Repeat("a", maxRequestBytes) + `"}}`
	if r := raw(big); r.OK || !strings.HasPrefix(r.Error, "bad request") {
		t.Errorf("oversized request: %+v", r)
	}
	// The server survived all of it.
	if resp, err := Call(context.Background(), path, Request{Cmd: "ok"}); err != nil || string(resp.Data) != `"fine"` {
		t.Errorf("after bad requests: resp=%+v err=%v", resp, err)
	}
}

func TestCallHonoursContext(t *testing.T) {
	release := make(chan struct{})
	path := start(t, HandlerFunc(func(ctx context.Context, req Request) (any, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil, nil
	}))
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := Call(ctx, path, Request{Cmd: CmdCheck})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("slow daemon: err = %v, want the context deadline", err)
	}
}

func TestServeCancelsRunningHandlers(t *testing.T) {
	path := SocketPath(t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	entered := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, path, HandlerFunc(func(hctx context.Context, req Request) (any, error) {
			close(entered)
			<-hctx.Done() // a long command, e.g. a rotation
			return nil, hctx.Err()
		}))
	}()
	waitFor(t, path)
	go Call(context.Background(), path, Request{Cmd: CmdRotate})
	<-entered
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return while a handler was running")
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket left behind: %v", err)
	}
}

func TestTooManyClientsAreToldBusy(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, maxConns)
	path := start(t, HandlerFunc(func(ctx context.Context, req Request) (any, error) {
		entered <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return "done", nil
	}))
	results := make(chan error, maxConns)
	for i := 0; i < maxConns; i++ {
		go func() { _, err := Call(context.Background(), path, Request{Cmd: CmdCheck}); results <- err }()
	}
	for i := 0; i < maxConns; i++ {
		<-entered
	}
	resp, err := Call(context.Background(), path, Request{Cmd: CmdStatus})
	if err != nil || resp.OK || !strings.HasPrefix(resp.Error, "busy") {
		t.Errorf("client beyond the limit: resp=%+v err=%v, want busy", resp, err)
	}
	close(release)
	for i := 0; i < maxConns; i++ {
		if err := <-results; err != nil {
			t.Errorf("held client: %v", err)
		}
	}
	// Slots are given back.
	if resp, err := Call(context.Background(), path, Request{Cmd: CmdStatus}); err != nil || !resp.OK {
		t.Errorf("after release: resp=%+v err=%v", resp, err)
	}
}
