package health

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// world is a set of probe servers on 127.0.0.1 and one dialer per path that
// maps the probe's host name to a server, the way the tunnel or the proxy
// would carry it. Faults are injected per path and per host.
type world struct {
	t       *testing.T
	mu      sync.Mutex
	country string // what trace/echo report as the exit country
	ip      string // exit IP they report
	srv     *httptest.Server
	hang    map[string]bool // host -> handler blocks until the client gives up
	direct  map[string]bool // host -> reached directly: it sees the ISP address (rule mode, E3)
	down    map[string]bool // host -> answers 503
	dials   map[Path]*atomic.Int32
}

func newWorld(t *testing.T) *world {
	w := &world{t: t, country: "US", ip: "198.18.20.1", hang: map[string]bool{}, direct: map[string]bool{}, down: map[string]bool{},
		dials: map[Path]*atomic.Int32{PathTunnel: {}, PathProxy: {}, PathEgress: {}}}
	w.srv = httptest.NewServer(http.HandlerFunc(w.serve))
	t.Cleanup(w.srv.Close)
	return w
}

func (w *world) set(country, ip string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.country, w.ip = country, ip
}

func (w *world) serve(rw http.ResponseWriter, r *http.Request) {
	w.mu.Lock()
	country, ip, hang := w.country, w.ip, w.hang[r.Host]
	if w.direct[r.Host] {
		country, ip = "CN", "198.18.2.2"
	}
	down := w.down[r.Host]
	w.mu.Unlock()
	if hang {
		<-r.Context().Done()
		return
	}
	if down {
		rw.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	switch {
	case strings.HasPrefix(r.Host, "search"), strings.HasPrefix(r.Host, "lanprobe"):
		rw.WriteHeader(http.StatusNoContent)
	case strings.HasPrefix(r.Host, "trace"):
		fmt.Fprintf(rw, "fl=1\nh=%s\nip=%s\nts=1\nloc=%s\nwarp=off\n", r.Host, ip, country)
	case strings.HasPrefix(r.Host, "echo"):
		fmt.Fprintf(rw, `{"ip":%q,"country":%q}`, ip, country)
	default:
		http.NotFound(rw, r)
	}
}

// pathDialer carries every connection to the world's server unless the path
// is broken (for all hosts, or for one).
type pathDialer struct {
	w      *world
	path   Path
	broken atomic.Bool
}

func (d *pathDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d.w.dials[d.path].Add(1)
	if d.broken.Load() {
		return nil, fmt.Errorf("dial %s via %s: connection refused", addr, d.path)
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, d.w.srv.Listener.Addr().String())
}

var targets = []Target{
	{Name: "search", URL: "http://search.lab/generate_204", Kind: KindSearch},
	{Name: "trace1", URL: "http://trace1.lab/cdn-cgi/trace", Kind: KindCDNTrace},
	{Name: "trace2", URL: "http://trace2.lab/cdn-cgi/trace", Kind: KindCDNTrace},
	{Name: "echo1", URL: "http://echo1.lab/json", Kind: KindIPEcho},
	{Name: "echo2", URL: "http://echo2.lab/json", Kind: KindIPEcho},
	{Name: "echo3", URL: "http://echo3.lab/", Kind: KindIPEcho},
	{Name: "probe7", URL: "http://lanprobe.lab/generate_204", Kind: KindProxyPath},
}

type fakeLocal struct{ proxy, table, rule bool }

func (f fakeLocal) Alive(name string) (bool, error) {
	if name != DefaultProxyName {
		return false, fmt.Errorf("asked for %q", name)
	}
	return f.proxy, nil
}
func (f fakeLocal) VendorTableExists(context.Context) (bool, error) { return f.table, nil }
func (f fakeLocal) FwmarkRuleExists(context.Context) (bool, error)  { return f.rule, nil }

type fixture struct {
	w                     *world
	tunnel, proxy, egress *pathDialer
	local                 *fakeLocal
	waited                []time.Duration
	c                     *Checker
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{w: newWorld(t), local: &fakeLocal{true, true, true}}
	f.tunnel = &pathDialer{w: f.w, path: PathTunnel}
	f.proxy = &pathDialer{w: f.w, path: PathProxy}
	f.egress = &pathDialer{w: f.w, path: PathEgress}
	f.build(Config{Targets: targets, EgressTargets: []string{"198.19.0.53:53", "198.19.0.54:53", "198.19.0.55:53"},
		ProbeTimeout: 2 * time.Second})
	return f
}

func (f *fixture) build(cfg Config) {
	f.c = NewChecker(cfg, Deps{
		Tunnel: f.tunnel, Proxy: f.proxy, Egress: f.egress,
		Procs: f.local, Table: f.local, Rule: f.local,
		ISPAddr: func() netip.Addr { return netip.MustParseAddr("198.18.2.2") },
		// The confirmation delay is recorded, not slept.
		After: func(d time.Duration) <-chan time.Time {
			f.waited = append(f.waited, d)
			ch := make(chan time.Time, 1)
			ch <- time.Time{}
			return ch
		},
	})
}

func TestHealthyTunnel(t *testing.T) {
	f := newFixture(t)
	r := f.c.Check(context.Background())
	if r.Outcome != OK || !r.Outcome.Healthy() {
		t.Fatalf("outcome %s (%s), want OK", r.Outcome, r.Reason)
	}
	if r.ExitCountry != "US" || r.ExitIP != "198.18.20.1" {
		t.Errorf("exit = %s/%s", r.ExitIP, r.ExitCountry)
	}
	if r.Proxy == nil || !r.Proxy.OK || r.Proxy.Path != PathProxy {
		t.Errorf("probe 7 = %+v", r.Proxy)
	}
	if len(r.Tunnel) != 6 || len(r.Egress) != 0 {
		t.Errorf("%d tunnel probes, %d egress; want 6 and none", len(r.Tunnel), len(r.Egress))
	}
	for _, p := range r.Tunnel {
		if p.Path != PathTunnel {
			t.Errorf("probe %s took path %s", p.Name, p.Path)
		}
	}
	if got := f.proxy.w.dials[PathProxy].Load(); got != 1 {
		t.Errorf("proxy path dialled %d times, want exactly probe 7", got)
	}
}

func TestLocalFailSkipsNetwork(t *testing.T) {
	for _, tc := range []struct {
		local fakeLocal
		want  string
	}{
		{fakeLocal{false, true, true}, "proxy process not running"},
		{fakeLocal{true, false, true}, "vendor table missing"},
		{fakeLocal{true, true, false}, "fwmark rule missing"},
	} {
		f := newFixture(t)
		*f.local = tc.local
		r := f.c.Check(context.Background())
		if r.Outcome != LocalFail || r.Reason != tc.want {
			t.Errorf("outcome %s (%s), want LOCAL_FAIL (%s)", r.Outcome, r.Reason, tc.want)
		}
		if n := f.w.dials[PathTunnel].Load() + f.w.dials[PathProxy].Load(); n != 0 {
			t.Errorf("%d probes sent although local checks failed", n)
		}
		if l := f.c.Local(context.Background()); l.Outcome != LocalFail {
			t.Errorf("Local() = %s", l.Outcome)
		}
	}
}

func TestFirstSuccessWins(t *testing.T) {
	f := newFixture(t)
	for _, h := range []string{"search.lab", "trace1.lab", "trace2.lab", "echo2.lab", "echo3.lab"} {
		f.w.hang[h] = true
	}
	start := time.Now()
	r := f.c.Check(context.Background())
	if r.Outcome != OK || r.ExitCountry != "US" {
		t.Fatalf("outcome %s (%s), exit %s", r.Outcome, r.Reason, r.ExitCountry)
	}
	if el := time.Since(start); el > time.Second {
		t.Errorf("check took %v: it waited for hanging probes after echo1 answered", el)
	}
	skipped := 0
	for _, p := range r.Tunnel {
		if p.Skipped {
			skipped++
		}
	}
	if skipped != 5 {
		t.Errorf("%d probes reported skipped, want 5: %+v", skipped, r.Tunnel)
	}
}

func TestProbe7SeesLANPathFault(t *testing.T) {
	f := newFixture(t)
	f.proxy.broken.Store(true) // only the LAN/proxy path is broken
	r := f.c.Check(context.Background())
	if r.Outcome != ProxyBroken || !r.TunnelUp {
		t.Fatalf("outcome %s (%s) tunnel_up=%v, want PROXY_BROKEN with the tunnel up", r.Outcome, r.Reason, r.TunnelUp)
	}
	if r.Proxy.OK || !strings.Contains(r.Proxy.Error, "via proxy") {
		t.Errorf("probe 7 = %+v", r.Proxy)
	}
	if len(r.Egress) == 0 {
		t.Error("egress check did not run after probe 7 failed")
	}
}

func TestTunnelProbesFailButLANServed(t *testing.T) {
	f := newFixture(t)
	f.tunnel.broken.Store(true)
	r := f.c.Check(context.Background())
	if r.Outcome != TunnelOK || !r.Outcome.Healthy() {
		t.Fatalf("outcome %s (%s), want TUNNEL_OK", r.Outcome, r.Reason)
	}
}

func TestEverythingDownEgressDecides(t *testing.T) {
	f := newFixture(t)
	f.tunnel.broken.Store(true)
	f.proxy.broken.Store(true)
	r := f.c.Check(context.Background())
	if r.Outcome != ProxyBroken || r.WANDown {
		t.Errorf("WAN up: outcome %s (%s) wan_down=%v, want PROXY_BROKEN", r.Outcome, r.Reason, r.WANDown)
	}
	if len(r.Egress) != 1 {
		t.Errorf("egress stopped after %d attempts, want 1 (first success)", len(r.Egress))
	}

	f.egress.broken.Store(true)
	f.w.dials[PathEgress].Store(0)
	r = f.c.Check(context.Background())
	if r.Outcome != LocalFail || !r.WANDown {
		t.Errorf("WAN down: outcome %s (%s) wan_down=%v, want LOCAL_FAIL+wan_down", r.Outcome, r.Reason, r.WANDown)
	}
	if got := f.w.dials[PathEgress].Load(); got != 6 {
		t.Errorf("egress dialled %d times, want 3 targets x 2 retries = 6", got)
	}
}

func TestDomesticExitConfirmed(t *testing.T) {
	f := newFixture(t)
	f.w.set("CN", "198.19.7.7")
	r := f.c.Check(context.Background())
	if r.Outcome != DomesticExit || !r.Confirmed {
		t.Fatalf("outcome %s (%s), want confirmed DOMESTIC_EXIT", r.Outcome, r.Reason)
	}
	if len(f.waited) != 1 || f.waited[0] != DefaultConfirmDelay {
		t.Errorf("confirmation waited %v, want one 3s wait", f.waited)
	}
}

func TestDomesticExitNotConfirmed(t *testing.T) {
	f := newFixture(t)
	f.w.set("CN", "198.19.7.7")
	f.c.deps.After = func(time.Duration) <-chan time.Time {
		f.w.set("US", "198.18.20.2") // the blip is gone when we look again
		ch := make(chan time.Time, 1)
		ch <- time.Time{}
		return ch
	}
	r := f.c.Check(context.Background())
	if r.Outcome != OK || r.ExitCountry != "US" || r.ExitIP != "198.18.20.2" {
		t.Errorf("outcome %s (%s) exit %s/%s, want OK via the new US exit", r.Outcome, r.Reason, r.ExitIP, r.ExitCountry)
	}
}

func TestExitIsOurISPAddress(t *testing.T) {
	f := newFixture(t)
	f.w.set("US", "198.18.2.2") // a geo database may claim anything
	if r := f.c.Check(context.Background()); r.Outcome != DomesticExit {
		t.Errorf("outcome %s (%s), want DOMESTIC_EXIT for our own ISP address", r.Outcome, r.Reason)
	}
}

func TestLaptopWithoutProbe7(t *testing.T) {
	f := newFixture(t)
	f.c = NewChecker(Config{Targets: targets, EgressTargets: []string{"x:1"}}, Deps{Tunnel: f.tunnel, Egress: f.egress})
	if r := f.c.Check(context.Background()); r.Outcome != OK || r.Proxy != nil {
		t.Errorf("outcome %s proxy %+v, want OK and no probe 7", r.Outcome, r.Proxy)
	}
	f.tunnel.broken.Store(true)
	if r := f.c.Check(context.Background()); r.Outcome != ProxyBroken {
		t.Errorf("outcome %s (%s), want PROXY_BROKEN", r.Outcome, r.Reason)
	}
}

func TestHTTPErrorStatusFails(t *testing.T) {
	f := newFixture(t)
	f.build(Config{Targets: []Target{{Name: "bad", URL: "http://nothing.lab/", Kind: KindSearch}}})
	f.c.deps.Proxy = nil
	f.c.proxy = nil
	r := f.c.Check(context.Background())
	if r.TunnelUp || r.Tunnel[0].Status != 404 || !strings.Contains(r.Tunnel[0].Error, "404") {
		t.Errorf("404 counted as success: %+v", r.Tunnel[0])
	}
}

func TestParsers(t *testing.T) {
	ip, cc := ParseTrace([]byte("fl=12\nip=2001:db8::1\nloc=us\n"))
	if ip != "2001:db8::1" || cc != "US" {
		t.Errorf("trace = %s %s", ip, cc)
	}
	for body, want := range map[string]string{
		`{"ip":"198.18.20.3","country":"US"}`:            "198.18.20.3/US",
		`{"ip":"198.18.20.3","country_iso":"us"}`:        "198.18.20.3/US",
		`{"query":"198.18.20.3","countryCode":"DE"}`:     "198.18.20.3/DE",
		`{"ip":"198.18.20.3","country":"United States"}`: "198.18.20.3/",
		"198.18.20.4\n": "198.18.20.4/",
		"<html>":        "/",
	} {
		ip, cc := ParseEcho([]byte(body))
		if got := ip + "/" + cc; got != want {
			t.Errorf("ParseEcho(%q) = %s, want %s", body, got, want)
		}
	}
}

func TestCancelledCheckIsNotHealthy(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if r := f.c.Check(ctx); r.Outcome.Healthy() {
		t.Errorf("cancelled check reported %s", r.Outcome)
	}
}

var _ = errors.New

// A confirming check (WithProbeTimeout) on a black-holed path gives its
// verdict after the short timeout, not the configured one; a longer value
// never makes a check more patient than the configured timeout.
func TestConfirmingCheckUsesShortTimeout(t *testing.T) {
	hangAll := func(f *fixture) {
		for _, tg := range targets {
			host := strings.TrimPrefix(tg.URL, "http://")
			f.w.hang[host[:strings.IndexByte(host, '/')]] = true
		}
	}
	f := newFixture(t)
	f.build(Config{Targets: targets, EgressTargets: []string{"198.19.0.53:53"}, ProbeTimeout: 5 * time.Second})
	hangAll(f)
	start := time.Now()
	r := f.c.Check(WithProbeTimeout(context.Background(), 150*time.Millisecond))
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("confirming check took %v; want about 150ms, not the 5s probe timeout", el)
	}
	if r.Outcome != ProxyBroken || r.TunnelUp {
		t.Errorf("outcome %s (%s) tunnel_up=%v, want PROXY_BROKEN with every probe failed", r.Outcome, r.Reason, r.TunnelUp)
	}

	f.build(Config{Targets: targets, EgressTargets: []string{"198.19.0.53:53"}, ProbeTimeout: 150 * time.Millisecond})
	start = time.Now()
	r = f.c.Check(WithProbeTimeout(context.Background(), time.Minute))
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("a longer confirming timeout was honoured: check took %v, configured timeout 150ms", el)
	}
	if r.Outcome != ProxyBroken {
		t.Errorf("outcome %s, want PROXY_BROKEN", r.Outcome)
	}
}

// A check whose bound tightens while its probes hang (the watchdog's check
// in flight becoming a confirming one) ends its probes at the new
// deadline, counted from before the tightening, and still runs the egress
// test: the verdict says the WAN works, so the engine can blame the node.
// A bound set later than one already set changes nothing.
func TestProbeBoundTightensRunningProbes(t *testing.T) {
	f := newFixture(t)
	f.build(Config{Targets: targets, EgressTargets: []string{"198.19.0.53:53"}, ProbeTimeout: 5 * time.Second})
	for _, tg := range targets {
		host := strings.TrimPrefix(tg.URL, "http://")
		f.w.hang[host[:strings.IndexByte(host, '/')]] = true
	}
	ctx, b := WithProbeBound(context.Background())
	start := time.Now()
	go func() {
		time.Sleep(200 * time.Millisecond)
		b.Tighten(start.Add(400 * time.Millisecond))
		b.Tighten(start.Add(time.Minute)) // looser: ignored
	}()
	r := f.c.Check(ctx)
	el := time.Since(start)
	if el < 400*time.Millisecond || el > 2*time.Second {
		t.Errorf("check took %v; want its probes to end at the tightened bound (400ms after the start), not the 5s probe timeout", el)
	}
	if r.Outcome != ProxyBroken || r.TunnelUp || !strings.Contains(r.Reason, "WAN itself works") {
		t.Errorf("outcome %s (%s) tunnel_up=%v, want PROXY_BROKEN with the egress test run", r.Outcome, r.Reason, r.TunnelUp)
	}
	for _, p := range r.Tunnel {
		if p.OK || p.Error != errProbeBound.Error() {
			t.Errorf("probe %s: ok=%v error %q, want %q", p.Name, p.OK, p.Error, errProbeBound)
		}
	}
	if d, ok, _ := b.Watch(); !ok || !d.Equal(start.Add(400*time.Millisecond)) {
		t.Errorf("bound deadline %v (set %v), want the tighter one", d, ok)
	}

	// A bound already past when the probes start ends them at once.
	ctx, b = WithProbeBound(context.Background())
	b.Tighten(time.Now().Add(-time.Second))
	start = time.Now()
	if r := f.c.Check(ctx); r.Outcome != ProxyBroken {
		t.Errorf("outcome %s, want PROXY_BROKEN", r.Outcome)
	}
	if el := time.Since(start); el > time.Second {
		t.Errorf("check under a past bound took %v", el)
	}
}
