package lab

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"strings"
	"testing"
	"time"
)

// The daemon's 503 probe on an https:// URL, as shipped: the lab's search
// host answers it over TLS with a certificate of the lab CA the daemon
// trusts, the rounds come from the exit of the node in use (through the
// tunnel) and resume their TLS session; a 503 storm on that node is seen
// over https and the daemon rotates away from it.
func TestStorm503ProbeOverHTTPS(t *testing.T) {
	l := upDaemonVendor(t, []string{"urltest_interval=180"}, HTTPSProbeSets()...)
	ctx := context.Background()
	pemBytes, err := os.ReadFile(l.CAPath())
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := pem.Decode(pemBytes); b == nil {
		t.Fatalf("%s holds no PEM certificate", l.CAPath())
	} else if ca, err := x509.ParseCertificate(b.Bytes); err != nil || !ca.IsCA {
		t.Fatalf("%s: not a CA certificate (%v)", l.CAPath(), err)
	}
	st, err := l.WaitDaemon(ctx, 20*time.Second, DaemonState.Healthy)
	if err != nil {
		t.Fatal(err)
	}
	bad := st.Node
	exit := nodeAddr(bad)
	// The probe's round is every 2 s (storm503.probe_interval): wait for
	// three answered ones, the later ones resumed.
	var ok []HTTPSRequest
	deadline := time.Now().Add(15 * time.Second)
	for len(ok) < 3 || !ok[len(ok)-1].Resumed {
		if time.Now().After(deadline) {
			t.Fatalf("no three https generate_204 rounds from %s's exit %s, the last resumed, in 15 s: %+v", bad, exit, ok)
		}
		time.Sleep(200 * time.Millisecond)
		rs, err := l.HTTPSRequests()
		if err != nil {
			t.Fatal(err)
		}
		ok = ok[:0]
		for _, r := range rs {
			if r.From == exit && r.Path == "/generate_204" && r.Status == 204 {
				ok = append(ok, r)
			}
		}
	}
	t0 := time.Now()
	if err := l.Fault(ctx, Fault503, true, bad); err != nil {
		t.Fatal(err)
	}
	st, err = l.WaitDaemon(ctx, 60*time.Second, func(s DaemonState) bool { return s.Healthy() && s.Node != bad })
	if err != nil {
		t.Fatalf("no rotation away from the 503-ing %s: %v", bad, err)
	}
	rs, err := l.HTTPSRequests()
	if err != nil {
		t.Fatal(err)
	}
	n503 := 0
	for _, r := range rs {
		if r.From == exit && r.Status == 503 && !r.At.Before(t0.Add(-time.Second)) {
			n503++
		}
	}
	if n503 == 0 {
		t.Errorf("the https server answered no 503 to %s's exit %s", bad, exit)
	}
	if log := l.DaemonLog(); !strings.Contains(log, "STORM503_PROBE: the exit of "+bad) {
		t.Errorf("the daemon's log does not name the 503 probe for %s", bad)
	}
	t.Logf("https 503 probe: %d rounds answered 204 before the fault, %d 503s over https; healthy on %s after %s",
		len(ok), n503, st.Node, time.Since(t0).Round(time.Millisecond))
}
