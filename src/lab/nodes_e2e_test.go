package lab

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// Node names against the real daemon (issue 18, E1): Tokyo (an exit in JP)
// as the preferred node and `auto` as a rotation target are accepted and
// carry LAN traffic without a rotation or a "wrong exit"; a candidate the
// vendor does not list ("Dalas") is named in a warning with the listed
// name meant, once the daemon has read `surflare nodes`, while names the
// vendor lists are not warned about.
func TestNodeNamesAutoTokyoAndUnlisted(t *testing.T) {
	needRoot(t)
	if testing.Short() {
		t.Skip("-short: needs the built binaries")
	}
	if buildErr != nil {
		t.Fatalf("building the lab binaries: %v", buildErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l, err := Up(ctx, Options{BinDir: binDir, Clients: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := WriteDaemonConfig(l, append(append([]string(nil), ScenarioBaseSets...), "surflare.main.node=Tokyo")); err != nil {
		t.Fatal(err)
	}
	// Candidates: Tokyo and auto first, a typo among the listed ones.
	b, err := os.ReadFile(l.DaemonConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(b), "\tlist candidate 'Dallas'\n",
		"\tlist candidate 'Tokyo'\n\tlist candidate 'auto'\n\tlist candidate 'Dalas'\n\tlist candidate 'Dallas'\n", 1)
	if text == string(b) {
		t.Fatal("the lab config has no candidate list to extend")
	}
	if err := os.WriteFile(l.DaemonConfigPath(), []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := l.StartDaemon(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		sctx, c := context.WithTimeout(context.Background(), DaemonStopGrace+time.Second)
		defer c()
		_, _ = l.StopDaemon(sctx)
	}()
	tokyo := ""
	for _, n := range Exits {
		if n.Name == "Tokyo" {
			tokyo = n.Addr.String()
		}
	}
	st, err := l.WaitDaemon(ctx, 60*time.Second, func(s DaemonState) bool { return s.Healthy() && s.Node == "Tokyo" })
	if err != nil {
		t.Fatalf("not healthy on Tokyo (state %q on %q): %v\n%s", st.State, st.Node, err, l.daemonLogTail(20))
	}
	if e, err := l.WaitClientExit(ctx, 0, tokyo); err != nil || e.Country != "JP" {
		t.Fatalf("LAN client exit %+v, %v; want Tokyo (JP)", e, err)
	}
	if !waitLogContains(ctx, l, `unknown node \"Dalas\": did you mean \"Dallas\"?`, 20*time.Second) {
		t.Errorf("no warning naming the unlisted candidate Dalas:\n%s", l.daemonLogTail(30))
	}
	for _, line := range strings.Split(l.DaemonLog(), "\n") {
		if strings.Contains(line, "NODE_UNLISTED") && (strings.Contains(line, `node=Tokyo`) || strings.Contains(line, `node=auto`)) {
			t.Errorf("a listed name was warned about: %s", line)
		}
	}
	// Rotate to auto: the vendor picks the first exit whose tunnel opens.
	if err := l.daemonRotate(ctx, "auto"); err != nil {
		t.Fatal(err)
	}
	st, err = l.WaitDaemon(ctx, 60*time.Second, func(s DaemonState) bool { return s.Healthy() && s.Node == "auto" })
	if err != nil {
		t.Fatalf("not healthy on auto (state %q on %q): %v\n%s", st.State, st.Node, err, l.daemonLogTail(20))
	}
	if e, err := l.WaitClientExit(ctx, 0, Nodes[0].Addr.String()); err != nil {
		t.Errorf("on auto the LAN client exit is %+v, %v; want %s (the first exit)", e, err, Nodes[0].Name)
	}
	if st.Counters.FailedChecks != 0 {
		t.Errorf("%d failed checks on Tokyo/auto: a valid exit was judged wrong", st.Counters.FailedChecks)
	}
}

// waitLogContains waits for substr in the daemon's log.
func waitLogContains(ctx context.Context, l *Lab, substr string, budget time.Duration) bool {
	deadline := time.Now().Add(budget)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if strings.Contains(l.DaemonLog(), substr) {
			return true
		}
		time.Sleep(200 * time.Millisecond)
	}
	return false
}
