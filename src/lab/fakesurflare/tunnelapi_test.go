package main

import (
	"strings"
	"testing"
	"time"

	"surflare-watchdog/src/lab/fakes"
)

// E9 with api_access=tunnel: outside the tunnel the API resets the CLI,
// so login fails; connect goes ahead on the cached token while it is
// valid, and fails "Account check failed" once it has expired.
func TestTunnelOnlyAPIConnectsOnAValidCachedToken(t *testing.T) {
	l := newNetLab(t)
	if out, code := l.cli("login", "-u", "lab@example.test", "-p", fakes.LabPassword, "--remember"); code != 0 {
		t.Fatalf("login with api_access=any: %d %s", code, out)
	}
	li, err := fakes.LoadLabInfo(l.dir)
	if err != nil {
		t.Fatal(err)
	}
	li.Vendor.APIAccess, li.Vendor.TokenTTLS = fakes.APITunnel, 3
	if err := li.Save(l.dir); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the API re-reads lab.json within 200 ms
	if out, code := l.cli("login", "-u", "lab@example.test", "-p", fakes.LabPassword, "--remember"); code == 0 || !strings.Contains(out, "network error") {
		t.Fatalf("login outside the tunnel: %d %s, want network error", code, out)
	}
	if out, code := l.cli("connect", "--node", "Dallas", "--daemon"); code != 0 {
		t.Fatalf("connect on a valid cached token: %d %s", code, out)
	}
	if out, code := l.cli("disconnect"); code != 0 {
		t.Fatalf("disconnect: %d %s", code, out)
	}
	time.Sleep(time.Until(l.state().LoginAt.Add(3*time.Second + 100*time.Millisecond)))
	if out, code := l.cli("connect", "--node", "Dallas", "--daemon"); code == 0 || !strings.Contains(out, "Account check failed") {
		t.Fatalf("connect on an expired token: %d %s, want Account check failed", code, out)
	}
}
