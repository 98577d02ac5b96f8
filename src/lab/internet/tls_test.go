package internet

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"surflare-watchdog/src/lab/fakes"
)

// The search host over TLS through a tunnel: the certificate verifies
// against the CA written to CAFile (by IP and by name), generate_204
// answers 204, a 503-ing exit gets 503 over https too (the exit cannot
// read the request, the server answers it), other exits still 204, and
// the request log names the exit each request came from.
func TestHTTPSSearchThroughTheTunnel(t *testing.T) {
	w := &world{labDir: t.TempDir(), base: [3]byte{127, byte(1 + rand.IntN(250)), byte(1 + rand.IntN(250))}}
	var tick atomic.Int64 // as startWorld: each read of the faults a second later
	start := time.Now()
	clock := func() time.Time { return start.Add(time.Duration(tick.Add(1)) * time.Second) }
	w.cfg = LoopbackConfig(w.addr(0), fakes.NewWatcher(w.labDir, clock))
	w.cfg.HTTPSPort = 18445
	w.cfg.SearchNames = []string{"search.lab"}
	w.cfg.CAFile = filepath.Join(w.labDir, "lab-ca.pem")
	w.cfg.HTTPSLog = filepath.Join(w.labDir, HTTPSLogName)
	ctx, cancel := context.WithCancel(context.Background())
	s, err := Start(ctx, w.cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); s.Wait() })

	caPEM, err := os.ReadFile(w.cfg.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatalf("%s: no certificate", w.cfg.CAFile)
	}
	get := func(exit, serverName string) (int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var d net.Dialer
		c, err := fakes.DialTunnel(ctx, d.DialContext, w.relay("Tokyo"), exit, hostPort(w.cfg.Search[0], w.cfg.HTTPSPort))
		if err != nil {
			return 0, err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		tc := tls.Client(c, &tls.Config{RootCAs: roots, ServerName: serverName})
		fmt.Fprintf(tc, "GET %s HTTP/1.1\r\nHost: lab\r\nConnection: close\r\n\r\n", URLTestPath)
		resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	for _, name := range []string{w.cfg.Search[0].String(), "search.lab"} {
		if code, err := get("Miami", name); err != nil || code != http.StatusNoContent {
			t.Fatalf("https as %s through Miami: want 204, got %d %v", name, code, err)
		}
	}
	if _, err := get("Miami", "other.lab"); err == nil {
		t.Fatal("a certificate for other.lab verified: the leaf must name only the search host")
	}
	w.setFaults(t, func(f *fakes.Faults) { f.Node503 = []string{"Miami"} })
	if code, err := get("Miami", "search.lab"); err != nil || code != http.StatusServiceUnavailable {
		t.Fatalf("https through the 503-ing Miami: want 503, got %d %v", code, err)
	}
	if code, err := get("Atlanta", "search.lab"); err != nil || code != http.StatusNoContent {
		t.Fatalf("https through Atlanta: want 204, got %d %v", code, err)
	}
	b, err := os.ReadFile(w.cfg.HTTPSLog)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`"from":%q,"path":"/generate_204","status":503`, w.node("Miami").String())
	if !strings.Contains(string(b), want) {
		t.Errorf("the https log has no %s line:\n%s", want, b)
	}
}
