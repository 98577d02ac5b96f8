package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"surflare-watchdog/src/api"
)

func TestWebsocketTokenTravelsAsSubprotocol(t *testing.T) {
	f := newFixture(t, nil)
	ts := f.run(t)

	if _, resp, err := dialWS(ts, "", ""); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("websocket without a token: err=%v resp=%v, want 401", err, resp)
	}
	if _, resp, err := dialWS(ts, "AAAAAAAAAAAAAAAAAAAAAAAAAA", ""); err == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("websocket with a wrong token: err=%v, want 401", err)
	}
	c, resp, err := dialWS(ts, f.token, "")
	if err != nil {
		t.Fatalf("websocket with the token: %v", err)
	}
	defer c.Close()
	if got := c.Subprotocol(); got != api.Subprotocol {
		t.Errorf("negotiated subprotocol %q, want %q", got, api.Subprotocol)
	}
	for k, v := range resp.Header {
		if strings.Contains(strings.Join(v, ","), f.token) {
			t.Errorf("handshake response header %s echoes the token", k)
		}
	}
	hello := readFrame(t, c)
	if hello.Kind != api.KindSnapshot {
		t.Fatalf("first frame kind %q, want snapshot", hello.Kind)
	}
	var d struct {
		Status struct{ State, Node string }
		Nodes  []map[string]any
		Events []json.RawMessage
	}
	if err := json.Unmarshal(hello.Data, &d); err != nil {
		t.Fatal(err)
	}
	if d.Status.State != "healthy" || d.Status.Node != "Dallas" || len(d.Nodes) != 4 || d.Events == nil {
		t.Errorf("hello: %s", hello.raw)
	}
}

func TestWebsocketOriginCheck(t *testing.T) {
	f := newFixture(t, func(o *api.Options) {
		o.AllowedOrigins = []string{"https://Router.LAN:443", "http://198.18.0.1:8080"}
	})
	ts := f.run(t)
	host := strings.TrimPrefix(ts.URL, "http://") // 127.0.0.1:port
	cases := []struct {
		origin string
		ok     bool
	}{
		{"", true}, // not a browser; the token still applies
		{"http://" + host, true},
		{"https://router.lan", true},
		{"http://198.18.0.1:8080", true},
		{"http://198.18.0.1", false},
		{"http://evil.example", false},
		{"http://" + host + ".evil.example", false},
		{"null", false},
		{"file://", false},
		{"http://127.0.0.1", false}, // LuCI's origin, but AllowHostWebUI is off
	}
	for _, c := range cases {
		conn, resp, err := dialWS(ts, f.token, c.origin)
		if c.ok {
			if err != nil {
				t.Errorf("origin %q refused: %v", c.origin, err)
				continue
			}
			conn.Close()
			continue
		}
		if err == nil {
			conn.Close()
			t.Errorf("origin %q accepted", c.origin)
			continue
		}
		if resp == nil || resp.StatusCode != http.StatusForbidden {
			t.Errorf("origin %q: %v, want 403", c.origin, err)
		}
	}
}

func TestWebsocketOriginHostWebUI(t *testing.T) {
	f := newFixture(t, func(o *api.Options) { o.AllowHostWebUI = true })
	ts := f.run(t)
	for origin, ok := range map[string]bool{
		"http://127.0.0.1":       true, // LuCI on the same host, port 80
		"https://127.0.0.1":      true,
		"http://127.0.0.1:8081":  false, // some other local service
		"http://127.0.0.2":       false,
		"http://127.0.0.1.nip.x": false,
	} {
		conn, _, err := dialWS(ts, f.token, origin)
		if (err == nil) != ok {
			t.Errorf("origin %q: err=%v, want accepted=%v", origin, err, ok)
		}
		if conn != nil {
			conn.Close()
		}
	}
}

func TestBadAllowedOriginIsAnError(t *testing.T) {
	for _, o := range []string{"router.lan", "ftp://router.lan", "http://router.lan/luci", "*"} {
		_, err := api.NewServer(api.Options{Backend: newFixture(t, nil).fake, Tokens: api.NewTokens(nil), AllowedOrigins: []string{o}})
		if err == nil {
			t.Errorf("AllowedOrigins %q accepted", o)
		}
	}
}

func TestWebsocketStreamsCommandsAndSnapshots(t *testing.T) {
	f := newFixture(t, nil)
	ts := f.run(t)
	c, _, err := dialWS(ts, f.token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	readFrame(t, c) // hello

	rec := f.do("POST", "/api/v1/rotate", f.token, `{"node":"Chicago"}`, "127.0.0.1:1")
	if rec.Code != http.StatusAccepted {
		t.Fatalf("rotate: %d %s", rec.Code, rec.Body)
	}
	readUntil(t, c, "the rotation", func(fr frame) bool {
		return fr.Kind == api.KindRotation && strings.Contains(string(fr.Data), `"to":"Chicago"`)
	})
	readUntil(t, c, "a snapshot on Chicago", func(fr frame) bool {
		return fr.Kind == api.KindSnapshot && strings.Contains(string(fr.Data), `"node":"Chicago"`)
	})

	// A fault shows up as a failed health result and a transition.
	f.fake.Break("Chicago")
	f.do("POST", "/api/v1/check", f.token, "", "127.0.0.1:1")
	readUntil(t, c, "a failed check", func(fr frame) bool {
		return fr.Kind == api.KindHealth && strings.Contains(string(fr.Data), "PROXY_BROKEN")
	})
	readUntil(t, c, "a transition to degraded", func(fr frame) bool {
		return fr.Kind == api.KindTransition && strings.Contains(string(fr.Data), `"to":"degraded"`)
	})

	// The history has them too.
	var hist struct{ Events []struct{ Kind string } }
	json.Unmarshal(f.do("GET", "/api/v1/events?n=5", f.token, "", "127.0.0.1:1").Body.Bytes(), &hist)
	if len(hist.Events) != 5 {
		t.Errorf("/events?n=5 returned %d events", len(hist.Events))
	}
}

func TestWebsocketClosedWhenServerStops(t *testing.T) {
	f := newFixture(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { f.srv.Run(ctx); close(done) }()
	waitRunning(t, f.srv)
	ts := httptest.NewServer(f.srv.Handler())
	defer ts.Close()
	c, _, err := dialWS(ts, f.token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	readFrame(t, c)
	cancel()
	<-done
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _, err = c.ReadMessage()
	if !websocket.IsCloseError(err, websocket.CloseGoingAway) {
		t.Fatalf("after the server stopped: %v, want a going-away close frame", err)
	}
	// A stopped hub refuses new streams instead of hanging them.
	if _, resp, err := dialWS(ts, f.token, ""); err == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("websocket after stop: %v, want 503", err)
	}
}
