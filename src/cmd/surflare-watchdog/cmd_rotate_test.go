package main

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"surflare-watchdog/src/control"
	"surflare-watchdog/src/health"
	"surflare-watchdog/src/surflare"
	"surflare-watchdog/src/watchdog"
)

// The CLI's actions against a real engine behind the control socket, with
// a fake vendor and firewall: what `rotate` prints and what it does to the
// tunnel.

// tunnelVendor is the vendor CLI: one tunnel at a time, and a record of
// every call that touches it.
type tunnelVendor struct {
	mu    sync.Mutex
	node  string
	calls []string
}

func (v *tunnelVendor) Status(context.Context) (surflare.Status, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.node == "" {
		return surflare.Status{State: surflare.StateDisconnected}, nil
	}
	return surflare.Status{State: surflare.StateConnected, Node: v.node}, nil
}

func (v *tunnelVendor) Connect(_ context.Context, node, _, _ string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.calls = append(v.calls, "connect "+node)
	v.node = node
	return nil
}

func (v *tunnelVendor) Disconnect(context.Context) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.calls = append(v.calls, "disconnect")
	v.node = ""
	return nil
}

func (v *tunnelVendor) Login(context.Context) error { return nil }

// Nodes is `surflare nodes`.
func (v *tunnelVendor) Nodes(context.Context) ([]string, error) {
	return []string{"Dallas", "Los Angeles", "Chicago", "New York", "Atlanta", "Miami", "Tokyo"}, nil
}

func (v *tunnelVendor) touched() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.calls)
}

type openFirewall struct{}

func (openFirewall) Set(context.Context, watchdog.FirewallMode) error { return nil }
func (openFirewall) FlushVendor(context.Context) error                { return nil }

// workingTunnel passes every check while the vendor runs a tunnel.
type workingTunnel struct{ v *tunnelVendor }

func (p workingTunnel) Local(ctx context.Context) health.Result { return p.Check(ctx) }
func (p workingTunnel) Check(context.Context) health.Result {
	if st, _ := p.v.Status(context.Background()); st.Node == "" {
		return health.Result{Outcome: health.LocalFail, Reason: "proxy process not running"}
	}
	return health.Result{Outcome: health.OK, ExitIP: "198.18.20.1", ExitCountry: "US"}
}

// startEngine runs an engine healthy on Dallas behind a control socket, as
// the daemon serves it, and returns the run dir.
func startEngine(t *testing.T) (*tunnelVendor, *watchdog.Watchdog, string) {
	t.Helper()
	v := &tunnelVendor{}
	w, err := watchdog.New(watchdog.DefaultSettings(), watchdog.Deps{Vendor: v, Firewall: openFirewall{}, Prober: workingTunnel{v},
		Nodes: surflare.NewNodeCache(v.Nodes, nil)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	dir := t.TempDir()
	served := make(chan struct{})
	go func() {
		control.Serve(ctx, control.SocketPath(dir), control.HandlerFunc(func(ctx context.Context, req control.Request) (any, error) {
			return w.HandleCommand(ctx, req.Cmd, req.Args)
		}))
		close(served)
	}()
	t.Cleanup(func() { cancel(); <-done; <-served })
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		_, err := os.Stat(control.SocketPath(dir))
		if err == nil && w.Status().State == watchdog.StateHealthy {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("engine %s, socket %v", w.Status().State, err)
		}
	}
	return v, w, dir
}

func TestRotateRefusesAnUnknownNodeWithoutTouchingTheTunnel(t *testing.T) {
	v, w, dir := startEngine(t)
	before := v.touched()
	for _, c := range []struct{ typed, says string }{
		{"Narnia", `surflare-watchdog rotate: unknown node "Narnia"; known nodes: Dallas, Los Angeles, Chicago, New York, Atlanta, Miami, Tokyo, auto` + "\n"},
		{"Chicagoo", `surflare-watchdog rotate: unknown node "Chicagoo": did you mean "Chicago"?` + "\n"},
	} {
		code, out, errOut := runDaemonCLI("rotate", "--run-dir", dir, c.typed)
		if code != exitFailure || errOut != c.says || out != "" {
			t.Errorf("rotate %s: exit %d, stdout %q, stderr %q; want exit 1 saying %q", c.typed, code, out, errOut, c.says)
		}
	}
	if got := v.touched(); !slices.Equal(got, before) {
		t.Errorf("refused rotations touched the tunnel: %q after %q", got[len(before):], before)
	}
	if st := w.Status(); st.Node != "Dallas" || st.State != watchdog.StateHealthy || st.Counters.Rotations != 0 {
		t.Errorf("after refused rotations: %s on %s, %d rotations", st.State, st.Node, st.Counters.Rotations)
	}

	// A name typed as people do is the node; rotate waits and says how it went.
	code, out, errOut := runDaemonCLI("rotate", "--run-dir", dir, "los-angeles")
	if code != exitOK || !strings.HasPrefix(out, "rotated to Los Angeles in ") || !strings.HasSuffix(out, " s\n") || errOut != "" {
		t.Errorf("rotate los-angeles: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if got := v.touched(); !slices.Equal(got[len(before):], []string{"disconnect", "connect Los Angeles"}) {
		t.Errorf("rotate los-angeles: vendor calls %q", got[len(before):])
	}
	code, out, _ = runDaemonCLI("check", "--run-dir", dir)
	if code != exitOK || !strings.HasPrefix(out, "check passed: exit 198.18.20.1 (US) in ") {
		t.Errorf("check: exit %d, stdout %q", code, out)
	}
	code, out, _ = runDaemonCLI("reconnect", "--run-dir", dir, "--json")
	var o watchdog.Outcome
	if err := json.Unmarshal([]byte(out), &o); code != exitOK || err != nil || !o.OK || o.Action != "reconnect" || o.Node != "Los Angeles" {
		t.Errorf("reconnect --json: exit %d, %+v (%v) from %q", code, o, err, out)
	}
}
