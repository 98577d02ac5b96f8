package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/go-chi/chi/v5"
)

// Request limits.
const (
	// maxBody bounds a command's JSON body.
	maxBody = 4 << 10
	// maxNodeName bounds the node of a rotate command.
	maxNodeName = 128
	// maxEventsQuery bounds ?n= of /events.
	maxEventsQuery = 1000
)

// PublicPaths are the only routes served without a token: the live-view
// page's own files, which fetch nothing until the user supplies a token.
var PublicPaths = []string{"/", "/app.js", "/style.css"}

func (s *Server) routes() chi.Router {
	r := chi.NewRouter()
	r.Use(s.recoverer, securityHeaders)
	s.staticRoutes(r)
	r.Route("/api/v1", func(r chi.Router) {
		r.Use(s.authenticate)
		r.Get("/ws", s.serveWS) // hijacks: no body buffering
		r.Group(func(r chi.Router) {
			r.Use(s.redactBody)
			r.Get("/status", s.getStatus)
			r.Get("/nodes", s.getNodes)
			r.Get("/events", s.getEvents)
			r.Get("/history", s.getHistory)
			r.Get("/metrics", s.getMetrics)
			r.Post("/check", s.command(func(ctx context.Context, _ *http.Request) error {
				return s.opts.Backend.Check(ctx)
			}))
			r.Post("/reconnect", s.command(func(ctx context.Context, _ *http.Request) error {
				return s.opts.Backend.Reconnect(ctx)
			}))
			r.Post("/rotate", s.command(s.rotate))
			r.Post("/diag", s.command(s.diag))
		})
		// Behind authenticate too: without a token, every path is 401.
		r.NotFound(func(w http.ResponseWriter, r *http.Request) {
			s.writeError(w, http.StatusNotFound, "no such endpoint")
		})
		r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
			s.writeError(w, http.StatusMethodNotAllowed, "method not allowed")
		})
	})
	return r
}

// securityHeaders keeps the page from being framed or sniffed and stops
// referrers; API answers are not cached.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// recoverer turns a panic in a handler into a 500 and a log line instead
// of a dropped connection and a stack trace.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("Web API handler panicked", "path", r.URL.Path, "panic", fmt.Sprint(v))
				s.writeError(w, http.StatusInternalServerError, "internal error")
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// authenticate admits a request with a valid token in the Authorization
// header (or, for the websocket, in the offered subprotocols). Addresses
// that failed too often get 429 before their token is even looked at. A
// read-only token gets 403 for every method but GET and HEAD, here and
// not per route, so a command added later cannot forget the check.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := clientKey(r.RemoteAddr)
		if limited, wait := s.limiter.limited(key); limited {
			s.rateLimited.Add(1)
			w.Header().Set("Retry-After", strconv.Itoa(int(wait/time.Second)+1))
			s.writeError(w, http.StatusTooManyRequests, "too many failed authentication attempts; wait and retry")
			return
		}
		scope := s.opts.Tokens.Lookup(requestToken(r))
		if scope == ScopeNone {
			s.limiter.fail(key)
			s.authFailures.Add(1)
			s.log.Info("Web API: authentication failed", "remote", key.String(), "path", r.URL.Path)
			w.Header().Set("WWW-Authenticate", `Bearer realm="surflare-watchdog"`)
			s.writeError(w, http.StatusUnauthorized, "a valid token is needed (Authorization: Bearer …)")
			return
		}
		if !scope.Allows(r.Method) {
			s.log.Info("Web API: read-only token refused for an action", "remote", key.String(), "method", r.Method, "path", r.URL.Path)
			s.writeError(w, http.StatusForbidden, readOnlyRefusal)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// readOnlyRefusal is the 403 answer to an action with a read-only token.
const readOnlyRefusal = "this token may only watch: actions need a write token " +
	"(ubus call surflare token_write, which only LuCI's write access to Surflare grants)"

// requestToken finds the credential: the Authorization header, else a
// websocket subprotocol TokenProtocolPrefix+token. Query parameters are
// deliberately not read (they end up in logs and browser history).
func requestToken(r *http.Request) string {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		if ok && strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(tok)
		}
		return ""
	}
	for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
		for p := range strings.SplitSeq(v, ",") {
			if tok, ok := strings.CutPrefix(strings.TrimSpace(p), TokenProtocolPrefix); ok {
				return tok
			}
		}
	}
	return ""
}

// bufferedWriter holds a response until the handler is done, so
// redactBody can scrub it whole.
type bufferedWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedWriter) Header() http.Header { return b.header }
func (b *bufferedWriter) WriteHeader(code int) {
	if b.status == 0 {
		b.status = code
	}
}
func (b *bufferedWriter) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}

// redactBody scrubs every secret from a response, whatever handler made
// it, so a new endpoint cannot leak one by accident.
func (s *Server) redactBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bw := &bufferedWriter{header: w.Header()}
		next.ServeHTTP(bw, r)
		out := s.redact(bw.body.Bytes())
		w.Header().Set("Content-Length", strconv.Itoa(len(out)))
		if bw.status == 0 {
			bw.status = http.StatusOK
		}
		w.WriteHeader(bw.status)
		w.Write(out)
	})
}

// redacted replaces a secret in a response.
const redacted = "[redacted]"

// redact replaces each secret, raw and as JSON escapes it, in b.
func (s *Server) redact(b []byte) []byte {
	if s.opts.Secrets == nil {
		return b
	}
	for _, sec := range s.opts.Secrets() {
		if len(sec) < 3 { // too short to be a credential; would mangle output
			continue
		}
		b = bytes.ReplaceAll(b, []byte(sec), []byte(redacted))
		if enc, err := json.Marshal(sec); err == nil {
			if esc := enc[1 : len(enc)-1]; !bytes.Equal(esc, []byte(sec)) {
				b = bytes.ReplaceAll(b, esc, []byte(redacted))
			}
		}
	}
	return b
}

func (s *Server) writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		s.log.Error("Web API: encoding response", "err", err)
		status, b = http.StatusInternalServerError, []byte(`{"error":"encoding response failed"}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func (s *Server) writeError(w http.ResponseWriter, status int, msg string) {
	s.writeJSON(w, status, map[string]string{"error": msg})
}

// backendError answers a failed Backend call.
func (s *Server) backendError(w http.ResponseWriter, what string, err error) {
	switch {
	case errors.Is(err, ErrBadRequest):
		s.writeError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		s.writeError(w, http.StatusGatewayTimeout, what+": the daemon did not answer in time")
	default:
		s.log.Warn("Web API: "+what+" failed", "err", err)
		s.writeError(w, http.StatusInternalServerError, what+": "+err.Error())
	}
}

func (s *Server) getStatus(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), backendTimeout)
	defer cancel()
	st, err := s.opts.Backend.Status(ctx)
	if err != nil {
		s.backendError(w, "status", err)
		return
	}
	s.writeJSON(w, http.StatusOK, st)
}

func (s *Server) getNodes(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), backendTimeout)
	defer cancel()
	nodes, err := s.opts.Backend.Nodes(ctx)
	if err != nil {
		s.backendError(w, "nodes", err)
		return
	}
	s.writeJSON(w, http.StatusOK, nodes)
}

// getEvents serves the recent history, oldest first; ?n= keeps the newest n.
func (s *Server) getEvents(w http.ResponseWriter, r *http.Request) {
	n := 0
	if q := r.URL.Query().Get("n"); q != "" {
		v, err := strconv.Atoi(q)
		if err != nil || v < 1 || v > maxEventsQuery {
			s.writeError(w, http.StatusBadRequest, fmt.Sprintf("n=%q: want a number from 1 to %d", q, maxEventsQuery))
			return
		}
		n = v
	}
	s.writeJSON(w, http.StatusOK, map[string]any{"events": s.hub.recent(n)})
}

// command wraps a POST: the body is read by do (at most maxBody), the
// answer is 202 {"ok":true} because the daemon acts asynchronously.
func (s *Server) command(do func(ctx context.Context, r *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		ctx, cancel := context.WithTimeout(r.Context(), backendTimeout)
		defer cancel()
		if err := do(ctx, r); err != nil {
			s.backendError(w, strings.TrimPrefix(r.URL.Path, "/api/v1/"), err)
			return
		}
		s.writeJSON(w, http.StatusAccepted, map[string]bool{"ok": true})
	}
}

// decodeBody reads an optional JSON object into v; unknown fields are an
// error so a typo is not silently ignored.
func decodeBody(r *http.Request, v any) error {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return fmt.Errorf("%w: reading body: %v", ErrBadRequest, err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: body: %v", ErrBadRequest, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: body: more than one JSON value", ErrBadRequest)
	}
	return nil
}

// rotate handles {"node": "..."}; no node = the next candidate.
func (s *Server) rotate(ctx context.Context, r *http.Request) error {
	var body struct {
		Node string `json:"node"`
	}
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	if len(body.Node) > maxNodeName || strings.IndexFunc(body.Node, func(r rune) bool {
		return !unicode.IsPrint(r)
	}) >= 0 {
		return fmt.Errorf("%w: node: want at most %d printable characters", ErrBadRequest, maxNodeName)
	}
	return s.opts.Backend.Rotate(ctx, strings.TrimSpace(body.Node))
}

// diag handles {"enable": bool}; enable is required.
func (s *Server) diag(ctx context.Context, r *http.Request) error {
	var body struct {
		Enable *bool `json:"enable"`
	}
	if err := decodeBody(r, &body); err != nil {
		return err
	}
	if body.Enable == nil {
		return fmt.Errorf(`%w: want {"enable": true} or {"enable": false}`, ErrBadRequest)
	}
	return s.opts.Backend.SetDiag(ctx, *body.Enable)
}
