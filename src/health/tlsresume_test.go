package health

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestMain lets the benchmark below run its TLS server in a child process,
// so the parent's CPU is the client's alone.
func TestMain(m *testing.M) {
	if os.Getenv("HEALTH_TLS_SERVE") == "1" {
		serveTLSForBenchmark()
		return
	}
	os.Exit(m.Run())
}

// trust makes c's clients trust the test server's certificate.
func trust(c *Checker, cert *x509.Certificate) {
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	for _, cl := range c.clients {
		cl.Transport.(*http.Transport).TLSClientConfig.RootCAs = pool
	}
}

// The probes resume TLS sessions: every probe is still a fresh connection
// (nothing pooled through a node just left), but only the first handshake
// with a server is a full one, and the 503 probe's own round (statusGET)
// and the checks' probes share the cache. The 503 probe asks its https://
// URL every 2 s, so without this each round pays a certificate chain.
func TestProbesResumeTLSSessionsOnFreshConnections(t *testing.T) {
	var conns, resumed atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil && r.TLS.DidResume {
			resumed.Add(1)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	c := NewChecker(Config{ProbeTimeout: 2 * time.Second}, Deps{Tunnel: &net.Dialer{}})
	trust(c, srv.Certificate())
	for i := range 4 {
		if st, err := c.TunnelStatus(context.Background(), srv.URL+"/generate_204"); st != 204 || err != nil {
			t.Fatalf("round %d: %d, %v", i, st, err)
		}
	}
	if r := c.probe(context.Background(), PathTunnel, Target{Name: "t", Kind: KindSearch, URL: srv.URL + "/generate_204"}); r.Status != 204 {
		t.Fatalf("check's probe: %+v", r)
	}
	if conns.Load() != 5 || resumed.Load() != 4 {
		t.Errorf("%d connections, %d resumed handshakes; want 5 fresh connections, the last 4 resumed", conns.Load(), resumed.Load())
	}

	// The certificate is verified as net/http does: an untrusted one, or
	// one for another name, is no answer.
	other := NewChecker(Config{ProbeTimeout: 2 * time.Second}, Deps{Tunnel: &net.Dialer{}})
	if st, err := other.TunnelStatus(context.Background(), srv.URL+"/generate_204"); st != 0 || err == nil {
		t.Errorf("untrusted certificate: %d, %v; want an error", st, err)
	}
	u := strings.Replace(srv.URL, "127.0.0.1", "localhost.invalid", 1) + "/generate_204"
	byName := NewChecker(Config{ProbeTimeout: 2 * time.Second}, Deps{Tunnel: dialerTo(strings.TrimPrefix(srv.URL, "https://"))})
	trust(byName, srv.Certificate())
	if st, err := byName.TunnelStatus(context.Background(), u); st != 0 || err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("certificate for another name: %d, %v; want a certificate error", st, err)
	}
}

// dialerTo dials addr whatever address it is asked for.
type dialerTo string

func (d dialerTo) DialContext(ctx context.Context, network, _ string) (net.Conn, error) {
	return (&net.Dialer{}).DialContext(ctx, network, string(d))
}

// BenchmarkProbeTLSHandshake: the client CPU of one 503 probe round. On
// an https:// URL (the shipped default): "nethttp-full" is the round before
// 92632e2 (net/http's client, a full handshake each time with Go's default
// key exchange, X25519 with ML-KEM-768), "nethttp-resumed" net/http's
// client with the probes' TLS configuration (sessions resumed, X25519), and
// "shipped" the 503 probe's own round (statusGET with that configuration).
// "http" is the plain http:// round for comparison. The server runs in a
// child process; loopback, so the figure is the client's CPU alone.
func BenchmarkProbeTLSHandshake(b *testing.B) {
	tlsURL, httpURL, cert := startTLSChild(b)
	for _, mode := range []string{"nethttp-full", "nethttp-resumed", "shipped", "http"} {
		b.Run(mode, func(b *testing.B) {
			c := NewChecker(Config{ProbeTimeout: 5 * time.Second}, Deps{Tunnel: &net.Dialer{}})
			trust(c, cert)
			url := tlsURL
			round := func() (int, error) { return c.TunnelStatus(context.Background(), url) }
			viaNetHTTP := func() (int, error) {
				r := c.probe(context.Background(), PathTunnel, Target{Name: "b", Kind: KindSearch, URL: url})
				if r.Status == 0 {
					return 0, errors.New(r.Error)
				}
				return r.Status, nil
			}
			switch mode {
			case "nethttp-full":
				cfg := c.clients[PathTunnel].Transport.(*http.Transport).TLSClientConfig
				cfg.ClientSessionCache, cfg.CurvePreferences = nil, nil
				round = viaNetHTTP
			case "nethttp-resumed":
				round = viaNetHTTP
			case "http":
				url = httpURL
			}
			if st, err := round(); st != 204 || err != nil {
				b.Fatalf("warm-up: %d, %v", st, err)
			}
			cpu0 := processCPU(b)
			b.ResetTimer()
			for range b.N {
				if st, err := round(); st != 204 || err != nil {
					b.Fatalf("%d, %v", st, err)
				}
			}
			b.StopTimer()
			cpu := processCPU(b) - cpu0
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "client-cpu-µs/op")
			// One round every 2 s (storm503.probe_interval) is 1,800 an hour.
			b.ReportMetric(cpu.Seconds()/float64(b.N)*1800, "cpu-s/h@2s")
		})
	}
}

func processCPU(tb testing.TB) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startTLSChild runs serveTLSForBenchmark in a child and returns its https
// and http URLs and its certificate; the child ends with the benchmark.
func startTLSChild(b *testing.B) (string, string, *x509.Certificate) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "HEALTH_TLS_SERVE=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stdin.Close(); cmd.Wait() })
	r := bufio.NewReader(out)
	url, err := r.ReadString('\n')
	if err != nil {
		b.Fatalf("TLS child: %v", err)
	}
	plain, err := r.ReadString('\n')
	if err != nil {
		b.Fatalf("TLS child: %v", err)
	}
	rest, _ := io.ReadAll(io.LimitReader(r, 1<<16))
	blk, _ := pem.Decode(rest)
	if blk == nil {
		b.Fatal("TLS child: no certificate")
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		b.Fatal(err)
	}
	return strings.TrimSpace(url) + "/generate_204", strings.TrimSpace(plain) + "/generate_204", cert
}

// serveTLSForBenchmark answers 204 over TLS and over plain HTTP on
// loopback until stdin closes.
func serveTLSForBenchmark() {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.TLS = &tls.Config{}
	srv.StartTLS()
	plain := httptest.NewServer(srv.Config.Handler)
	defer plain.Close()
	fmt.Println(srv.URL)
	fmt.Println(plain.URL)
	pem.Encode(os.Stdout, &pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	os.Stdout.Close()
	io.Copy(io.Discard, os.Stdin)
	srv.Close()
}
