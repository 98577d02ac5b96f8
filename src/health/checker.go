package health

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// Checker runs checks; safe for concurrent use.
type Checker struct {
	cfg       Config
	deps      Deps
	tunnel    []Target
	proxy     *Target
	clients   map[Path]*http.Client
	tunnelTLS *tls.Config // the tunnel client's, shared with statusGET (one session cache)
}

// NewChecker fills in defaults and builds one HTTP client per path.
func NewChecker(cfg Config, deps Deps) *Checker {
	if cfg.EgressRetries <= 0 {
		cfg.EgressRetries = DefaultEgressRetries
	}
	if cfg.ProbeTimeout <= 0 {
		cfg.ProbeTimeout = DefaultProbeTimeout
	}
	if cfg.EgressTimeout <= 0 {
		cfg.EgressTimeout = DefaultEgressTimeout
	}
	if cfg.ConfirmDelay <= 0 {
		cfg.ConfirmDelay = DefaultConfirmDelay
	}
	if cfg.DomesticCountry == "" {
		cfg.DomesticCountry = DefaultDomesticCountry
	}
	if cfg.ProxyName == "" {
		cfg.ProxyName = DefaultProxyName
	}
	if deps.Tunnel == nil {
		deps.Tunnel = &net.Dialer{}
	}
	if deps.Egress == nil {
		deps.Egress = &net.Dialer{}
	}
	if deps.After == nil {
		deps.After = time.After
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	c := &Checker{cfg: cfg, deps: deps, clients: map[Path]*http.Client{}}
	for _, t := range cfg.Targets {
		if t.Kind == KindProxyPath {
			if c.proxy == nil {
				t := t
				c.proxy = &t
			}
			continue
		}
		c.tunnel = append(c.tunnel, t)
	}
	if deps.Proxy == nil {
		c.proxy = nil
	}
	c.clients[PathTunnel] = newClient(deps.Tunnel)
	c.tunnelTLS = c.clients[PathTunnel].Transport.(*http.Transport).TLSClientConfig
	if deps.Proxy != nil {
		c.clients[PathProxy] = newClient(deps.Proxy)
	}
	return c
}

// probeSessionCache is how many servers' TLS sessions a client keeps: the
// probes ask a handful of hosts.
const probeSessionCache = 16

// probeTLS is the probes' TLS configuration (see newClient). The 503
// probe's own https round (statusGET) uses its client's, so the two share
// one session cache.
func probeTLS() *tls.Config {
	return &tls.Config{
		ClientSessionCache: tls.NewLRUClientSessionCache(probeSessionCache),
		CurvePreferences:   []tls.CurveID{tls.X25519, tls.CurveP256},
		MinVersion:         tls.VersionTLS12,
	}
}

// newClient is an HTTP client bound to one path: no environment proxy, no
// connection reuse (a pooled connection through a node we just left would
// prove nothing). Every probe opens its own connection through the node in
// use and handshakes with the real server, but the handshake is a cheap
// one: the session is resumed (no certificate chain to send and verify
// after the first), and the key exchange is X25519 alone. Go's default adds
// ML-KEM-768, post-quantum protection for what is sent, and a probe sends
// nothing secret. The 503 probe asks its https:// URL (the shipped
// default) every 2 s; BenchmarkProbeTLSHandshake measures the round's
// client CPU (bench/README.md).
func newClient(d Dialer) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         d.DialContext,
			DisableKeepAlives:   true,
			TLSHandshakeTimeout: DefaultProbeTimeout,
			TLSClientConfig:     probeTLS(),
			ForceAttemptHTTP2:   false,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Local runs layer 1 only; the connect sequence polls it quickly while the
// vendor brings the tunnel up.
func (c *Checker) Local(ctx context.Context) Result {
	start := c.deps.Now()
	r := Result{At: start, Local: c.local(ctx)}
	if r.Local.OK() {
		r.Outcome, r.Reason = OK, "local plumbing up"
	} else {
		r.Outcome, r.Reason = LocalFail, localReason(r.Local)
	}
	r.DurationMS = c.deps.Now().Sub(start).Milliseconds()
	return r
}

func (c *Checker) local(ctx context.Context) Local {
	var l Local
	check := func(ok *bool, what string, f func() (bool, error)) {
		v, err := f()
		*ok = v && err == nil
		if err != nil {
			l.Errors = append(l.Errors, fmt.Sprintf("%s: %v", what, err))
		}
	}
	l.ProxyAlive, l.VendorTable, l.FwmarkRule = true, true, true
	if c.deps.Procs != nil {
		check(&l.ProxyAlive, "proxy process", func() (bool, error) { return c.deps.Procs.Alive(c.cfg.ProxyName) })
	}
	if c.deps.Listen != nil && l.ProxyAlive {
		var up bool
		check(&up, "proxy port", func() (bool, error) { return c.deps.Listen.ProxyListening(ctx) })
		l.ProxyNotListening = !up
	}
	if c.deps.Table != nil {
		check(&l.VendorTable, "vendor table", func() (bool, error) { return c.deps.Table.VendorTableExists(ctx) })
	}
	if c.deps.Rule != nil {
		check(&l.FwmarkRule, "fwmark rule", func() (bool, error) { return c.deps.Rule.FwmarkRuleExists(ctx) })
	}
	return l
}

func localReason(l Local) string {
	var missing []string
	if !l.ProxyAlive {
		missing = append(missing, "proxy process not running")
	}
	if l.ProxyAlive && l.ProxyNotListening {
		missing = append(missing, "proxy not listening on its port (yet; vendor.proxy_port)")
	}
	if !l.VendorTable {
		missing = append(missing, "vendor table missing")
	}
	if !l.FwmarkRule {
		missing = append(missing, "fwmark rule missing")
	}
	return strings.Join(missing, ", ")
}

// Check runs both layers and evaluates them (see the package doc).
func (c *Checker) Check(ctx context.Context) Result {
	start := c.deps.Now()
	r := Result{At: start, Local: c.local(ctx)}
	defer func() { r.DurationMS = c.deps.Now().Sub(start).Milliseconds() }()
	if !r.Local.OK() {
		r.Outcome, r.Reason = LocalFail, localReason(r.Local)
		return r
	}

	var wg sync.WaitGroup
	var proxy ProbeResult
	if c.proxy != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			proxy = c.probe(ctx, PathProxy, *c.proxy)
		}()
	}
	tunnel := c.tunnelGroup(ctx, c.tunnel)
	wg.Wait()
	judged, exitCheck := c.exitJudged()
	r.Tunnel = tunnel.results
	r.TunnelUp = tunnel.up
	r.ExitIP, r.ExitCountry = tunnel.exitIP, tunnel.country

	proxyOK := tunnel.up
	if c.proxy != nil {
		r.Proxy = &proxy
		proxyOK = proxy.OK
	}
	if ctx.Err() != nil {
		r.Outcome, r.Reason = ProxyBroken, "check cancelled"
		return r
	}
	if !proxyOK {
		var egressOK bool
		r.Egress, egressOK = c.egress(ctx)
		switch {
		case tunnel.up:
			r.Outcome, r.Reason = ProxyBroken, "probe 7 (LAN/proxy path) failed while the tunnel answers"
		case egressOK || len(c.cfg.EgressTargets) == 0:
			r.Outcome, r.Reason = ProxyBroken, "no probe through the tunnel answered; the WAN itself works"
		default:
			r.Outcome, r.Reason, r.WANDown = LocalFail, "WAN egress down: no probe and no egress target answered", true
		}
		return r
	}
	if !tunnel.up {
		r.Outcome, r.Reason = TunnelOK, "probe 7 answers; every tunnel probe failed"
		if c.listedOnly() {
			r.Reason = "probe 7 answers; every probe on the vendor's list (probe.listed) failed"
		}
		return r
	}
	r.ExitCheck = exitCheck
	if !judged {
		r.Outcome, r.Reason = OK, "tunnel and LAN path answer; exit not judged in this mode"
		return r
	}
	if !c.domestic(r.ExitIP, r.ExitCountry) {
		r.Outcome, r.Reason = OK, "tunnel and LAN path answer"
		return r
	}
	// A single domestic answer can be a geo-database hiccup or a probe that
	// raced a reconnect: confirm before calling it a leak.
	select {
	case <-ctx.Done():
		r.Outcome, r.Reason = ProxyBroken, "check cancelled"
		return r
	case <-c.deps.After(c.cfg.ConfirmDelay):
	}
	r.Confirmed = true
	var exitCapable []Target
	for _, t := range c.tunnel {
		if (t.Kind == KindCDNTrace || t.Kind == KindIPEcho) && c.proves(t) {
			exitCapable = append(exitCapable, t)
		}
	}
	again := c.tunnelGroup(ctx, exitCapable)
	r.Tunnel = append(r.Tunnel, again.results...)
	if again.exitIP != "" || again.country != "" {
		r.ExitIP, r.ExitCountry = again.exitIP, again.country
	}
	if again.up && c.domestic(again.exitIP, again.country) {
		r.Outcome, r.Reason = DomesticExit, fmt.Sprintf("exit %s (%s) is domestic, confirmed after %s", r.ExitIP, r.ExitCountry, c.cfg.ConfirmDelay)
		return r
	}
	r.Outcome, r.Reason = OK, "domestic exit not confirmed"
	return r
}

func (c *Checker) domestic(ip, country string) bool {
	if country != "" && strings.EqualFold(country, c.cfg.DomesticCountry) {
		return true
	}
	if c.deps.ISPAddr == nil || ip == "" {
		return false
	}
	isp := c.deps.ISPAddr()
	a, err := netip.ParseAddr(ip)
	return err == nil && isp.IsValid() && a.Unmap() == isp.Unmap()
}

// listedOnly reports whether only listed probes prove the tunnel: rule mode
// with at least one tunnel probe marked listed.
func (c *Checker) listedOnly() bool {
	if c.cfg.Judging != JudgeListed {
		return false
	}
	for _, t := range c.tunnel {
		if t.Listed {
			return true
		}
	}
	return false
}

// proves reports whether t's answer counts as the tunnel's (and its exit as
// the tunnel's exit) in this mode.
func (c *Checker) proves(t Target) bool { return t.Listed || !c.listedOnly() }

// exitJudged reports whether a domestic exit is a fault in this mode, and
// the sentence for Result.ExitCheck.
func (c *Checker) exitJudged() (bool, string) {
	switch {
	case c.cfg.Judging == JudgeNone:
		return false, "not judged: mode direct sends everything direct by choice"
	case c.cfg.Judging == JudgeListed && !c.listedOnly():
		return false, "not judged: in mode rule the vendor sends sites off its list direct, and no probe is marked as on it (probe.listed)"
	case c.cfg.Judging == JudgeListed:
		var names []string
		for _, t := range c.tunnel {
			if t.Listed && (t.Kind == KindCDNTrace || t.Kind == KindIPEcho) {
				names = append(names, t.Name)
			}
		}
		if len(names) == 0 {
			return false, "not judged: in mode rule no probe on the vendor's list (probe.listed) names its exit (cdn-trace or ip-echo)"
		}
		return true, "judged on the probes on the vendor's list: " + strings.Join(names, ", ")
	}
	return true, "judged on every probe"
}

// groupResult is the outcome of the parallel tunnel probes.
type groupResult struct {
	results         []ProbeResult
	up              bool
	exitIP, country string
}

// tunnelGroup runs targets in parallel through the tunnel. The first success
// proves the tunnel; the first success naming an exit gives the exit. Once
// both are known (or the exit cannot be known any more), the rest are
// cancelled and reported as skipped.
func (c *Checker) tunnelGroup(ctx context.Context, targets []Target) groupResult {
	var g groupResult
	if len(targets) == 0 {
		return g
	}
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type indexed struct {
		i int
		r ProbeResult
	}
	ch := make(chan indexed, len(targets))
	pendingExit := 0
	for i, t := range targets {
		if (t.Kind == KindCDNTrace || t.Kind == KindIPEcho) && c.proves(t) {
			pendingExit++
		}
		go func() { ch <- indexed{i, c.probe(gctx, PathTunnel, t)} }()
	}
	g.results = make([]ProbeResult, len(targets))
	done := false
	for range targets {
		in := <-ch
		r := in.r
		if done && !r.OK {
			r.Skipped, r.Error = true, "skipped: check already decided"
		}
		g.results[in.i] = r
		proves := c.proves(targets[in.i])
		if (r.Kind == KindCDNTrace || r.Kind == KindIPEcho) && proves {
			pendingExit--
		}
		// A probe off the vendor's list (rule mode) is shown, but its
		// answer is not the tunnel's: it may have gone direct.
		if r.OK && proves {
			g.up = true
			if g.country == "" && g.exitIP == "" && (r.Country != "" || r.ExitIP != "") {
				g.exitIP, g.country = r.ExitIP, r.Country
			}
		}
		if !done && g.up && (g.country != "" || g.exitIP != "" || pendingExit == 0) {
			done = true
			cancel()
		}
	}
	return g
}

// egress tries each egress target up to EgressRetries times straight out of
// the WAN; one successful TCP connect is enough.
func (c *Checker) egress(ctx context.Context) ([]ProbeResult, bool) {
	var out []ProbeResult
	for _, addr := range c.cfg.EgressTargets {
		for attempt := 1; attempt <= c.cfg.EgressRetries; attempt++ {
			r := c.dialProbe(ctx, addr, attempt)
			out = append(out, r)
			if r.OK {
				return out, true
			}
			if ctx.Err() != nil {
				return out, false
			}
		}
	}
	return out, false
}

func (c *Checker) dialProbe(ctx context.Context, addr string, attempt int) ProbeResult {
	r := ProbeResult{Name: fmt.Sprintf("egress %s #%d", addr, attempt), Kind: "tcp", Path: PathEgress, Target: addr}
	dctx, cancel := context.WithTimeout(ctx, c.cfg.EgressTimeout)
	defer cancel()
	start := c.deps.Now()
	conn, err := c.deps.Egress.DialContext(dctx, "tcp", addr)
	r.LatencyMS = c.deps.Now().Sub(start).Milliseconds()
	if err != nil {
		r.Error = err.Error()
		return r
	}
	conn.Close()
	r.OK = true
	return r
}
