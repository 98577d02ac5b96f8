package lab

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// End-to-end checks of the daemon's wiring into its surroundings: the
// chnroute refresher, the kill switch before the first LAN request, the
// keepalive clamp. They share upDaemon's conventions (e2e_test.go).

// The refresher downloads the lab's delegated file from the domestic web
// server (never a real registry), rewrites the list and re-applies the
// firewall: cn_direct in the kernel follows without a restart.
func TestDaemonRefreshesChnrouteInTheLab(t *testing.T) {
	l := upFull(t, Options{Clients: 1})
	ctx := context.Background()
	sets := append(append([]string(nil), e2eSets...), "surflare.paths.chnroute_refresh=3600")
	if err := WriteDaemonConfig(l, sets); err != nil {
		t.Fatal(err)
	}
	// A list older than the interval, narrower than the lab's: the refresh
	// is due at once and visibly changes the set.
	list := l.Path(dirConfig, "chnroute.txt")
	if err := os.WriteFile(list, []byte("198.19.0.0/17\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Hour)
	os.Chtimes(list, old, old)
	startDaemonLogged(t, l)

	deadline := time.Now().Add(15 * time.Second)
	var set string
	for {
		set, _ = l.Exec(ctx, RoleRouter, "nft", "list", "set", "inet", "killswitch", "cn_direct4")
		if strings.Contains(set, DomesticNet.String()) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cn_direct4 never took the refreshed list:\n%s", set)
		}
		time.Sleep(200 * time.Millisecond)
	}
	b, _ := os.ReadFile(list)
	if string(b) != DomesticNet.String()+"\n" {
		t.Errorf("chnroute file after the refresh: %q", b)
	}
	log := l.DaemonLog()
	for _, want := range []string{"chnroute updated", "chnroute applied"} {
		if !strings.Contains(log, want) {
			t.Errorf("daemon log lacks %q", want)
		}
	}
}

// startDaemonLogged starts the daemon with the config as it is, stops it
// at the end and shows its log when the test fails.
func startDaemonLogged(t *testing.T, l *Lab) {
	t.Helper()
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("E2E_LOG") != "" {
			t.Logf("daemon log:\n%s", tail(l.DaemonLog(), 80))
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := l.StartDaemon(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if l.DaemonRunning() {
			l.StopDaemon(context.Background())
		}
	})
}
