package internet

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"surflare-watchdog/src/lab"
	"surflare-watchdog/src/lab/fakes"
)

// clientAddr is the caller's address as this host sees it.
func clientAddr(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// EchoReply is what IP-echo hosts (and the domestic web server) answer.
type EchoReply struct {
	IP      string `json:"ip"`
	Country string `json:"country"`
}

func (s *Servers) echoHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := clientAddr(r)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(EchoReply{IP: a.String(), Country: s.cfg.CountryOf(a)})
	})
}

func (s *Servers) traceHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/cdn-cgi/trace" {
			http.NotFound(w, r)
			return
		}
		a := clientAddr(r)
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "fl=lab\nh=%s\nip=%s\nts=%.3f\nvisit_scheme=http\nuag=%s\ncolo=LAB\nsliver=none\nhttp=http/1.1\nloc=%s\ntls=off\nsni=off\nwarp=off\ngateway=off\n",
			r.Host, a, float64(s.cfg.Now().UnixMilli())/1000, r.UserAgent(), s.cfg.CountryOf(a))
	})
}

func (s *Servers) searchHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/generate_204", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<!doctype html><title>Lab search</title><p>lab search engine</p>\n")
	})
	return mux
}

// Account API wire types, shared with the fake CLI.

// LoginRequest is the body of POST /v1/login.
type LoginRequest struct {
	Email    string `json:"email"`
	Password string `json:"password"`
}

// LoginReply is the 200 answer to POST /v1/login.
type LoginReply struct {
	Token     string `json:"token"`
	ExpiresIn int    `json:"expires_in"`
}

// AccountReply is the 200 answer to GET /v1/account.
type AccountReply struct {
	Email        string `json:"email"`
	Subscription string `json:"subscription"` // "active" or "inactive"
	Devices      int    `json:"devices"`
}

// ErrorReply is every non-200 answer of the account API.
type ErrorReply struct {
	Error string `json:"error"`
}

// Account API error strings; the fake CLI prints them, and they contain the
// contract's fatal login patterns.
const (
	ErrTooManyRequests = "Too Many Requests"
	ErrInvalidLogin    = "invalid username/password"
	ErrSubscription    = "Subscription expired"
	ErrDeviceLimit     = "Device limit reached (5/5)"
	ErrAccountCheck    = "Account check failed"
	ErrNotLoggedIn     = "not logged in"
	ErrSessionExpired  = "session expired"
	// ErrTokenExpired: the token is past its lifetime (token_ttl knob, E9).
	ErrTokenExpired = "token expired"
)

const tokenPrefix = "lab1."

func (s *Servers) apiHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/login", s.apiLogin)
	mux.HandleFunc("GET /v1/account", s.apiAccount)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.Faults.Current().APIDown || !s.apiReachable(clientAddr(r)) {
			resetHTTP(w)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// apiReachable applies the api_access and api_loss knobs (E9): behind the
// GFW the account API is reachable only through the tunnel (the request
// arrives from an exit), and even then not always.
func (s *Servers) apiReachable(from netip.Addr) bool {
	v := s.vendor()
	if v.APIAccess == fakes.APITunnel && !slices.ContainsFunc(s.cfg.Nodes, func(n lab.Node) bool { return n.Addr == from }) {
		return false
	}
	return v.APILossPct <= 0 || rand.IntN(100) >= v.APILossPct
}

// vendor is the knobs in force (Config.Vendor, or the defaults).
func (s *Servers) vendor() fakes.Vendor {
	if s.cfg.Vendor != nil {
		return s.cfg.Vendor()
	}
	return fakes.DefaultVendor()
}

// loginWork is the account API's time to check a password: real services
// hash it (bcrypt, argon2: 100-300 ms). The lab's instant answer made a
// `surflare login` process live a few milliseconds, so short that the
// credential tests' /proc scan could miss the password the argv-mode
// control must show.
const loginWork = 150 * time.Millisecond

func (s *Servers) apiLogin(w http.ResponseWriter, r *http.Request) {
	var req LoginRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&req); err != nil {
		apiError(w, http.StatusBadRequest, "bad request: "+err.Error())
		return
	}
	switch s.cfg.Faults.Current().Auth {
	case fakes.AuthRateLimited:
		apiError(w, http.StatusTooManyRequests, ErrTooManyRequests)
		return
	case fakes.AuthInvalid:
		apiError(w, http.StatusUnauthorized, ErrInvalidLogin)
		return
	case fakes.AuthSubscription:
		apiError(w, http.StatusPaymentRequired, ErrSubscription)
		return
	case fakes.AuthDeviceLimit:
		apiError(w, http.StatusForbidden, ErrDeviceLimit)
		return
	case fakes.AuthAccountCheck:
		apiError(w, http.StatusInternalServerError, ErrAccountCheck)
		return
	}
	// A real account API hashes the password before it answers.
	select {
	case <-time.After(loginWork):
	case <-r.Context().Done():
		return
	}
	if req.Email == "" || !strings.Contains(req.Email, "@") || req.Password != fakes.LabPassword {
		apiError(w, http.StatusUnauthorized, ErrInvalidLogin)
		return
	}
	tok := tokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(req.Email)) + "." +
		strconv.FormatInt(s.cfg.Now().UnixNano(), 10)
	writeJSON(w, http.StatusOK, LoginReply{Token: tok, ExpiresIn: s.vendor().TokenTTLS})
}

func (s *Servers) apiAccount(w http.ResponseWriter, r *http.Request) {
	email, issued, ok := parseToken(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	if !ok {
		apiError(w, http.StatusUnauthorized, ErrNotLoggedIn)
		return
	}
	if ttl := time.Duration(s.vendor().TokenTTLS) * time.Second; ttl > 0 && s.cfg.Now().Sub(issued) > ttl {
		apiError(w, http.StatusUnauthorized, ErrTokenExpired)
		return
	}
	f, modTime := s.cfg.Faults.CurrentWithTime()
	switch f.Auth {
	case fakes.AuthRateLimited:
		apiError(w, http.StatusTooManyRequests, ErrTooManyRequests)
		return
	case fakes.AuthAccountCheck:
		apiError(w, http.StatusInternalServerError, ErrAccountCheck)
		return
	case fakes.AuthExpired:
		if issued.Before(ExpiredSince(f, modTime)) {
			apiError(w, http.StatusUnauthorized, ErrSessionExpired)
			return
		}
	}
	sub := "active"
	if f.Auth == fakes.AuthSubscription {
		sub = "inactive"
	}
	writeJSON(w, http.StatusOK, AccountReply{Email: email, Subscription: sub, Devices: 1})
}

// ExpiredSince is when the "expired" auth fault began: sessions issued
// before it are expired. It is Injected["auth"], or the faults file's
// mtime when the fault was written without a stamp.
func ExpiredSince(f fakes.Faults, fileModTime time.Time) time.Time {
	if t, ok := f.Injected["auth"]; ok && !t.IsZero() {
		return t
	}
	return fileModTime
}

func parseToken(tok string) (email string, issued time.Time, ok bool) {
	rest, found := strings.CutPrefix(tok, tokenPrefix)
	if !found {
		return "", time.Time{}, false
	}
	e64, ns, found := strings.Cut(rest, ".")
	if !found {
		return "", time.Time{}, false
	}
	eb, err := base64.RawURLEncoding.DecodeString(e64)
	n, err2 := strconv.ParseInt(ns, 10, 64)
	if err != nil || err2 != nil {
		return "", time.Time{}, false
	}
	return string(eb), time.Unix(0, n), true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func apiError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, ErrorReply{Error: msg})
}

// resetHTTP drops the connection with an RST, the way an unreachable
// service looks to a client that already connected.
func resetHTTP(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	c, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}
