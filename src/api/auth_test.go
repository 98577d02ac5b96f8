package api_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"surflare-watchdog/src/api"
)

// routes lists every (method, path) the router serves, with URL parameters
// filled in, so tests cover endpoints added later without being edited.
func routes(t *testing.T, srv *api.Server) [][2]string {
	t.Helper()
	param := regexp.MustCompile(`\{[^}]*\}`)
	var out [][2]string
	err := chi.Walk(srv.Routes(), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		route = param.ReplaceAllString(route, "x")
		route = strings.ReplaceAll(route, "/*", "/x")
		out = append(out, [2]string{method, route})
		return nil
	})
	if err != nil {
		t.Fatalf("chi.Walk: %v", err)
	}
	return out
}

func TestEveryRouteRefusesUnauthenticated(t *testing.T) {
	f := newFixture(t, nil)
	rs := routes(t, f.srv)
	var nAPI, public int
	for i, r := range rs {
		method, path := r[0], r[1]
		if slices.Contains(api.PublicPaths, path) {
			public++
			continue
		}
		nAPI++
		// A fresh address each time, so the failure limit does not answer
		// for the authentication check.
		remote := func(k int) string { return fmt.Sprintf("198.18.%d.%d:40000", i, k) }
		cases := []struct {
			name string
			tok  string
			mod  func(*http.Request)
		}{
			{"no token", "", nil},
			{"wrong token", "AAAAAAAAAAAAAAAAAAAAAAAAAA", nil},
			{"token in query", "", func(r *http.Request) { r.URL.RawQuery = "token=" + f.token }},
			{"basic auth", "", func(r *http.Request) { r.SetBasicAuth("root", f.token) }},
			{"cookie", "", func(r *http.Request) { r.AddCookie(&http.Cookie{Name: "token", Value: f.token}) }},
		}
		for k, c := range cases {
			req, _ := http.NewRequest(method, path, strings.NewReader(`{"node":"Chicago","enable":true}`))
			req.RemoteAddr = remote(k)
			if c.tok != "" {
				req.Header.Set("Authorization", "Bearer "+c.tok)
			}
			if c.mod != nil {
				c.mod(req)
			}
			rec := httptest.NewRecorder()
			f.srv.Handler().ServeHTTP(rec, req)
			if rec.Code != http.StatusUnauthorized {
				t.Errorf("%s %s with %s: status %d, want 401", method, path, c.name, rec.Code)
			}
			if strings.Contains(rec.Body.String(), `"state"`) || strings.Contains(rec.Body.String(), "surflare_watchdog_") {
				t.Errorf("%s %s with %s leaked data: %s", method, path, c.name, rec.Body)
			}
		}
	}
	if nAPI < 9 {
		t.Errorf("walked %d API routes, want at least 9 (status, nodes, events, metrics, check, rotate, reconnect, diag, ws): %v", nAPI, rs)
	}
	if public != len(api.PublicPaths) {
		t.Errorf("walked %d public routes, want %d", public, len(api.PublicPaths))
	}
	if calls := f.fake.Calls(); len(calls) != 0 {
		t.Errorf("unauthenticated requests reached the daemon: %v", calls)
	}
}

func TestPublicPagesHoldNoData(t *testing.T) {
	f := newFixture(t, nil)
	for _, p := range api.PublicPaths {
		rec := f.do("GET", p, "", "", "198.18.0.1:1")
		if rec.Code != http.StatusOK {
			t.Errorf("GET %s: %d, want 200", p, rec.Code)
		}
		body := rec.Body.String()
		for _, leak := range []string{"Dallas", "198.19.", plantedSecret, f.token} {
			if strings.Contains(body, leak) {
				t.Errorf("GET %s serves %q without a token", p, leak)
			}
		}
		if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("GET %s: Content-Security-Policy %q", p, csp)
		}
	}
	// The browser tests and the LuCI view rely on these ids.
	page := f.do("GET", "/", "", "", "198.18.0.1:1").Body.String()
	for _, id := range []string{"state", "node", "exit", "timeline", "nodes", "log", "btn-check", "btn-rotate", "btn-diag", "token-input"} {
		if !strings.Contains(page, `id="`+id+`"`) {
			t.Errorf("index.html has no element #%s", id)
		}
	}
}

func TestTokenAcceptedUntilItExpires(t *testing.T) {
	f := newFixture(t, nil)
	short := f.tokens.Mint(time.Minute)
	if rec := f.do("GET", "/api/v1/status", short, "", "198.18.1.1:1"); rec.Code != http.StatusOK {
		t.Fatalf("fresh token: %d %s", rec.Code, rec.Body)
	}
	f.clock.Advance(59 * time.Second)
	if rec := f.do("GET", "/api/v1/status", short, "", "198.18.1.1:1"); rec.Code != http.StatusOK {
		t.Fatalf("token at 59 s of 60: %d", rec.Code)
	}
	f.clock.Advance(2 * time.Second)
	if rec := f.do("GET", "/api/v1/status", short, "", "198.18.1.1:1"); rec.Code != http.StatusUnauthorized {
		t.Fatalf("expired token: %d, want 401", rec.Code)
	}
	// The long-lived token minted by the fixture still works.
	if rec := f.do("GET", "/api/v1/status", f.token, "", "198.18.1.1:1"); rec.Code != http.StatusOK {
		t.Fatalf("live token after another expired: %d", rec.Code)
	}
}

func TestStaticTokenAndSyntax(t *testing.T) {
	f := newFixture(t, nil)
	if err := f.tokens.AddStatic("short"); err == nil {
		t.Error("AddStatic accepted a 5-character token")
	}
	if err := f.tokens.AddStatic("has spaces in the token"); err == nil {
		t.Error("AddStatic accepted a token with spaces")
	}
	const static = "laptop-token-0123456789"
	if err := f.tokens.AddStatic(static); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(48 * time.Hour)
	if rec := f.do("GET", "/api/v1/nodes", static, "", "198.18.1.2:1"); rec.Code != http.StatusOK {
		t.Fatalf("static token after two days: %d", rec.Code)
	}
	if rec := f.do("GET", "/api/v1/nodes", static+"x", "", "198.18.1.2:1"); rec.Code != http.StatusUnauthorized {
		t.Fatalf("static token with a suffix: %d, want 401", rec.Code)
	}
}

func TestFailedAuthIsRateLimitedPerAddress(t *testing.T) {
	f := newFixture(t, nil)
	const attacker, other = "198.18.2.1:5555", "198.18.2.2:5555"
	for i := range 10 {
		if rec := f.do("GET", "/api/v1/status", fmt.Sprintf("GUESS%021d", i), "", attacker); rec.Code != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d, want 401", i+1, rec.Code)
		}
	}
	rec := f.do("GET", "/api/v1/status", "GUESSXXXXXXXXXXXXXXXXXXXXX", "", attacker)
	if rec.Code != http.StatusTooManyRequests {
		t.Fatalf("11th guess: %d, want 429", rec.Code)
	}
	if rec.Header().Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	// While limited, even the right token learns nothing.
	if rec := f.do("GET", "/api/v1/status", f.token, "", attacker); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("valid token from a limited address: %d, want 429", rec.Code)
	}
	// Another address is unaffected; so is the same client on another port.
	if rec := f.do("GET", "/api/v1/status", f.token, "", other); rec.Code != http.StatusOK {
		t.Fatalf("other address: %d, want 200", rec.Code)
	}
	if rec := f.do("GET", "/api/v1/status", f.token, "", "198.18.2.1:6666"); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("limited address from another port: %d, want 429", rec.Code)
	}
	// IPv6 clients are keyed by /64: hopping addresses inside it does not help.
	for i := range 10 {
		f.do("GET", "/api/v1/status", "", "", fmt.Sprintf("[fd00:1:2:3::%x]:1", i+1))
	}
	if rec := f.do("GET", "/api/v1/status", f.token, "", "[fd00:1:2:3::ffff]:1"); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("another address in a limited /64: %d, want 429", rec.Code)
	}
	// One attempt comes back every 6 s.
	f.clock.Advance(6 * time.Second)
	if rec := f.do("GET", "/api/v1/status", f.token, "", attacker); rec.Code != http.StatusOK {
		t.Fatalf("after 6 s: %d, want 200", rec.Code)
	}
	if rec := f.do("GET", "/api/v1/metrics", f.token, "", other); !strings.Contains(rec.Body.String(), "surflare_watchdog_api_rate_limited_total 4") {
		t.Errorf("metrics do not count the 4 limited requests:\n%s", rec.Body)
	}
}

func TestPathVariantsDoNotSkipAuth(t *testing.T) {
	f := newFixture(t, nil)
	for i, p := range []string{
		"/api/v1/status/", "//api/v1/status", "/api/v1//status", "/api/v1/./status", "/api/v1/x/../status",
		"/API/v1/status", "/api/v1/status%2f", "/api/v1/%73tatus", "/api/v1", "/api/v1/", "/api/", "/app.js/../api/v1/status",
	} {
		req := httptest.NewRequest("GET", "http://router"+p, nil)
		req.RemoteAddr = fmt.Sprintf("198.18.3.%d:1", i+1)
		rec := httptest.NewRecorder()
		f.srv.Handler().ServeHTTP(rec, req)
		if rec.Code == http.StatusOK || strings.Contains(rec.Body.String(), "Dallas") {
			t.Errorf("GET %s without a token: %d %.80s", p, rec.Code, rec.Body)
		}
	}
}
