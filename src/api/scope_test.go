package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"surflare-watchdog/src/api"
)

// TestReadTokenNeverActs walks every route the router serves: with a
// read-only token (what LuCI's read ACL can get) every method other than
// GET and HEAD is 403 with a plain-words JSON error and reaches nothing in
// the daemon, and every GET works; with a write token the same actions
// get through. A route added later is covered without editing this test.
func TestReadTokenNeverActs(t *testing.T) {
	f := newFixture(t, nil)
	body := `{"node":"Chicago","enable":true}`
	var actions, reads int
	for i, r := range routes(t, f.srv) {
		method, path := r[0], r[1]
		if slices.Contains(api.PublicPaths, path) {
			continue
		}
		remote := fmt.Sprintf("198.18.%d.1:40000", i)
		before := len(f.fake.Calls())
		rec := f.do(method, path, f.readToken, body, remote)
		if method == http.MethodGet || method == http.MethodHead {
			reads++
			if rec.Code == http.StatusUnauthorized || rec.Code == http.StatusForbidden {
				t.Errorf("%s %s with a read token: %d %s, want it served", method, path, rec.Code, rec.Body)
			}
			continue
		}
		actions++
		if rec.Code != http.StatusForbidden {
			t.Errorf("%s %s with a read token: %d %s, want 403", method, path, rec.Code, rec.Body)
		}
		var e struct{ Error string }
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || !strings.Contains(e.Error, "write token") {
			t.Errorf("%s %s with a read token: body %q, want a JSON error saying a write token is needed", method, path, rec.Body)
		}
		if calls := f.fake.Calls(); len(calls) != before {
			t.Fatalf("%s %s with a read token reached the daemon: %v", method, path, calls[before:])
		}
		if rec := f.do(method, path, f.token, body, remote); rec.Code == http.StatusUnauthorized || rec.Code == http.StatusForbidden {
			t.Errorf("%s %s with a write token: %d %s, want it served", method, path, rec.Code, rec.Body)
		}
	}
	if actions < 4 || reads < 5 {
		t.Errorf("walked %d actions and %d reads, want at least 4 (check, rotate, reconnect, diag) and 5", actions, reads)
	}
	// Methods no route has are refused before routing, not answered 405:
	// a read token learns nothing about which actions exist.
	for _, m := range []string{"PUT", "DELETE", "PATCH", "OPTIONS"} {
		if rec := f.do(m, "/api/v1/status", f.readToken, body, "198.18.200.1:1"); rec.Code != http.StatusForbidden {
			t.Errorf("%s /api/v1/status with a read token: %d, want 403", m, rec.Code)
		}
	}
	// A refused action is not a failed authentication: the address is not
	// rate limited for it.
	for range 20 {
		f.do("POST", "/api/v1/check", f.readToken, "", "198.18.201.1:1")
	}
	if rec := f.do("GET", "/api/v1/status", f.readToken, "", "198.18.201.1:1"); rec.Code != http.StatusOK {
		t.Errorf("GET after 20 refused actions: %d, want 200", rec.Code)
	}
}

// TestReadTokenOpensTheWebsocket: the live view works for a read-only user.
func TestReadTokenOpensTheWebsocket(t *testing.T) {
	f := newFixture(t, nil)
	ts := f.run(t)
	c, resp, err := dialWS(ts, f.readToken, ts.URL)
	if err != nil {
		t.Fatalf("websocket with a read token: %v (%v)", err, resp)
	}
	defer c.Close()
	readUntil(t, c, "the first snapshot", func(fr frame) bool { return fr.Kind == "snapshot" })
}

func TestTokenScopes(t *testing.T) {
	clock := newClock()
	ts := api.NewTokens(clock.Now)
	read, write := ts.Mint(time.Minute), ts.MintScoped(api.ScopeWrite, time.Minute)
	odd := ts.MintScoped(api.Scope(9), time.Minute) // unknown scopes are read, never more
	const static = "laptop-token-0123456789"
	if err := ts.AddStatic(static); err != nil {
		t.Fatal(err)
	}
	for tok, want := range map[string]api.Scope{read: api.ScopeRead, write: api.ScopeWrite, odd: api.ScopeRead, static: api.ScopeWrite, "": api.ScopeNone, "nosuchtoken0123456789": api.ScopeNone} {
		if got := ts.Lookup(tok); got != want {
			t.Errorf("Lookup(%q) = %v, want %v", tok, got, want)
		}
	}
	clock.Advance(time.Minute)
	if ts.Lookup(write) != api.ScopeNone || ts.Lookup(read) != api.ScopeNone {
		t.Error("expired tokens still have a scope")
	}
	for _, c := range []struct {
		s      api.Scope
		method string
		want   bool
	}{{api.ScopeRead, "GET", true}, {api.ScopeRead, "HEAD", true}, {api.ScopeRead, "POST", false}, {api.ScopeRead, "get", false},
		{api.ScopeWrite, "POST", true}, {api.ScopeWrite, "DELETE", true}, {api.ScopeNone, "GET", false}} {
		if got := c.s.Allows(c.method); got != c.want {
			t.Errorf("%v.Allows(%s) = %v, want %v", c.s, c.method, got, c.want)
		}
	}
}

// TestGrantIsTheUbusReply: what the ubus token methods answer, and that
// the token in it has the scope it says.
func TestGrantIsTheUbusReply(t *testing.T) {
	ts := api.NewTokens(newClock().Now)
	for _, c := range []struct {
		scope api.Scope
		want  string
	}{{api.ScopeRead, "read"}, {api.ScopeWrite, "write"}, {api.ScopeNone, "read"}} {
		g := ts.Grant(c.scope, time.Hour)
		tok, _ := g["token"].(string)
		if g["scope"] != c.want || g["expires_in"] != 3600 || ts.Lookup(tok).String() != c.want {
			t.Errorf("Grant(%v): %v, token scope %v; want scope %s, 3600 s", c.scope, g, ts.Lookup(tok), c.want)
		}
	}
}
