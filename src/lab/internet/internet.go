// Package internet runs the lab's internet-side servers inside the internet
// namespace: relays (transits) and exit nodes speaking the fakes tunnel
// protocol, the probe targets (IP echo, CDN trace, search with
// /generate_204), the Surflare account API, the domestic web server, DNS
// resolvers (UDP+TCP), a DoH listener and an IPv6 echo host. Faults from
// faults.json (node_down, node_503, latency_ms, api_down, auth) change their
// answers at run time.
//
// Every service binds its plan address with IP_FREEBIND, so it can start
// before the topology has assigned the addresses.
package internet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"surflare-watchdog/src/lab"
	"surflare-watchdog/src/lab/fakes"
)

// Config says where every service listens. PlanConfig gives the lab plan;
// tests use loopback addresses instead.
type Config struct {
	Relays    []lab.Relay
	RelayPort uint16
	Nodes     []lab.Node
	ExitPort  uint16

	HTTPPort    uint16 // echo, trace, search, account API, domestic web, IPv6 echo
	IPEcho      []netip.Addr
	CDNTrace    []netip.Addr
	Search      []netip.Addr
	AccountAPI  []netip.Addr
	DomesticWeb []netip.Addr
	Internet6   []netip.Addr
	// HTTPSPort, if not 0, also serves the search host over TLS (tls.go):
	// the shipped 503 probe asks an https:// URL. Its certificate is for
	// the Search addresses and SearchNames, issued by a CA made at start
	// and written to CAFile (if set); HTTPSLog (if set) gets a line per
	// request (HTTPSRequest).
	HTTPSPort   uint16
	SearchNames []string
	CAFile      string
	HTTPSLog    string
	// Chnroute are the domestic prefixes the domestic web server lists at
	// lab.ChnroutePath (APNIC delegated format, country CN).
	Chnroute []netip.Prefix

	DNSPort uint16
	DNS     []netip.Addr // ForeignDNS and DomesticDNS: same built-in zone
	DoHPort uint16
	DoH     []netip.Addr
	Zone    Zone
	// OnQuery, if set, is told about every question the resolvers and the
	// DoH endpoint answer (see QueryLogName).
	OnQuery func(Query)

	// DialTimeout bounds an exit's dial to the final destination and a
	// relay's dial to an exit.
	DialTimeout time.Duration
	// CountryOf maps a client address to a country for the echo hosts.
	CountryOf func(netip.Addr) string
	// Faults supplies the current faults (required).
	Faults *fakes.Watcher
	// Vendor supplies the vendor knobs the account API follows
	// (api_access, api_loss, token_ttl); nil = fakes.DefaultVendor.
	Vendor func() fakes.Vendor
	// Now is the clock for tokens and the expired-session fault.
	Now func() time.Time
}

// PlanConfig is the lab plan's internet, with faults from labDir.
func PlanConfig(labDir string) Config {
	info := fakes.NewInfoWatcher(labDir)
	return Config{
		Relays:      lab.Relays,
		RelayPort:   lab.RelayPort,
		Nodes:       lab.Exits,
		ExitPort:    lab.ExitPort,
		HTTPPort:    80,
		IPEcho:      lab.IPEcho,
		CDNTrace:    lab.CDNTrace,
		Search:      []netip.Addr{lab.Search},
		AccountAPI:  []netip.Addr{lab.AccountAPI},
		DomesticWeb: []netip.Addr{lab.DomesticWeb},
		Internet6:   []netip.Addr{lab.Internet6},
		HTTPSPort:   443,
		SearchNames: []string{"search.lab"},
		CAFile:      filepath.Join(labDir, lab.CAFileName),
		HTTPSLog:    filepath.Join(labDir, "log", HTTPSLogName),
		Chnroute:    []netip.Prefix{lab.DomesticNet},
		DNSPort:     53,
		DNS:         []netip.Addr{lab.ForeignDNS, lab.DomesticDNS},
		DoHPort:     443,
		DoH:         []netip.Addr{lab.DoH},
		Zone:        PlanZone(),
		OnQuery:     QueryFileLogger(filepath.Join(labDir, "log", QueryLogName)),
		DialTimeout: 5 * time.Second,
		CountryOf:   lab.CountryOf,
		Faults:      fakes.NewWatcher(labDir, nil),
		Vendor:      func() fakes.Vendor { return info.Current().Vendor },
		Now:         time.Now,
	}
}

// Run serves the plan's internet in the current network namespace until ctx
// is cancelled. It fails at once if any service cannot bind.
func Run(ctx context.Context, labDir string) error {
	s, err := Start(ctx, PlanConfig(labDir))
	if err != nil {
		return err
	}
	<-ctx.Done()
	s.Wait()
	return nil
}

// Servers is a running internet; Start returns it once every listener is bound.
type Servers struct {
	cfg  Config
	log  *slog.Logger
	wg   sync.WaitGroup
	mu   sync.Mutex
	stop []func()
	// caPEM is the lab CA (HTTPSPort), see CAPEM.
	caPEM []byte
}

// Start binds every service of cfg and serves them until ctx is cancelled.
func Start(ctx context.Context, cfg Config) (*Servers, error) {
	if cfg.Faults == nil {
		return nil, errors.New("internet: Config.Faults is required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.CountryOf == nil {
		cfg.CountryOf = lab.CountryOf
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	s := &Servers{cfg: cfg, log: slog.Default().With("subsystem", "lab-internet")}
	err := s.startAll(ctx)
	if err != nil {
		s.closeAll()
		s.wg.Wait()
		return nil, err
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		<-ctx.Done()
		s.closeAll()
	}()
	return s, nil
}

// Wait blocks until every server goroutine has ended (after ctx is done).
func (s *Servers) Wait() { s.wg.Wait() }

func (s *Servers) startAll(ctx context.Context) error {
	c := s.cfg
	for _, r := range c.Relays {
		if err := s.serveTCP(ctx, r.Addr, c.RelayPort, "relay "+r.Name, func(conn net.Conn) { s.handleRelay(ctx, r, conn) }); err != nil {
			return err
		}
	}
	for _, n := range c.Nodes {
		if err := s.serveTCP(ctx, n.Addr, c.ExitPort, "exit "+n.Name, func(conn net.Conn) { s.handleExit(ctx, n, conn) }); err != nil {
			return err
		}
	}
	httpServices := []struct {
		name  string
		addrs []netip.Addr
		h     http.Handler
	}{
		{"ip-echo", c.IPEcho, s.echoHandler()},
		{"cdn-trace", c.CDNTrace, s.traceHandler()},
		{"search", c.Search, s.searchHandler()},
		{"account-api", c.AccountAPI, s.apiHandler()},
		{"domestic-web", c.DomesticWeb, s.domesticHandler()},
		{"ipv6-echo", c.Internet6, s.echoHandler()},
	}
	for _, svc := range httpServices {
		for _, a := range svc.addrs {
			if err := s.serveHTTP(ctx, a, c.HTTPPort, svc.name, svc.h); err != nil {
				return err
			}
		}
	}
	if c.HTTPSPort != 0 {
		if err := s.startHTTPS(ctx, c); err != nil {
			return err
		}
	}
	for _, a := range c.DoH {
		if err := s.serveHTTP(ctx, a, c.DoHPort, "doh", s.dohHandler()); err != nil {
			return err
		}
	}
	for _, a := range c.DNS {
		if err := s.serveDNS(ctx, a, c.DNSPort); err != nil {
			return err
		}
	}
	return nil
}

func (s *Servers) onStop(f func()) {
	s.mu.Lock()
	s.stop = append(s.stop, f)
	s.mu.Unlock()
}

func (s *Servers) closeAll() {
	s.mu.Lock()
	fs := s.stop
	s.stop = nil
	s.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

// listenConfig sets IP_FREEBIND (or IPV6_FREEBIND) so a service can bind its
// plan address before the address exists on an interface.
var listenConfig = net.ListenConfig{
	Control: func(network, address string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			if network == "tcp6" || network == "udp6" {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_IPV6, unix.IPV6_FREEBIND, 1)
			} else {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_FREEBIND, 1)
			}
		})
		return errors.Join(err, serr)
	},
}

func network(base string, a netip.Addr) string {
	if a.Is4() {
		return base + "4"
	}
	return base + "6"
}

func hostPort(a netip.Addr, port uint16) string {
	return net.JoinHostPort(a.String(), strconv.Itoa(int(port)))
}

func (s *Servers) listen(ctx context.Context, a netip.Addr, port uint16, what string) (net.Listener, error) {
	ln, err := listenConfig.Listen(ctx, network("tcp", a), hostPort(a, port))
	if err != nil {
		return nil, fmt.Errorf("starting %s on %s: %w", what, hostPort(a, port), err)
	}
	s.onStop(func() { ln.Close() })
	return ln, nil
}

// serveTCP accepts connections and runs handle for each in its own goroutine.
func (s *Servers) serveTCP(ctx context.Context, a netip.Addr, port uint16, what string, handle func(net.Conn)) error {
	ln, err := s.listen(ctx, a, port, what)
	if err != nil {
		return err
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		var conns sync.WaitGroup
		defer conns.Wait()
		for {
			c, err := ln.Accept()
			if err != nil {
				if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
					return
				}
				s.log.Warn("accept failed", "service", what, "err", err)
				sleepCtx(ctx, 50*time.Millisecond)
				continue
			}
			conns.Add(1)
			go func() {
				defer conns.Done()
				stop := context.AfterFunc(ctx, func() { c.Close() })
				defer stop()
				handle(c)
			}()
		}
	}()
	return nil
}

func (s *Servers) serveHTTP(ctx context.Context, a netip.Addr, port uint16, what string, h http.Handler) error {
	ln, err := s.listen(ctx, a, port, what)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	s.onStop(func() { srv.Close() })
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		srv.Serve(ln)
	}()
	return nil
}

// sleepCtx waits d or until ctx is done; it reports whether the full d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
