package lab

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"surflare-watchdog/src/lab/fakes"
)

// binDir holds the lab binaries, built once for the whole package.
var (
	binDir   string
	buildErr error
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := func() int {
		if os.Geteuid() == 0 && !testing.Short() {
			dir, err := os.MkdirTemp("", "surflare-lab-test-bin-")
			if err != nil {
				buildErr = err
			} else {
				defer os.RemoveAll(dir)
				binDir = dir
				wd, _ := os.Getwd()
				root, err := FindRepoRoot(wd)
				if err == nil {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
					err = Build(ctx, root, dir)
					cancel()
				}
				buildErr = err
			}
		}
		return m.Run()
	}()
	os.Exit(code)
}

// upFull brings up a complete lab (fakes, internet servers) and registers
// its teardown.
func upFull(t *testing.T, o Options) *Lab {
	t.Helper()
	needRoot(t)
	if testing.Short() {
		t.Skip("-short: the full lab needs the built binaries")
	}
	if buildErr != nil {
		t.Fatalf("building the lab binaries: %v", buildErr)
	}
	o.BinDir = binDir
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := Up(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func TestClientSeesExitThroughTunnel(t *testing.T) {
	l := upFull(t, Options{Set: []string{"surflare.main.mode=global"}})
	t.Logf("up with servers took %s", l.UpTime)
	if l.UpTime > 2*time.Second {
		t.Errorf("up took %s, want < 2s", l.UpTime)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Before the tunnel: a client goes out directly, as the household.
	e, err := l.ClientEcho(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if e.IP != WANRouter.String() || e.Country != "CN" {
		t.Errorf("without the tunnel the echo host should see the WAN address (CN), saw %+v", e)
	}

	if err := l.Connect(ctx, "Chicago"); err != nil {
		t.Fatal(err)
	}
	if err := l.InstallLANTProxy(); err != nil {
		t.Fatal(err)
	}
	l.ResetLeaks(ctx)
	for i := range l.Clients() {
		wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
		e, err := l.WaitClientExit(wctx, i, Nodes[2].Addr.String())
		wcancel()
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		if e.Country != "US" || ExitName(e.IP) != "Chicago" {
			t.Errorf("client %d: echo %+v, want Chicago (US)", i, e)
		}
	}
	if lc, _ := l.Leaks(ctx); lc.Total() != 0 || lc.Relay == 0 {
		t.Errorf("tunnelled fetches: want no leak and relay traffic, got %s", lc)
	}

	// Rotating the exit changes what the client sees.
	if _, err := l.Surflare(ctx, "connect", "--node", "Los Angeles", "--daemon"); err != nil {
		if err := l.Reconnect(ctx, "Los Angeles"); err != nil {
			t.Fatal(err)
		}
		if err := l.InstallLANTProxy(); err != nil {
			t.Fatal(err)
		}
	}
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	if _, err := l.WaitClientExit(wctx, 0, Nodes[1].Addr.String()); err != nil {
		t.Errorf("after connecting to Los Angeles: %v", err)
	}

	// The daemon's lab config got the override.
	cfg, err := os.ReadFile(l.DaemonConfigPath())
	if err != nil || !strings.Contains(string(cfg), "option mode 'global'") {
		t.Errorf("--set not applied to %s: %v\n%s", l.DaemonConfigPath(), err, cfg)
	}
}

// Every fault changes what a client (or the vendor CLI) sees, and goes away
// again: the same checks as `surflare-lab selftest`.
func TestSelftestEveryFault(t *testing.T) {
	needRoot(t)
	if testing.Short() {
		t.Skip("-short")
	}
	if buildErr != nil {
		t.Fatalf("building the lab binaries: %v", buildErr)
	}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	checks, err := Selftest(ctx, Options{BinDir: binDir}, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	covered := map[string]bool{}
	knobRows := map[string]int{}
	for _, c := range checks {
		covered[strings.Fields(c.Fault)[0]] = true
		if rest, ok := strings.CutPrefix(c.Fault, "--vendor "); ok {
			for _, kv := range strings.Fields(rest) {
				key, _, _ := strings.Cut(kv, "=")
				knobRows[key]++
			}
		}
	}
	for _, f := range Faults {
		if !covered[f.Name] {
			t.Errorf("selftest does not exercise fault %s", f.Name)
		}
	}
	// Every vendor knob in both behaviours: at least two rows.
	for _, k := range fakes.Knobs {
		if knobRows[k.Key] < 2 {
			t.Errorf("selftest has %d rows for vendor knob %s, want one on and one off", knobRows[k.Key], k.Key)
		}
	}
	t.Logf("\n%s", out.String())
}

// A second process (the CLI) attaches to a running lab by prefix and its
// injections show in the owner's fault log.
func TestAttachInjectsIntoRunningLab(t *testing.T) {
	l := upFull(t, Options{Clients: 1})
	a, err := Attach(l.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Fault(context.Background(), FaultLatency, true, "new-york", "120"); err != nil {
		t.Fatal(err)
	}
	log := l.FaultLog()
	if len(log) != 1 || log[0].Name != FaultLatency || log[0].Detail != "New York 120ms" {
		t.Fatalf("owner's fault log: %+v", log)
	}
	b, _ := os.ReadFile(l.Path("faults.json"))
	if !strings.Contains(string(b), `"New York": 120`) {
		t.Errorf("faults.json: %s", b)
	}
	a.Close() // an attached lab's Close must not tear the lab down
	if len(listNamed(l.Prefix+"-")) != 3 {
		t.Errorf("closing an attached lab removed namespaces")
	}
	if err := a.Fault(context.Background(), "no-such-fault", true); err == nil {
		t.Error("unknown fault accepted")
	}
	if err := l.Fault(context.Background(), FaultNodeDown, true, "Tokio"); err == nil || !strings.Contains(err.Error(), "Dallas") {
		t.Errorf("unknown node should list the nodes, got %v", err)
	}
}

// The CLI finds a running lab by prefix and injects into it; the owner's
// log and the client both see it.
func TestCLIFaultAgainstRunningLab(t *testing.T) {
	l := upFull(t, Options{Clients: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cli := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, filepath.Join(binDir, "surflare-lab"), args...).CombinedOutput()
		if err != nil {
			t.Fatalf("surflare-lab %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	// A direct fetch works, then the CLI takes the WAN down.
	if _, err := l.ClientGet(ctx, 0, EchoURL(0)); err != nil {
		t.Fatal(err)
	}
	cli("fault", "--lab", l.Prefix, "wan-down", "on")
	fctx, fcancel := context.WithTimeout(ctx, 700*time.Millisecond)
	_, err := l.ClientGet(fctx, 0, EchoURL(0))
	fcancel()
	if err == nil {
		t.Error("fetch worked with the WAN down")
	}
	cli("fault", "--lab", l.Prefix, "wan-down", "off")
	if _, err := l.ClientGet(ctx, 0, EchoURL(0)); err != nil {
		t.Errorf("after wan-down off: %v", err)
	}
	if st := cli("status", "--lab", l.Prefix); !strings.Contains(st, "wan-down") {
		t.Errorf("status does not show the injection:\n%s", st)
	}
	if n := len(l.FaultLog()); n != 2 {
		t.Errorf("owner's fault log has %d events, want 2", n)
	}
}

// The web UI relay: a listener on the host's loopback whose connections
// are dialled from inside the router namespace.
func TestForwardTCPReachesRouterService(t *testing.T) {
	l := upBare(t)
	ln, err := listenIn(l.ns[RoleRouter], "tcp", fmt.Sprintf("%s:%d", LANRouter, LabWebPort))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "live view from "+r.RemoteAddr)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hl, err := l.ForwardTCP(ctx, "127.0.0.1:0", RoleRouter, fmt.Sprintf("%s:%d", LANRouter, LabWebPort))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + hl.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// The service sees a connection from the router's own address: relayed,
	// not routed from the host.
	if !strings.HasPrefix(string(b), "live view from "+LANRouter.String()+":") {
		t.Errorf("got %q", b)
	}
	cancel()
	time.Sleep(50 * time.Millisecond)
	if _, err := http.Get("http://" + hl.Addr().String() + "/"); err == nil {
		t.Error("relay still listening after its context ended")
	}
}
