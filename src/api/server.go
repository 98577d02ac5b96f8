// Package api is the daemon's HTTP API and live stream: JSON status and
// commands under /api/v1 (github.com/go-chi/chi/v5), Prometheus metrics, a
// websocket hub (github.com/gorilla/websocket) and the embedded live-view
// page. It reads state and sends commands through a small Backend
// interface, so it never imports the watchdog. See README.md.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/gorilla/websocket"

	"surflare-watchdog/src/config"
)

// HTTP server limits.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 60 * time.Second
	maxHeaderBytes    = 8 << 10
	// backendTimeout bounds one Backend call made for a request.
	backendTimeout = 10 * time.Second
	// shutdownGrace is how long Serve waits for requests when ctx ends.
	shutdownGrace = 3 * time.Second
	// defaultSnapshotEvery refreshes the clients' status (uptime, ages)
	// even when nothing happens.
	defaultSnapshotEvery = 10 * time.Second
)

// Options configure a Server. Backend and Tokens are required.
type Options struct {
	Backend Backend
	// Tokens decides which bearer tokens are accepted.
	Tokens *Tokens
	// Listen is host:port for Serve (see ListenAddress).
	Listen string
	// AllowedOrigins are extra websocket origins (scheme://host[:port])
	// besides the page's own, e.g. a LuCI served from another host name.
	AllowedOrigins []string
	// AllowHostWebUI also accepts the origin of the web server on the
	// same host at the default port (LuCI on the router). Set on routers.
	AllowHostWebUI bool
	// Secrets returns strings that must never appear in a response (the
	// vendor password, the account name, the token file's contents). Any
	// occurrence is replaced by "[redacted]".
	Secrets func() []string
	// Logger defaults to slog.Default() with subsystem=api.
	Logger *slog.Logger
	// Now is the clock of token expiry and rate limiting (nil = time.Now).
	Now func() time.Time
	// History is how many events are kept for /events (0 = 200).
	History int
	// SnapshotEvery is the period of unprompted snapshots on the websocket
	// (0 = 10 s, negative = only after events).
	SnapshotEvery time.Duration
}

// Server is the API. Handler serves it; Run must be running for the
// websocket stream and metrics of the hub (Serve runs it).
type Server struct {
	opts     Options
	log      *slog.Logger
	now      func() time.Time
	origins  map[string]bool
	hub      *hub
	limiter  *failLimiter
	upgrader *websocket.Upgrader
	router   chi.Router
	started  atomic.Bool
	poke     chan struct{} // 1-slot: a snapshot is due

	detections   detections
	authFailures atomic.Int64
	rateLimited  atomic.Int64
}

// NewServer checks opts and builds the router. It starts nothing.
func NewServer(opts Options) (*Server, error) {
	if opts.Backend == nil {
		return nil, errors.New("api: no backend")
	}
	if opts.Tokens == nil {
		return nil, errors.New("api: no token store")
	}
	s := &Server{
		opts:    opts,
		log:     opts.Logger,
		now:     opts.Now,
		origins: map[string]bool{},
		hub:     newHub(opts.History),
		poke:    make(chan struct{}, 1),
	}
	if s.log == nil {
		s.log = slog.Default().With("subsystem", "api")
	}
	if s.now == nil {
		s.now = time.Now
	}
	for _, o := range opts.AllowedOrigins {
		u, err := url.Parse(o)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || (u.Path != "" && u.Path != "/") {
			return nil, fmt.Errorf("api: allowed origin %q: want scheme://host[:port] with scheme http or https", o)
		}
		s.origins[normalizeOrigin(u)] = true
	}
	s.limiter = newFailLimiter(s.now)
	s.upgrader = s.newUpgrader()
	s.router = s.routes()
	return s, nil
}

// Handler is the whole API and page, for Serve or a test server.
func (s *Server) Handler() http.Handler { return s.router }

// Routes exposes the router for route enumeration (chi.Walk).
func (s *Server) Routes() chi.Routes { return s.router }

// Publish sends ev to the websocket clients and the history. It never
// blocks: when the hub is behind, the event is dropped for the live stream
// (still kept in the history) and counted.
func (s *Server) Publish(ev Event) {
	if ev.Time.IsZero() {
		ev.Time = s.now()
	}
	frame, err := json.Marshal(ev)
	if err != nil {
		s.log.Warn("Dropping unencodable event", "kind", ev.Kind, "err", err)
		return
	}
	frame = s.redact(frame)
	if ev.Kind == KindHealth {
		s.detections.add(frame)
	}
	s.hub.publish(knownKind(ev.Kind), frame, true)
	if ev.Kind != KindLog {
		select {
		case s.poke <- struct{}{}:
		default:
		}
	}
}

func knownKind(k string) string {
	switch k {
	case KindTransition, KindHealth, KindSignal, KindRotation, KindLog:
		return k
	}
	return "other"
}

// Run runs the hub, follows the backend's events (if it is a Subscriber)
// and sends snapshots until ctx ends. Call it once.
func (s *Server) Run(ctx context.Context) error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("api: Run called twice")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hubDone := make(chan struct{})
	s.hub.running.Store(true) // streams are accepted from here on
	go func() { s.hub.run(ctx); close(hubDone) }()
	if sub, ok := s.opts.Backend.(Subscriber); ok {
		go s.follow(ctx, sub)
	}
	s.snapshots(ctx)
	<-hubDone
	return nil
}

// follow publishes the backend's events until ctx ends or the stream closes.
func (s *Server) follow(ctx context.Context, sub Subscriber) {
	events, stop := sub.Subscribe()
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			s.Publish(ev)
		}
	}
}

// snapshots publishes a status+nodes frame after events (coalesced) and
// every SnapshotEvery, until ctx ends.
func (s *Server) snapshots(ctx context.Context) {
	every := s.opts.SnapshotEvery
	if every == 0 {
		every = defaultSnapshotEvery
	}
	var tick <-chan time.Time
	if every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.poke:
		case <-tick:
		}
		// Nobody to send it to: a new websocket gets its own first
		// snapshot, so building this one (a status with the firewall's
		// table sizes read from the kernel, JSON) would be work for no one
		// — a sixth of an idle daemon's CPU (issue 19).
		if s.hub.nClients.Load() == 0 {
			continue
		}
		s.hub.publish(KindSnapshot, s.snapshotFrame(ctx, false), false)
	}
}

// snapshotFrame is a KindSnapshot frame: {status, nodes} and, for a new
// connection, the recent events. A failing backend call is reported in
// the frame instead of the value.
func (s *Server) snapshotFrame(ctx context.Context, withEvents bool) []byte {
	ctx, cancel := context.WithTimeout(ctx, backendTimeout)
	defer cancel()
	data := map[string]any{}
	if st, err := s.opts.Backend.Status(ctx); err != nil {
		data["status_error"] = err.Error()
	} else {
		data["status"] = st
	}
	if nodes, err := s.opts.Backend.Nodes(ctx); err != nil {
		data["nodes_error"] = err.Error()
	} else {
		data["nodes"] = nodes
	}
	if withEvents {
		data["events"] = s.hub.recent(0)
	}
	frame, err := json.Marshal(Event{Time: s.now(), Kind: KindSnapshot, Data: data})
	if err != nil {
		frame, _ = json.Marshal(Event{Time: s.now(), Kind: KindSnapshot,
			Data: map[string]string{"status_error": "encoding status: " + err.Error()}})
	}
	return s.redact(frame)
}

// Serve listens on opts.Listen and serves until ctx ends, then shuts down
// gracefully (open websockets get a close frame).
func (s *Server) Serve(ctx context.Context) error {
	if s.opts.Listen == "" {
		return errors.New("api: no listen address")
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.opts.Listen)
	if err != nil {
		return fmt.Errorf("web: listening on %s: %w", s.opts.Listen, err)
	}
	return s.ServeListener(ctx, ln)
}

// ServeListener is Serve on a listener the caller opened (tests, socket
// activation). It closes ln.
func (s *Server) ServeListener(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	srv := &http.Server{
		Handler:           s.router,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	runDone := make(chan error, 1)
	go func() { runDone <- s.Run(ctx) }()
	serveDone := make(chan error, 1)
	go func() { serveDone <- srv.Serve(ln) }()
	s.log.Info("Web API listening", "addr", ln.Addr().String())

	var err error
	select {
	case <-ctx.Done():
	case err = <-serveDone:
		err = fmt.Errorf("web: serving: %w", err)
	}
	cancel()
	sctx, scancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer scancel()
	if serr := srv.Shutdown(sctx); serr != nil && err == nil && !errors.Is(serr, context.DeadlineExceeded) {
		err = fmt.Errorf("web: shutting down: %w", serr)
	}
	if rerr := <-runDone; rerr != nil && err == nil {
		err = rerr
	}
	return err
}

// DefaultPort is the API's port when web.port is unset.
const DefaultPort = 9099

// ListenAddress is where the API listens: web.listen when set, else the
// router's LAN address, else 127.0.0.1 (a laptop, or no LAN address): the
// API is never exposed on the WAN by default.
func ListenAddress(web config.Web, lan netip.Addr) string {
	port := web.Port
	if port == 0 {
		port = DefaultPort
	}
	addr := netip.AddrFrom4([4]byte{127, 0, 0, 1})
	switch {
	case web.Listen.IsValid():
		addr = web.Listen
	case lan.IsValid():
		addr = lan
	}
	return netip.AddrPortFrom(addr.Unmap(), uint16(port)).String()
}
