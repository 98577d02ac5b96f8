package health

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The 503 probe's question on an http:// URL, asked without net/http's
// client: the status the far end answered (204, 503, whatever it is), on a
// fresh connection with the request a proxy or exit expects; no answer is
// an error within the probe timeout; a refused connection is an error at
// once. The answer must be the server's, not a guess.
func TestTunnelStatusPlainHTTP(t *testing.T) {
	var got *http.Request
	code := http.StatusNoContent
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		w.WriteHeader(code)
	}))
	defer srv.Close()
	c := NewChecker(Config{ProbeTimeout: 2 * time.Second}, Deps{Tunnel: &net.Dialer{}})
	ctx := context.Background()

	if st, err := c.TunnelStatus(ctx, srv.URL+"/generate_204?x=1"); st != 204 || err != nil {
		t.Fatalf("204 server: %d, %v", st, err)
	}
	if got.URL.RequestURI() != "/generate_204?x=1" || got.Host != strings.TrimPrefix(srv.URL, "http://") ||
		got.UserAgent() != "surflare-watchdog" || !got.Close {
		t.Fatalf("request = %s %s host %q UA %q close %v", got.Method, got.URL, got.Host, got.UserAgent(), got.Close)
	}
	code = http.StatusServiceUnavailable
	if st, err := c.TunnelStatus(ctx, srv.URL+"/generate_204"); st != 503 || err != nil {
		t.Fatalf("503 server: %d, %v", st, err)
	}

	// Accepts and never answers: the probe timeout ends it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
		}
	}()
	c = NewChecker(Config{ProbeTimeout: 200 * time.Millisecond}, Deps{Tunnel: &net.Dialer{}})
	start := time.Now()
	if st, err := c.TunnelStatus(ctx, "http://"+ln.Addr().String()+"/"); st != 0 || err == nil {
		t.Fatalf("silent server: %d, %v; want no status and an error", st, err)
	} else if took := time.Since(start); took < 150*time.Millisecond || took > 2*time.Second {
		t.Fatalf("silent server answered %v after %v, want the 200 ms probe timeout", err, took)
	}

	// Refused.
	addr := ln.Addr().String()
	ln.Close()
	if st, err := c.TunnelStatus(ctx, "http://"+addr+"/"); st != 0 || err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("closed port: %d, %v; want connection refused", st, err)
	}
}

func TestParseStatusLine(t *testing.T) {
	for line, want := range map[string]int{"HTTP/1.1 204 No Content\r": 204, "HTTP/1.0 503": 503, "HTTP/1.1 200 OK": 200} {
		if got, err := parseStatusLine([]byte(line)); got != want || err != nil {
			t.Errorf("%q: %d, %v; want %d", line, got, err, want)
		}
	}
	for _, bad := range []string{"", "SSH-2.0-OpenSSH", "HTTP/1.1 2044", "HTTP/1.1 20", "HTTP/1.1 abc"} {
		if _, err := parseStatusLine([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// Whatever the far end sends, parsing the status line never panics and
// only accepts a three-digit code after an HTTP/ version.
func FuzzParseStatusLine(f *testing.F) {
	for _, s := range []string{"HTTP/1.1 204 No Content\r", "HTTP/1.0 503", "", "HTTP/ 9999", "\x00\xff"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		code, err := parseStatusLine(line)
		if err == nil && (code < 100 || code > 999 || !strings.HasPrefix(string(line), "HTTP/")) {
			t.Fatalf("%q: accepted code %d", line, code)
		}
	})
}
