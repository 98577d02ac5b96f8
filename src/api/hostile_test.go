package api_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"surflare-watchdog/src/api"
)

// Hostile input against the API as the daemon serves it: a real listener
// on loopback and ServeListener (the http.Server with its limits), not the
// handler alone. Each test names the protection that makes it pass.

// serveReal runs f's server on a loopback listener until the test ends.
func serveReal(t *testing.T, f *fixture) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.srv.ServeListener(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("ServeListener did not return after its context ended")
		}
	})
	waitRunning(t, f.srv)
	return ln.Addr().String()
}

// stillServes checks the server answers a valid request and that no
// command reached the backend (nothing hostile changed the daemon's state).
func stillServes(t *testing.T, f *fixture, addr string) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+addr+"/api/v1/status", nil)
	req.Header.Set("Authorization", "Bearer "+f.token)
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("the server stopped answering: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status after the attack: %d", resp.StatusCode)
	}
	if calls := f.fake.Calls(); len(calls) != 0 {
		t.Fatalf("hostile input reached the backend: %v", calls)
	}
}

// Protection: http.Server.ReadHeaderTimeout (5 s). Without it the next
// limit is ReadTimeout (10 s): a client dribbling a header byte a second
// would hold its connection (and a goroutine) twice as long, and with
// neither, for ever.
func TestSlowlorisHeaderIsCutAtReadHeaderTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("takes 5 s")
	}
	f := newFixture(t, nil)
	addr := serveReal(t, f)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if _, err := io.WriteString(c, "GET /api/v1/status HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	closed := make(chan time.Duration, 1)
	go func() {
		buf := make([]byte, 1)
		for {
			c.SetReadDeadline(time.Now().Add(15 * time.Second))
			if _, err := c.Read(buf); err != nil {
				closed <- time.Since(start)
				return
			}
		}
	}()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case d := <-closed:
			if d > 7500*time.Millisecond {
				t.Fatalf("slow header held for %s: ReadHeaderTimeout (5 s) is not in force", d)
			}
			stillServes(t, f, addr)
			return
		case <-tick.C:
			// One more header line, never the blank line that ends them.
			if _, err := fmt.Fprintf(c, "X-Slow-%d: a\r\n", i); err != nil {
				continue // closed: the reader reports when
			}
		}
	}
}

// Protection: http.Server.MaxHeaderBytes (8 KiB). Go's default (1 MB)
// would accept these headers.
func TestOversizedHeadersAreRefused(t *testing.T) {
	f := newFixture(t, nil)
	addr := serveReal(t, f)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "GET /api/v1/status HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nX-Junk: %s\r\n\r\n", f.token, strings.Repeat("A", 64<<10))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to 64 KiB of headers: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("64 KiB of headers: HTTP %d, want 431", resp.StatusCode)
	}
	stillServes(t, f, addr)
}

// Protection: the read limit (maxMessageSize, 512 bytes) on every
// websocket connection. Without it the server reads and discards a
// megabyte message and keeps the connection open.
func TestWebsocketHugeMessageClosesTheConnection(t *testing.T) {
	f := newFixture(t, nil)
	addr := serveReal(t, f)
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second, Subprotocols: []string{api.Subprotocol, api.TokenProtocolPrefix + f.token}}
	conn, _, err := d.Dial("ws://"+addr+"/api/v1/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The server may already reset the connection while the megabyte is
	// being written: that is the limit at work.
	if err := conn.WriteMessage(websocket.TextMessage, []byte(strings.Repeat("x", 1<<20))); err != nil {
		stillServes(t, f, addr)
		return
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		conn.SetReadDeadline(deadline)
		_, _, err := conn.ReadMessage()
		if err == nil {
			continue // snapshots, until the close
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("the connection stayed open after a 1 MiB message: no read limit")
		}
		if !websocket.IsCloseError(err, websocket.CloseMessageTooBig) && !strings.Contains(err.Error(), "reset") && err != io.ErrUnexpectedEOF {
			t.Logf("closed with %v", err)
		}
		break
	}
	stillServes(t, f, addr)
}

// Protection: the single reader (readPump) ends the connection on any
// protocol error and the hub forgets the client; gorilla rejects the
// frames. Raw garbage after a valid handshake — unmasked frames, reserved
// opcodes, a 2^63 length — must close the connection, and the server must
// go on.
func TestWebsocketMalformedFramesCloseTheConnection(t *testing.T) {
	f := newFixture(t, nil)
	addr := serveReal(t, f)
	frames := [][]byte{
		{0x81, 0x05, 'h', 'e', 'l', 'l', 'o'}, // unmasked client frame
		{0x83, 0x80, 1, 2, 3, 4},              // reserved opcode 3
		{0xf1, 0x80, 1, 2, 3, 4},              // RSV bits set
		{0x81, 0xff, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4}, // 2^63-1 bytes announced
		{0x09, 0xfe, 0x10, 0x00, 1, 2, 3, 4},                                     // fragmented ping, 4 KiB control frame
	}
	for i, fr := range frames {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "GET /api/v1/ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
			"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: %s, %s%s\r\n\r\n",
			addr, api.Subprotocol, api.TokenProtocolPrefix, f.token)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("frame %d: handshake: %v %v", i, err, resp)
		}
		c.Write(fr)
		// The server answers with frames (snapshot, close) and then EOF.
		if _, err := io.Copy(io.Discard, br); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("frame %d (% x): connection still open 5 s later", i, fr)
			}
		}
		c.Close()
	}
	stillServes(t, f, addr)
}

// Protection: the failed-authentication limiter (burst 10, one per 6 s),
// keyed by the remote address the listener saw. 300 guesses through a
// real socket get at most 10 answers that are not 429, and while limited
// the right token is refused too.
func TestTokenBruteForceIsRateLimitedEndToEnd(t *testing.T) {
	f := newFixture(t, nil)
	addr := serveReal(t, f)
	client := &http.Client{Timeout: 5 * time.Second}
	get := func(tok string) int {
		req, _ := http.NewRequest("POST", "http://"+addr+"/api/v1/rotate", strings.NewReader(`{"node":"Chicago"}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	unauthorized, limited := 0, 0
	for i := range 300 {
		switch code := get(fmt.Sprintf("guess%027d", i)); code {
		case http.StatusUnauthorized:
			unauthorized++
		case http.StatusTooManyRequests:
			limited++
		default:
			t.Fatalf("guess %d: HTTP %d", i, code)
		}
	}
	if unauthorized > 10 || limited < 290 {
		t.Fatalf("300 guesses: %d answered 401, %d 429: the limit (10, then one per 6 s) did not hold", unauthorized, limited)
	}
	if code := get(f.token); code != http.StatusTooManyRequests {
		t.Fatalf("valid token from the guessing address: HTTP %d, want 429", code)
	}
	if calls := f.fake.Calls(); len(calls) != 0 {
		t.Fatalf("a guess reached the backend: %v", calls)
	}
}

// Protection: token expiry checked on every request and websocket
// handshake (Tokens.Valid with the injected clock). A request replayed
// after its token expired, a command included, is refused and never
// reaches the daemon.
func TestRequestReplayedAfterTokenExpiry(t *testing.T) {
	f := newFixture(t, nil)
	short := f.tokens.MintScoped(api.ScopeWrite, time.Minute) // a command needs a write token
	addr := serveReal(t, f)
	raw := fmt.Sprintf("POST /api/v1/reconnect HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", addr, short)
	send := func() int {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, raw)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := send(); code >= 300 {
		t.Fatalf("the request with a fresh token: HTTP %d", code)
	}
	if n := len(f.fake.Calls()); n != 1 {
		t.Fatalf("backend calls after the valid request: %d, want 1", n)
	}
	f.clock.Advance(61 * time.Second)
	if code := send(); code != http.StatusUnauthorized {
		t.Fatalf("the same bytes after the token expired: HTTP %d, want 401", code)
	}
	if n := len(f.fake.Calls()); n != 1 {
		t.Fatalf("the replay reached the backend: calls %v", f.fake.Calls())
	}
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second, Subprotocols: []string{api.Subprotocol, api.TokenProtocolPrefix + short}}
	if c, resp, err := d.Dial("ws://"+addr+"/api/v1/ws", nil); err == nil {
		c.Close()
		t.Fatal("websocket opened with an expired token")
	} else if resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("websocket with an expired token: %v %v, want 401", err, resp)
	}
}

// Protection: checkOrigin (same origin, the allowlist, the host's web UI;
// never "any"). Foreign and malformed Origins get no stream, with a valid
// token.
func TestWebsocketWrongOriginsEndToEnd(t *testing.T) {
	f := newFixture(t, nil)
	addr := serveReal(t, f)
	host, port, _ := net.SplitHostPort(addr)
	for _, origin := range []string{
		"http://evil.example", "http://" + host + ".evil.example:" + port, "null", "file://", "http://" + host + ":1",
		"javascript:alert(1)", "http://[::1", "ws://" + addr, strings.Repeat("http://a", 1000),
	} {
		d := websocket.Dialer{HandshakeTimeout: 5 * time.Second, Subprotocols: []string{api.Subprotocol, api.TokenProtocolPrefix + f.token}}
		c, resp, err := d.Dial("ws://"+addr+"/api/v1/ws", http.Header{"Origin": {origin}})
		if err == nil {
			c.Close()
			t.Errorf("Origin %.60q: stream opened", origin)
			continue
		}
		if resp == nil || resp.StatusCode != http.StatusForbidden {
			t.Errorf("Origin %.60q: %v %v, want 403", origin, err, resp)
		}
	}
	stillServes(t, f, addr)
}
