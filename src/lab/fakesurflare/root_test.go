package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"surflare-watchdog/src/testenv"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"surflare-watchdog/src/lab"
	"surflare-watchdog/src/lab/fakes"
	"surflare-watchdog/src/lab/internet"
)

// Child-process roles of the test binary in the root test.
const (
	envServeInternet = "FAKESURFLARE_TEST_INTERNET" // lab dir: run internet.Run
	envHTTPGet       = "FAKESURFLARE_TEST_GET"      // URL: print status and body
)

func init() {
	if dir := os.Getenv(envServeInternet); dir != "" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		if err := internet.Run(ctx, dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if u := os.Getenv(envHTTPGet); u != "" {
		c := &http.Client{Timeout: 3 * time.Second}
		resp, err := c.Get(u)
		if err != nil {
			fmt.Println("ERROR", err)
			os.Exit(1)
		}
		b, _ := io.ReadAll(resp.Body)
		fmt.Printf("%d %s", resp.StatusCode, b)
		os.Exit(0)
	}
}

// netLab is a router namespace joined by a veth pair to an internet
// namespace that serves the plan's addresses. Nothing touches the host's
// interfaces.
type netLab struct {
	t        *testing.T
	router   string
	inet     string
	dir      string
	bin      string
	internet *exec.Cmd
}

func sh(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%q: %v\n%s", args, err, out)
	}
	return string(out)
}

func repoRoot(t *testing.T) string { return testenv.RepoRoot(t) }

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// fakeBinaries builds bin/surflare and bin/surflare-proxy once per test run
// (TestMain removes them).
func fakeBinaries(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		root := repoRoot(t)
		if buildDir, buildErr = os.MkdirTemp("", "c2-fakes-bin-"); buildErr != nil {
			return
		}
		for pkg, name := range map[string]string{"fakesurflare": fakes.CLIName, "fakeproxy": fakes.ProxyName} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(buildDir, name), "./src/lab/"+pkg)
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("building %s: %v\n%s", name, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildDir
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o755)
}

func newNetLab(t *testing.T) *netLab {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces, nft tables and ip rules")
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s to build and inspect the namespaces", tool)
		}
	}
	id := strconv.Itoa(rand.IntN(1e6))
	l := &netLab{t: t, router: "c2t" + id + "-router", inet: "c2t" + id + "-inet", dir: t.TempDir()}
	l.bin = filepath.Join(l.dir, fakes.BinDir)
	src := fakeBinaries(t)
	if err := os.MkdirAll(l.bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{fakes.CLIName, fakes.ProxyName} {
		if err := copyFile(filepath.Join(src, name), filepath.Join(l.bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(l.cleanup)
	sh(t, "ip", "netns", "add", l.router)
	sh(t, "ip", "netns", "add", l.inet)
	r, i := []string{"ip", "-n", l.router}, []string{"ip", "-n", l.inet}
	sh(t, append(r, "link", "set", "lo", "up")...)
	sh(t, append(i, "link", "set", "lo", "up")...)
	sh(t, append(r, "link", "add", "wan", "type", "veth", "peer", "name", "isp", "netns", l.inet)...)
	sh(t, append(r, "addr", "add", lab.WANRouter.String()+"/24", "dev", "wan")...)
	sh(t, append(r, "link", "set", "wan", "up")...)
	sh(t, append(r, "route", "add", "default", "via", lab.WANGateway.String())...)
	sh(t, append(i, "addr", "add", lab.WANGateway.String()+"/24", "dev", "isp")...)
	sh(t, append(i, "link", "set", "isp", "up")...)
	var addrs []string
	for _, x := range lab.Relays {
		addrs = append(addrs, x.Addr.String())
	}
	for _, x := range lab.Nodes {
		addrs = append(addrs, x.Addr.String())
	}
	for _, x := range append(append(append([]any{}, lab.IPEcho[0], lab.IPEcho[1], lab.IPEcho[2]), lab.CDNTrace[0], lab.CDNTrace[1]),
		lab.Search, lab.AccountAPI, lab.ForeignDNS, lab.DoH, lab.DomesticWeb, lab.DomesticDNS) {
		addrs = append(addrs, fmt.Sprint(x))
	}
	for _, a := range addrs {
		sh(t, append(i, "addr", "add", a+"/32", "dev", "lo")...)
	}
	sh(t, append(i, "addr", "add", lab.Internet6.String()+"/128", "dev", "lo")...)

	li := fakes.DefaultLabInfo(l.dir, "c2t"+id)
	li.URLTestIntervalS = 1
	li.URLTestTimeoutMS = 800
	if err := li.Save(l.dir); err != nil {
		t.Fatal(err)
	}
	l.internet = exec.Command("ip", "netns", "exec", l.inet, os.Args[0], "-test.run=^$")
	l.internet.Env = append(os.Environ(), envServeInternet+"="+l.dir)
	l.internet.Stdout, l.internet.Stderr = os.Stderr, os.Stderr
	if err := l.internet.Start(); err != nil {
		t.Fatal(err)
	}
	l.waitFor("internet servers", 5*time.Second, func() bool {
		code, _ := l.get("http://" + lab.Search.String() + "/generate_204")
		return code == 204
	})
	return l
}

func (l *netLab) cleanup() {
	if st, err := fakes.LoadState(fakes.LabInfo{StateDir: filepath.Join(l.dir, "state")}); err == nil && proxyAlive(l.bin, st.ProxyPID) {
		syscall.Kill(st.ProxyPID, syscall.SIGKILL)
	}
	if l.internet != nil && l.internet.Process != nil {
		l.internet.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { l.internet.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			l.internet.Process.Kill()
		}
	}
	exec.Command("ip", "netns", "del", l.router).Run()
	exec.Command("ip", "netns", "del", l.inet).Run()
}

// cli runs the fake CLI in the router namespace.
func (l *netLab) cli(args ...string) (string, int) {
	cmd := exec.Command("ip", append([]string{"netns", "exec", l.router, filepath.Join(l.bin, fakes.CLIName)}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		l.t.Fatal(err)
	}
	return string(out), code
}

// get does an HTTP GET from the router namespace (a process of its own, so
// its sockets live there) and returns status and body; 0 on failure.
func (l *netLab) get(url string) (int, string) {
	cmd := exec.Command("ip", "netns", "exec", l.router, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envHTTPGet+"="+url)
	out, _ := cmd.Output()
	code, body, _ := strings.Cut(string(out), " ")
	n, _ := strconv.Atoi(code)
	return n, body
}

func (l *netLab) echo() internet.EchoReply {
	var e internet.EchoReply
	if code, body := l.get("http://" + lab.IPEcho[0].String() + "/"); code == 200 {
		json.Unmarshal([]byte(body), &e)
	}
	return e
}

func (l *netLab) waitFor(what string, d time.Duration, ok func() bool) {
	l.t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			l.t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (l *netLab) faults(change func(*fakes.Faults)) {
	l.t.Helper()
	if _, err := fakes.Update(l.dir, time.Now(), change); err != nil {
		l.t.Fatal(err)
	}
	time.Sleep(fakes.WatchInterval + 50*time.Millisecond) // readers stat at most every WatchInterval
}

func (l *netLab) state() fakes.State {
	st, err := fakes.LoadState(fakes.LabInfo{StateDir: filepath.Join(l.dir, "state")})
	if err != nil {
		l.t.Fatal(err)
	}
	return st
}

func (l *netLab) kernel() (table, rules, route string) {
	table, _ = runOut("ip", "netns", "exec", l.router, "nft", "list", "table", "inet", "surflare")
	rules = sh(l.t, "ip", "-n", l.router, "rule")
	route = sh(l.t, "ip", "-n", l.router, "route", "show", "table", "100")
	return
}

func runOut(args ...string) (string, error) {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	return string(out), err
}

func TestConnectInNamespacesTunnelsThroughTheChosenExit(t *testing.T) {
	l := newNetLab(t)
	wantOut := func(out string, code int, wantCode int, want string) {
		t.Helper()
		if code != wantCode || !strings.Contains(out, want) {
			t.Fatalf("want exit %d and %q, got %d:\n%s", wantCode, want, code, out)
		}
	}
	out, code := l.cli("login", "-u", "lab@example.test", "-p", fakes.LabPassword, "--remember")
	wantOut(out, code, 0, "Logged in")
	if e := l.echo(); e.IP != lab.WANRouter.String() || e.Country != "CN" {
		t.Fatalf("before connect the echo host should see the WAN address, got %+v", e)
	}

	out, code = l.cli("connect", "--node", "Los Angeles", "--transit", "Tokyo", "--daemon")
	wantOut(out, code, 0, "Connected")
	table, rules, route := l.kernel()
	for _, want := range []string{"tproxy ip to 127.0.0.1:10800", "set server_ports", "type route hook output priority mangle",
		"meta mark set 0x00000001", "meta mark 0x000000ff return", "icmp drop"} {
		if !strings.Contains(table, want) {
			t.Errorf("table inet surflare lacks %q:\n%s", want, table)
		}
	}
	if strings.Count(rules, "fwmark 0x1 lookup 100") != 1 || strings.Contains(rules, "fwmark 0x1/") {
		t.Errorf("want one unmasked fwmark 0x1 rule:\n%s", rules)
	}
	if !strings.Contains(route, "local default dev lo") {
		t.Errorf("table 100 route: %q", route)
	}

	// The proxy: right comm, own session, nothing inherited, pinned nofile.
	pid := l.state().ProxyPID
	if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) != fakes.ProxyName {
		t.Fatalf("proxy comm %q", comm)
	}
	if sid, _ := unix.Getsid(pid); sid != pid {
		t.Errorf("proxy session %d, want its own (%d)", sid, pid)
	}
	// The proxy inherits the caller's open descriptors (E5, the default
	// knob inherit_fds=1): a pipe this test process itself was handed by
	// `go test` (not close-on-exec) may ride along. The CLI's own output
	// pipes must not: the caller would wait on them for ever.
	own := map[string]bool{}
	if self, err := os.ReadDir("/proc/self/fd"); err == nil {
		for _, fd := range self {
			if target, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil {
				own[target] = true
			}
		}
	}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, fd := range fds {
		target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if strings.HasPrefix(target, "pipe:") && !own[target] {
			t.Errorf("proxy holds an inherited pipe: fd %s -> %s", fd.Name(), target)
		}
	}
	if limits, _ := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid)); !strings.Contains(string(limits), "Max open files            1024") {
		t.Errorf("proxy nofile not pinned:\n%s", limits)
	}
	if out, _ := l.cli("status"); !strings.Contains(out, "state: connected") || !strings.Contains(out, "node: Los Angeles") {
		t.Errorf("status:\n%s", out)
	}

	// Traffic from the router goes through tproxy -> relay -> exit.
	if e := l.echo(); e.IP != lab.Nodes[1].Addr.String() || e.Country != "US" {
		t.Fatalf("through the tunnel the echo host should see Los Angeles %s, got %+v", lab.Nodes[1].Addr, e)
	}

	// urltest failures reach the proxy log in the contract's format.
	l.faults(func(f *fakes.Faults) { f.Node503 = []string{"Miami"} })
	logPath := filepath.Join(l.dir, "log", "surflare-proxy.log")
	l.waitFor("urltest 503 line", 5*time.Second, func() bool {
		b, _ := os.ReadFile(logPath)
		return strings.Contains(string(b), "ERROR [") &&
			strings.Contains(string(b), "outbound/urltest[Miami via Tokyo]: unexpected status: 503 Service Unavailable")
	})

	// Domestic exit: the proxy goes direct, the echo host sees the WAN.
	l.faults(func(f *fakes.Faults) { f.Node503 = nil; f.DomesticExit = true })
	if e := l.echo(); e.IP != lab.WANRouter.String() || e.Country != "CN" {
		t.Fatalf("domestic exit: echo saw %+v", e)
	}
	l.faults(func(f *fakes.Faults) { f.DomesticExit = false })

	// A killed proxy leaves table and rule behind; connect then cannot
	// reach the account API.
	syscall.Kill(pid, syscall.SIGKILL)
	l.waitFor("proxy death", 3*time.Second, func() bool { return !proxyAlive(l.bin, pid) })
	out, code = l.cli("connect", "--node", "Dallas", "--daemon")
	wantOut(out, code, 1, "✘ Account check failed — Could not verify account status. Check network.")

	// disconnect cleans everything; connect works again.
	out, code = l.cli("disconnect")
	wantOut(out, code, 0, "Disconnected")
	table, rules, route = l.kernel()
	if table != "" && !strings.Contains(table, "No such file") || strings.Contains(rules, "lookup 100") || strings.TrimSpace(route) != "" {
		t.Fatalf("disconnect left state behind:\n%s\n%s\n%s", table, rules, route)
	}
	out, code = l.cli("connect", "--node", "Dallas", "--daemon")
	wantOut(out, code, 0, "Connected")
	if e := l.echo(); e.IP != lab.Nodes[0].Addr.String() {
		t.Fatalf("via auto transit to Dallas: echo saw %+v", e)
	}

	// Half disconnect: proxy gone, table/route stay, the rule doubles.
	l.faults(func(f *fakes.Faults) { f.DisconnectHalf = true })
	out, code = l.cli("disconnect")
	if code == 0 {
		t.Fatalf("half disconnect exited 0:\n%s", out)
	}
	table, rules, route = l.kernel()
	if !strings.Contains(table, "tproxy") || strings.Count(rules, "fwmark 0x1 lookup 100") != 2 || !strings.Contains(route, "local default") {
		t.Fatalf("half disconnect should leave table, two rules and the route:\n%s\n%s\n%s", table, rules, route)
	}
	if proxyAlive(l.bin, pid) || proxyAlive(l.bin, l.state().ProxyPID) {
		t.Fatal("half disconnect left the proxy running")
	}
}

func TestProxyLoopExhaustsDescriptors(t *testing.T) {
	l := newNetLab(t)
	if out, code := l.cli("login", "-u", "lab@example.test", "-p", fakes.LabPassword); code != 0 {
		t.Fatal(out)
	}
	if out, code := l.cli("connect", "--node", "Chicago", "--daemon"); code != 0 {
		t.Fatal(out)
	}
	pid := l.state().ProxyPID
	l.faults(func(f *fakes.Faults) { f.ProxyLoop = true })
	if code, body := l.get("http://" + lab.IPEcho[0].String() + "/"); code != 0 {
		t.Fatalf("a looping proxy answered: %d %s", code, body)
	}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	b, _ := os.ReadFile(filepath.Join(l.dir, "log", "surflare-proxy.log"))
	if len(fds) < 900 && !strings.Contains(string(b), "too many open files") {
		t.Fatalf("loop did not pile up connections: %d fds, log:\n%.2000s", len(fds), b)
	}
	t.Logf("proxy holds %d fds under proxy_loop", len(fds))
	l.cli("disconnect")
}
