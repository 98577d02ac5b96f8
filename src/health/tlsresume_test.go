package health

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
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
// with a server is a full one. The 503 probe asks its https:// URL every
// 2 s, so without this each round pays a certificate verification.
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
	if conns.Load() != 4 || resumed.Load() != 3 {
		t.Errorf("%d connections, %d resumed handshakes; want 4 fresh connections, the last 3 resumed", conns.Load(), resumed.Load())
	}
}

// BenchmarkProbeTLSHandshake: the client CPU of one 503 probe round on an
// https:// URL (the shipped default): "full" is a full handshake each time
// with Go's default key exchange (X25519 with ML-KEM-768, no session cache:
// as before), "shipped" is newClient's (sessions resumed, X25519), and
// "http" the plain http:// round for comparison. The server runs in a
// child process; loopback, so the figure is the client's CPU, not the
// network's.
func BenchmarkProbeTLSHandshake(b *testing.B) {
	tlsURL, httpURL, cert := startTLSChild(b)
	for _, mode := range []string{"full", "shipped", "http"} {
		b.Run(mode, func(b *testing.B) {
			c := NewChecker(Config{ProbeTimeout: 5 * time.Second}, Deps{Tunnel: &net.Dialer{}})
			trust(c, cert)
			url := tlsURL
			switch mode {
			case "full":
				cfg := c.clients[PathTunnel].Transport.(*http.Transport).TLSClientConfig
				cfg.ClientSessionCache, cfg.CurvePreferences = nil, nil
			case "http":
				url = httpURL
			}
			if st, err := c.TunnelStatus(context.Background(), url); st != 204 || err != nil {
				b.Fatalf("warm-up: %d, %v", st, err)
			}
			cpu0 := processCPU(b)
			b.ResetTimer()
			for range b.N {
				if st, err := c.TunnelStatus(context.Background(), url); st != 204 || err != nil {
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
