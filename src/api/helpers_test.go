package api_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"surflare-watchdog/src/api"
	"surflare-watchdog/src/api/apifake"
)

// fakeClock is the injected clock of token expiry and rate limiting.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock { return &fakeClock{t: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// fixture is a server around the fake backend with a valid write token
// (an operator's) and a valid read token (a read-only LuCI user's).
type fixture struct {
	srv       *api.Server
	fake      *apifake.Backend
	tokens    *api.Tokens
	token     string
	readToken string
	clock     *fakeClock
}

// plantedSecret stands for the vendor password: the fake puts it in its
// status and log lines, and Options.Secrets names it.
const plantedSecret = "hunter2-Pl4nted\"<pw>"

func newFixture(t *testing.T, mod func(*api.Options)) *fixture {
	t.Helper()
	clock := newClock()
	tokens := api.NewTokens(clock.Now)
	fake := apifake.New(nil, plantedSecret, clock.Now)
	opts := api.Options{
		Backend:       fake,
		Tokens:        tokens,
		Now:           clock.Now,
		Secrets:       func() []string { return []string{plantedSecret} },
		SnapshotEvery: -1,
		Logger:        slog.New(slog.DiscardHandler),
	}
	if mod != nil {
		mod(&opts)
	}
	srv, err := api.NewServer(opts)
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	return &fixture{srv: srv, fake: fake, tokens: tokens, clock: clock,
		token: tokens.MintScoped(api.ScopeWrite, time.Hour), readToken: tokens.Mint(time.Hour)}
}

// run starts the hub and an HTTP test server; both end with the test.
func (f *fixture) run(t *testing.T) *httptest.Server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.srv.Run(ctx); close(done) }()
	waitRunning(t, f.srv)
	ts := httptest.NewServer(f.srv.Handler())
	t.Cleanup(func() {
		cancel()
		<-done
		ts.Close()
	})
	return ts
}

// do serves one request in process from remote (an "ip:port").
func (f *fixture) do(method, path, token, body, remote string) *httptest.ResponseRecorder {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, rd)
	req.RemoteAddr = remote
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	f.srv.Handler().ServeHTTP(rec, req)
	return rec
}

// dialWS opens the live stream the way the page does.
func dialWS(ts *httptest.Server, token, origin string) (*websocket.Conn, *http.Response, error) {
	h := http.Header{}
	if origin != "" {
		h.Set("Origin", origin)
	}
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second}
	if token != "" {
		d.Subprotocols = []string{api.Subprotocol, api.TokenProtocolPrefix + token}
	}
	return d.Dial("ws"+strings.TrimPrefix(ts.URL, "http")+"/api/v1/ws", h)
}

// frame is one websocket message.
type frame struct {
	Kind string          `json:"kind"`
	Data json.RawMessage `json:"data"`
	raw  []byte
}

func readFrame(t *testing.T, c *websocket.Conn) frame {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, b, err := c.ReadMessage()
	if err != nil {
		t.Fatalf("reading websocket: %v", err)
	}
	var f frame
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("websocket frame %q: %v", b, err)
	}
	f.raw = b
	return f
}

// readUntil reads frames until one satisfies ok; it fails after 50 frames.
func readUntil(t *testing.T, c *websocket.Conn, what string, ok func(frame) bool) frame {
	t.Helper()
	for range 50 {
		if f := readFrame(t, c); ok(f) {
			return f
		}
	}
	t.Fatalf("no websocket frame with %s", what)
	return frame{}
}

// waitRunning waits (bounded) until Run has started the hub.
func waitRunning(t *testing.T, srv *api.Server) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !srv.HubRunning() {
		if time.Now().After(deadline) {
			t.Fatal("Run did not start the hub")
		}
		time.Sleep(time.Millisecond)
	}
}
