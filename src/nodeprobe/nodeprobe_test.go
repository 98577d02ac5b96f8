package nodeprobe

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"surflare-watchdog/src/detectors/loghealth"
	"surflare-watchdog/src/firewall"
)

// world is a fake tunnel with the lab's latency semantics: the exit sleeps
// its latency before the tunnel is open, and half of it on each chunk each
// way. Connections are net.Pipes, so inside a synctest bubble every timing
// is exact.
type world struct {
	mu       sync.Mutex
	node     string
	latency  map[string]time.Duration
	status   map[string]int // HTTP status a node answers with (default 204)
	down     map[string]bool
	switches []string
	moat     firewall.Moat
}

func (w *world) Switch(ctx context.Context, node string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.switches = append(w.switches, node)
	if node == "Nowhere" {
		return errors.New("unknown node")
	}
	w.node = node
	w.moat.SynOut += 2
	w.moat.SynAckIn += 2
	if node == "Chicago" {
		w.moat.RstIn += 3
	}
	return nil
}

func (w *world) Moat(context.Context) (firewall.Moat, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.moat, nil
}

func (w *world) RelaySockets(context.Context) ([]Socket, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return []Socket{
		{Remote: netip.MustParseAddrPort("198.18.10.1:8443"), SACK: true, RTT: 2 * time.Millisecond},
		{Remote: netip.MustParseAddrPort("198.18.10.2:8443"), SACK: w.node != "Chicago", RTT: 4 * time.Millisecond},
	}, nil
}

func (w *world) current() (string, time.Duration, int, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.status[w.node]
	if st == 0 {
		st = http.StatusNoContent
	}
	return w.node, w.latency[w.node], st, w.down[w.node]
}

// dial opens a fake tunnel to the current node.
func (w *world) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	client, server := net.Pipe()
	go w.serve(server)
	return client, nil
}

func (w *world) serve(c net.Conn) {
	defer c.Close()
	node, lat, status, down := w.current()
	time.Sleep(lat) // the exit answers the CONNECT
	if down {
		return
	}
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		time.Sleep(lat / 2) // request chunk
		body := ""
		st := status
		if req.URL.Path == "/echo" {
			st = http.StatusOK
			body = fmt.Sprintf(`{"ip":"198.18.20.%d","country":"US"}`, len(node))
		}
		time.Sleep(lat / 2) // response chunk
		fmt.Fprintf(c, "HTTP/1.1 %d X\r\nContent-Length: %d\r\n\r\n%s", st, len(body), body)
	}
}

func near(t *testing.T, what string, got *float64, want float64) {
	t.Helper()
	if got == nil {
		t.Errorf("%s not measured", what)
		return
	}
	if math.Abs(*got-want) > 1 {
		t.Errorf("%s = %.1f ms, want %.0f", what, *got, want)
	}
}

func TestRunMeasuresEachNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &world{latency: map[string]time.Duration{"Chicago": 80 * time.Millisecond},
			status: map[string]int{"Miami": 503}, down: map[string]bool{"Atlanta": true}}
		var progress []string
		health := &loghealth.Snapshot{Report: loghealth.Report{GeneratedAt: time.Now(), Nodes: map[string]loghealth.PairHealth{
			"Chicago via Tokyo": {Node: "Chicago", Transit: "Tokyo", ErrorCount: 12},
			"Chicago via auto":  {Node: "Chicago", Transit: "auto", ErrorCount: 1, UrltestHealthy: true},
		}}}
		rep, err := Run(t.Context(), Options{
			Nodes: []string{"Dallas", "Chicago", "Nowhere", "Miami", "Atlanta"}, Transit: "auto",
			TTFBURL: "http://198.18.30.21/generate_204", EchoURL: "http://198.18.30.1/echo",
			ReadyTimeout: time.Second,
			Switcher:     w, Kernel: w, Dial: w.dial,
			Health: func(node string) Urltest { return UrltestFrom(health, nil, node) },
			Progress: func(p Progress) {
				progress = append(progress, fmt.Sprintf("%d/%d %s %s", p.Index, p.Total, p.Node, p.Phase))
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(w.switches, []string{"Dallas", "Chicago", "Nowhere", "Miami", "Atlanta"}) {
			t.Errorf("switches %q", w.switches)
		}
		if len(rep.Nodes) != 5 {
			t.Fatalf("%d results", len(rep.Nodes))
		}
		d, c, nowhere, miami, atlanta := rep.Nodes[0], rep.Nodes[1], rep.Nodes[2], rep.Nodes[3], rep.Nodes[4]
		if !d.OK || !c.OK {
			t.Fatalf("healthy nodes failed: %q / %q", d.Error, c.Error)
		}
		// Exact under synctest: set-up 80 ms, a warm request 40+40 ms, a
		// cold one both.
		near(t, "Dallas L4", d.L4RTTMS, 0)
		near(t, "Dallas L7", d.L7TTFBMS, 0)
		near(t, "Chicago L4", c.L4RTTMS, 80)
		near(t, "Chicago L7", c.L7TTFBMS, 80)
		near(t, "Chicago cold", c.ColdTTFBMS, 160)
		if c.Samples != DefaultSamples {
			t.Errorf("samples %d", c.Samples)
		}
		if d.ExitIP != "198.18.20.6" || c.ExitIP != "198.18.20.7" || c.ExitCountry != "US" {
			t.Errorf("exits %s %s %s", d.ExitIP, c.ExitIP, c.ExitCountry)
		}
		if c.RSTInjected != 3 || d.RSTInjected != 0 || c.SynRatio == nil || *c.SynRatio != 1 {
			t.Errorf("moat: Chicago rst %d ratio %v, Dallas rst %d", c.RSTInjected, c.SynRatio, d.RSTInjected)
		}
		if c.SACKRate == nil || *c.SACKRate != 0.5 || d.SACKRate == nil || *d.SACKRate != 1 {
			t.Errorf("SACK rates: Chicago %v Dallas %v", c.SACKRate, d.SACKRate)
		}
		if !slices.Equal(c.ServerIPs, []string{"198.18.10.1", "198.18.10.2"}) {
			t.Errorf("server IPs %q", c.ServerIPs)
		}
		if c.Urltest == nil || c.Urltest.Healthy || c.Urltest.Errors != 13 || c.Urltest.Pairs["Tokyo"] != 12 {
			t.Errorf("Chicago urltest %+v", c.Urltest)
		}
		if d.Urltest == nil || !d.Urltest.Healthy || d.Urltest.Errors != 0 {
			t.Errorf("Dallas urltest %+v", d.Urltest)
		}
		if nowhere.OK || !strings.Contains(nowhere.Error, "switching: unknown node") {
			t.Errorf("a node that cannot be switched to: ok=%v %q", nowhere.OK, nowhere.Error)
		}
		if miami.OK || miami.HTTPStatus != 503 || miami.L7TTFBMS == nil {
			t.Errorf("a 503 node: ok=%v status %d ttfb %v", miami.OK, miami.HTTPStatus, miami.L7TTFBMS)
		}
		if atlanta.OK || atlanta.L7TTFBMS != nil || atlanta.Error == "" {
			t.Errorf("a dead node: ok=%v ttfb %v %q", atlanta.OK, atlanta.L7TTFBMS, atlanta.Error)
		}
		if atlanta.DurationMS < 1000 {
			t.Errorf("a dead node was given up after %d ms, want the ready timeout (1 s)", atlanta.DurationMS)
		}
		want := []string{"1/5 Dallas switching", "1/5 Dallas measuring", "1/5 Dallas done", "2/5 Chicago switching"}
		if len(progress) < 4 || !slices.Equal(progress[:4], want) || progress[len(progress)-1] != "5/5 Atlanta done" {
			t.Errorf("progress %q", progress)
		}
	})
}

func TestRunStopsWithContextAndKeepsDoneNodes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &world{latency: map[string]time.Duration{}}
		ctx, cancel := context.WithCancel(t.Context())
		rep, err := Run(ctx, Options{
			Nodes: []string{"Dallas", "Chicago", "Miami"}, TTFBURL: "http://198.18.30.21/generate_204",
			Switcher: w, Dial: w.dial,
			Progress: func(p Progress) {
				if p.Phase == PhaseDone && p.Node == "Chicago" {
					cancel()
				}
			},
		})
		if !errors.Is(err, context.Canceled) || len(rep.Nodes) != 2 {
			t.Errorf("cancelled run: %v, %d nodes", err, len(rep.Nodes))
		}
	})
}

func TestOptionsErrors(t *testing.T) {
	for _, o := range []Options{
		{Nodes: []string{"Dallas"}, TTFBURL: "http://x/"},
		{Switcher: &world{}, TTFBURL: "http://x/"},
		{Switcher: &world{}, Nodes: []string{"Dallas"}},
	} {
		if _, err := Run(t.Context(), o); err == nil {
			t.Errorf("Run(%+v) accepted bad options", o)
		}
	}
	if _, err := parseTarget("ftp://198.18.30.21/"); err == nil || !strings.Contains(err.Error(), "want http:// or https://") {
		t.Errorf("ftp target: %v", err)
	}
	if tg, err := parseTarget("https://www.example.com/generate_204"); err != nil || !tg.tls || tg.addr != "www.example.com:443" {
		t.Errorf("https target: %+v %v", tg, err)
	}
}

func TestParseExit(t *testing.T) {
	for body, want := range map[string]string{
		`{"ip":"198.18.20.1","country":"us"}`: "198.18.20.1 US",
		"fl=1\nip=198.18.20.2\nloc=US\n":      "198.18.20.2 US",
		`{"query":"2001:db8::1","cc":"DE"}`:   "2001:db8::1 DE",
		"<html>nothing</html>":                " ",
	} {
		ip, c := parseExit([]byte(body))
		if got := ip + " " + c; got != want {
			t.Errorf("parseExit(%q) = %q, want %q", body, got, want)
		}
	}
}

func TestResultsFileAndTable(t *testing.T) {
	dir := t.TempDir()
	l4, l7 := 81.0, 80.5
	rep := Report{Transit: "auto", OriginalNode: "Dallas", Nodes: []Result{
		{Node: "Chicago", OK: true, L4RTTMS: &l4, L7TTFBMS: &l7, ExitIP: "198.18.20.3", ExitCountry: "US", DurationMS: 2100, ServerIPs: []string{"198.18.10.1"}},
		{Node: "Atlanta", Error: "ttfb: connection reset"},
	}}
	if err := WriteResults(dir, rep); err != nil {
		t.Fatal(err)
	}
	back, err := ReadResults(filepath.Join(dir, ResultsFile))
	if err != nil || len(back.Nodes) != 2 || *back.Nodes[0].L4RTTMS != 81 {
		t.Fatalf("read back: %v %+v", err, back)
	}
	var b strings.Builder
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, s := range []string{"NODE", "Chicago", "81 ms", "198.18.20.3", "2.1s", "Atlanta", "NO", "Atlanta: ttfb: connection reset"} {
		if !strings.Contains(out, s) {
			t.Errorf("table lacks %q:\n%s", s, out)
		}
	}
	_ = io.Discard
}
