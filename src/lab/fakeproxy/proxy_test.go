package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"surflare-watchdog/src/lab"
	"surflare-watchdog/src/lab/fakes"
	"surflare-watchdog/src/lab/internet"
)

type rig struct {
	labDir string
	world  internet.Config
	p      *proxy
	addr   string // proxy listener
	dst    atomic.Value
}

// newRig starts a loopback internet and a fake proxy in front of it, with no
// tproxy and no marks: the "original destination" is set by the test.
func newRig(t *testing.T, node, transit string) *rig {
	t.Helper()
	r := &rig{labDir: t.TempDir()}
	base := netip.AddrFrom4([4]byte{127, byte(1 + rand.IntN(250)), byte(1 + rand.IntN(250)), 0})
	var tick atomic.Int64
	clock := func() time.Time { return time.Unix(tick.Add(1), 0) } // every read re-checks faults
	r.world = internet.LoopbackConfig(base, fakes.NewWatcher(r.labDir, clock))
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := internet.Start(ctx, r.world)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	logf, err := openLog(filepath.Join(r.labDir, "log", "surflare-proxy.log"), time.Now)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	r.p = &proxy{
		relays: r.world.Relays, relayPort: r.world.RelayPort,
		node: node, transit: transit,
		faults:           fakes.NewWatcher(r.labDir, clock),
		log:              logf,
		origDst:          func(net.Conn) netip.AddrPort { return r.dst.Load().(netip.AddrPort) },
		handshakeTimeout: 3 * time.Second,
		relayTimeout:     time.Second,
		urltestURL:       fmt.Sprintf("http://%s/generate_204", netip.AddrPortFrom(r.world.Search[0], r.world.HTTPPort)),
		urltestEvery:     time.Hour,
		urltestTimeout:   400 * time.Millisecond,
	}
	for _, n := range lab.Nodes {
		r.p.nodes = append(r.p.nodes, n.Name)
	}
	r.p.exits = map[string]netip.AddrPort{}
	for _, n := range r.world.Nodes {
		r.p.exits[n.Name] = netip.AddrPortFrom(n.Addr, r.world.ExitPort)
	}
	r.dst.Store(netip.AddrPortFrom(r.world.IPEcho[0], r.world.HTTPPort))
	ln, err := r.p.listen(ctx, "127.0.0.1:0")
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	done := make(chan struct{})
	go func() { r.p.serve(ctx, ln); close(done) }()
	t.Cleanup(func() { cancel(); <-done; srv.Wait() })
	return r
}

func (r *rig) faults(t *testing.T, change func(*fakes.Faults)) {
	t.Helper()
	if _, err := fakes.Update(r.labDir, time.Now(), change); err != nil {
		t.Fatal(err)
	}
}

// echo asks the IP-echo host, through the proxy, who is calling.
func (r *rig) echo(t *testing.T) (internet.EchoReply, error) {
	t.Helper()
	return r.echoHost(t, "echo")
}

// echoHost asks the IP echo through the proxy with HTTP Host host.
func (r *rig) echoHost(t *testing.T, host string) (internet.EchoReply, error) {
	t.Helper()
	c, err := net.Dial("tcp", r.addr)
	if err != nil {
		return internet.EchoReply{}, err // a reset can beat connect's return
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", host)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return internet.EchoReply{}, err
	}
	defer resp.Body.Close()
	var e internet.EchoReply
	err = json.NewDecoder(resp.Body).Decode(&e)
	return e, err
}

func (r *rig) exitAddr(name string) string {
	for _, n := range r.world.Nodes {
		if n.Name == name {
			return n.Addr.String()
		}
	}
	panic(name)
}

func (r *rig) logText(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(r.p.log.path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestProxyTunnelsThroughChosenNode(t *testing.T) {
	r := newRig(t, "Los Angeles", "Singapore")
	e, err := r.echo(t)
	if err != nil || e.IP != r.exitAddr("Los Angeles") || e.Country != "US" {
		t.Fatalf("echo through proxy = %+v, %v; want the Los Angeles exit %s", e, err, r.exitAddr("Los Angeles"))
	}
}

func TestProxyAutoTransitSkipsDeadRelay(t *testing.T) {
	r := newRig(t, "Dallas", fakes.TransitAuto)
	r.faults(t, func(f *fakes.Faults) { f.NodeDown = []string{"Tokyo"} })
	e, err := r.echo(t)
	if err != nil || e.IP != r.exitAddr("Dallas") {
		t.Fatalf("auto with Tokyo down: %+v, %v", e, err)
	}
}

func TestProxyDomesticExitBypassesTunnel(t *testing.T) {
	r := newRig(t, "Dallas", fakes.TransitAuto)
	r.faults(t, func(f *fakes.Faults) { f.DomesticExit = true })
	e, err := r.echo(t)
	if err != nil {
		t.Fatal(err)
	}
	if e.IP == r.exitAddr("Dallas") || e.Country == "US" {
		t.Fatalf("domestic exit still went through the tunnel: %+v", e)
	}
}

// A failed connection is logged at ERROR in stock sing-box's words, in
// the version the log_format knob names (DESIGN §9), or not at all.
func TestProxyDeadNodeResetsClientAndLogs(t *testing.T) {
	for _, c := range []struct {
		format string
		want   *regexp.Regexp
	}{
		{fakes.LogSingBox112, regexp.MustCompile(`ERROR \[\d+ \d+\.\ds\] connection: open connection to 127\.[0-9.]+:\d+ using outbound/vless\[Dallas via Tokyo\]: .*connection reset by peer`)},
		{fakes.LogSingBox18, regexp.MustCompile(`ERROR \[\d+ \d+\.\ds\] inbound/tproxy\[tproxy-in\]: process connection from 127\.0\.0\.1:\d+: .*connection reset by peer`)},
		{fakes.LogNone, nil},
	} {
		t.Run(c.format, func(t *testing.T) {
			r := newRig(t, "Dallas", "Tokyo")
			r.p.vendor.LogFormat = c.format
			r.faults(t, func(f *fakes.Faults) { f.NodeDown = []string{"Dallas"} })
			if e, err := r.echo(t); err == nil {
				t.Fatalf("dead node answered: %+v", e)
			}
			log := r.logText(t)
			if c.want == nil {
				if strings.Contains(log, "ERROR") {
					t.Fatalf("log_format=none logged:\n%s", log)
				}
				return
			}
			if !c.want.MatchString(log) {
				t.Fatalf("no %s connection error logged:\n%s", c.format, log)
			}
		})
	}
}

func TestDialErrorWordsTimeoutsLikeSingBox(t *testing.T) {
	dst := netip.MustParseAddrPort("198.18.30.1:443")
	if got := dialError(dst, context.DeadlineExceeded); got != "dial tcp 198.18.30.1:443: i/o timeout" {
		t.Errorf("timeout worded %q", got)
	}
}

// E4: without a transit the proxy goes straight to the exit; E1: node
// auto takes the first exit that answers.
func TestProxySingleHopAndAuto(t *testing.T) {
	r := newRig(t, "Chicago", fakes.TransitNone)
	if e, err := r.echo(t); err != nil || e.IP != r.exitAddr("Chicago") {
		t.Fatalf("single hop: %+v %v", e, err)
	}
	// Every relay down: a single hop does not care.
	r.faults(t, func(f *fakes.Faults) { f.NodeDown = []string{"Tokyo", "Singapore"} })
	if e, err := r.echo(t); err != nil || e.IP != r.exitAddr("Chicago") {
		t.Fatalf("single hop with the relays down: %+v %v", e, err)
	}
	a := newRig(t, fakes.NodeAuto, fakes.TransitAuto)
	a.faults(t, func(f *fakes.Faults) { f.NodeDown = []string{"Dallas"} })
	if e, err := a.echo(t); err != nil || e.IP != a.exitAddr("Los Angeles") {
		t.Fatalf("auto with Dallas down: %+v %v, want Los Angeles", e, err)
	}
}

// E3: rule mode with the vendor's list tunnels only listed hosts; the
// legacy routing tunnels everything but the domestic range.
func TestProxyRuleModeRoutesByTheVendorList(t *testing.T) {
	for _, c := range []struct {
		routing, host string
		tunnel        bool
	}{
		{fakes.RoutingList, "blocked.ipecho.lab", true},
		{fakes.RoutingList, "open.ipecho.lab", false},
		{fakes.RoutingLegacy, "open.ipecho.lab", true},
	} {
		r := newRig(t, "Dallas", fakes.TransitAuto)
		r.p.mode, r.p.vendor.RuleRouting, r.p.vendor.RuleList = "rule", c.routing, fakes.DefaultRuleList
		e, err := r.echoHost(t, c.host)
		if err != nil {
			t.Fatalf("%s %s: %v", c.routing, c.host, err)
		}
		if tunnelled := e.IP == r.exitAddr("Dallas"); tunnelled != c.tunnel {
			t.Errorf("rule_routing=%s, Host %s: echo saw %s, tunnelled=%v, want %v", c.routing, c.host, e.IP, tunnelled, c.tunnel)
		}
	}
}

// urltestLine is the contract's format, with the pair and message captured.
var urltestLine = regexp.MustCompile(`^[+-]\d{4} \d{4}-\d\d-\d\d \d\d:\d\d:\d\d ERROR \[\d+ \d+\.\ds\] outbound/urltest\[(.+) via (.+)\]: (.+)$`)

func TestURLTestLogsOnlyFailuresInSingBoxFormat(t *testing.T) {
	r := newRig(t, "Dallas", fakes.TransitAuto)
	r.faults(t, func(f *fakes.Faults) {
		f.NodeDown = []string{"Dallas"}
		f.Node503 = []string{"Miami"}
		f.LatencyMS = map[string]int{"Chicago": 2000}
	})
	r.p.urltestRound(context.Background())
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(r.logText(t)), "\n") {
		m := urltestLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("line not in the contract's format: %q", line)
		}
		got[m[1]+" via "+m[2]] = m[3]
	}
	t.Log(r.logText(t))
	url := r.p.urltestURL
	for _, tr := range []string{"Tokyo", "Singapore", "auto"} {
		if msg := got["Miami via "+tr]; msg != "unexpected status: 503 Service Unavailable" {
			t.Errorf("Miami via %s: %q", tr, msg)
		}
		if msg := got["Chicago via "+tr]; msg != `Get "`+url+`": context deadline exceeded` {
			t.Errorf("Chicago via %s: %q", tr, msg)
		}
		if msg := got["Dallas via "+tr]; !strings.HasPrefix(msg, `Get "`+url+`": `) {
			t.Errorf("Dallas via %s: %q", tr, msg)
		}
	}
	if len(got) != 9 {
		t.Errorf("want exactly 9 failing pairs (3 nodes x 3 transits), got %d: %v", len(got), got)
	}
}

func TestLogFollowsRotationAndTruncation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "surflare-proxy.log")
	l, err := openLog(path, func() time.Time { return time.Date(2026, 11, 29, 14, 3, 11, 0, time.UTC) })
	if err != nil {
		t.Fatal(err)
	}
	l.Error(1820334452, 2100*time.Millisecond, "outbound/urltest[Dallas via Tokyo]: x")
	b, _ := os.ReadFile(path)
	if want := "+0000 2026-11-29 14:03:11 ERROR [1820334452 2.1s] outbound/urltest[Dallas via Tokyo]: x\n"; string(b) != want {
		t.Fatalf("line = %q, want %q", b, want)
	}
	os.Rename(path, path+".1")
	l.Info("after rotation")
	b, _ = os.ReadFile(path)
	if !strings.HasSuffix(string(b), " INFO after rotation\n") || strings.Contains(string(b), "ERROR") {
		t.Fatalf("after rotation the new file holds %q", b)
	}
	os.Truncate(path, 0)
	l.Info("after truncation")
	b, _ = os.ReadFile(path)
	if string(b) != "+0000 2026-11-29 14:03:11 INFO after truncation\n" {
		t.Fatalf("after truncation: %q", b)
	}
}
