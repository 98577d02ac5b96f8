package lab

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The browser layer (DESIGN §7.5): headless Chromium, driven by
// htdocs/test/browser.mjs through playwright-core, opens the daemon's live
// view in the lab as a user would — through a relay on the host's
// loopback — and this test checks what the script saw against the daemon's
// own status.

// browserChromium is Debian's chromium, which playwright-core drives (no
// browser download).
const browserChromium = "/usr/bin/chromium"

// browserChecks is how many checks browser.mjs runs with a fault hook: no
// token, live state, rotate, fault, polling, "never" for zero times (and
// the loop guard's mode), ages and the health strip, a WAN outage, a
// missing client on a phone, stale values, phone, no script errors.
const browserChecks = 12

// browserLuCIChecks is how many checks luci.mjs runs: status, nodes and log
// views, five settings checks (three on credentials, two on the fast signal
// and 503 switches), the status view's "never" for zero times and loop
// guard mode.
const browserLuCIChecks = 9

// browserFaultPattern is what a dead exit must add to the timeline: the
// failed health check (a PROXY_BROKEN-style outcome) or the daemon leaving
// healthy for degraded (or losing the node). A row from the rotation before the fault does not count: the
// script only looks at rows added after the injection.
// The timeline speaks plain words (the codes are in the rows' tooltips).
const browserFaultPattern = `check failed|working, with trouble|offline \(kill switch on\)`

// browserTools finds node, chromium and playwright-core (installed by
// scripts/setup-debian.sh into build/browser), or says what is missing.
func browserTools(root string) (node, modules, missing string) {
	node, err := exec.LookPath("node")
	if err != nil {
		return "", "", "node is not installed"
	}
	if _, err := os.Stat(browserChromium); err != nil {
		return "", "", browserChromium + " is missing (apt-get install chromium, or bash scripts/setup-debian.sh)"
	}
	modules = filepath.Join(root, "build", "browser")
	if _, err := os.Stat(filepath.Join(modules, "node_modules", "playwright-core", "package.json")); err != nil {
		return "", "", "playwright-core is not in " + modules + " (run bash scripts/setup-debian.sh)"
	}
	return node, modules, ""
}

// labWebToken is the bearer token the daemon reads from the lab config's
// web token_file.
func labWebToken(t *testing.T, l *Lab) string {
	t.Helper()
	cfg, err := os.ReadFile(l.DaemonConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*option token_file '([^']+)'`).FindSubmatch(cfg)
	if m == nil {
		t.Fatalf("the lab config has no web token_file:\n%s", cfg)
	}
	b, err := os.ReadFile(string(m[1]))
	if err != nil {
		t.Fatalf("web token: %v", err)
	}
	return strings.TrimSpace(string(b))
}

// faultHook is an HTTP endpoint on the host's loopback that browser.mjs
// POSTs to once the page is live and rotated: it notes the daemon's node at
// that moment and takes that node down in the lab.
type faultHook struct {
	l   *Lab
	mu  sync.Mutex
	at  DaemonState // the daemon's status just before the injection
	err error
}

func (h *faultHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 14*time.Second)
	defer cancel()
	// The page's rotate may still be verifying the new node: take it down
	// only once the daemon calls it healthy, so the fault is always seen
	// from the same state (a failed health check, not a failed connect).
	start := time.Now()
	st, err := h.l.WaitDaemon(ctx, 10*time.Second, DaemonState.Healthy)
	if err == nil {
		err = h.l.Fault(ctx, FaultNodeDown, true, st.Node)
	}
	h.mu.Lock()
	h.at, h.err = st, err
	h.mu.Unlock()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	fmt.Fprintf(w, "%s %s (daemon %s after %s)", FaultNodeDown, st.Node, st.State, time.Since(start).Round(time.Millisecond))
}

func (h *faultHook) result() (DaemonState, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.at, h.err
}

func TestBrowserLiveViewAgainstDaemon(t *testing.T) {
	needRoot(t)
	wd, _ := os.Getwd()
	root, err := FindRepoRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	node, modules, missing := browserTools(root)
	if missing != "" {
		t.Skip("browser test: " + missing)
	}
	t0 := time.Now()
	l := upDaemon(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	first, err := l.WaitDaemon(ctx, 30*time.Second, DaemonState.Healthy)
	if err != nil {
		t.Fatalf("%v\nstatus: %s", err, first.Raw)
	}
	tHealthy := time.Since(t0)

	relay, err := l.ForwardTCP(ctx, "127.0.0.1:0", RoleRouter, fmt.Sprintf("%s:%d", LANRouter, LabWebPort))
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + relay.Addr().String() + "/"
	token := labWebToken(t, l)

	// The API itself refuses a request without the token (the script checks
	// that the page does not even try).
	resp, err := http.Get(base + "api/v1/status")
	if err != nil {
		t.Fatalf("web UI through the relay: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /api/v1/status without a token: HTTP %d, want 401", resp.StatusCode)
	}

	hook := &faultHook{l: l}
	hookLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hookSrv := &http.Server{Handler: hook}
	go hookSrv.Serve(hookLn)
	t.Cleanup(func() { hookSrv.Close() })

	out := filepath.Join(root, "build", "artifacts", "browser")
	if err := os.RemoveAll(out); err != nil {
		t.Fatal(err)
	}
	script := func(name string) string { return filepath.Join(root, "htdocs", "test", name) }

	// The LuCI views first (they rotate too), on LuCI's own origin
	// (http://127.0.0.1, port 80) so the daemon lets the status view's
	// websocket in as it would on the router.
	var luciTook time.Duration
	if ln, err := net.Listen("tcp", "127.0.0.1:80"); err != nil {
		t.Logf("LuCI views not run: port 80 on 127.0.0.1 is taken (%v)", err)
	} else {
		ln.Close()
		var luciOut string
		luciOut, luciTook = runScript(t, ctx, node, browserLuCIChecks, script("luci.mjs"),
			"--api", strings.TrimSuffix(base, "/"), "--token", token, "--port", "80",
			"--out", out, "--modules", modules)
		if !strings.Contains(luciOut, "password state: stored") {
			t.Error("the settings view did not show the daemon's stored password")
		}
	}

	first, err = l.WaitDaemon(ctx, 20*time.Second, DaemonState.Healthy)
	if err != nil {
		t.Fatalf("before the live view: %v\nstatus: %s", err, first.Raw)
	}
	output, scriptTook := runScript(t, ctx, node, browserChecks, script("browser.mjs"),
		"--url", base, "--token", token, "--out", out, "--modules", modules,
		"--fault-url", "http://"+hookLn.Addr().String()+"/fault",
		"--fault-pattern", browserFaultPattern, "--timeout-ms", "15000")
	if strings.Contains(output, token) {
		t.Error("the script's output contains the token")
	}

	// What the page showed against what the daemon says: the rotate click
	// moved the daemon to the node the page chose, and that is the node the
	// fault then took down.
	var from, to string
	if rm := regexp.MustCompile(`(?m)^\s+rotated (.+) -> (.+)$`).FindStringSubmatch(output); rm != nil {
		from, to = rm[1], rm[2]
	}
	at, hookErr := hook.result()
	switch {
	case hookErr != nil:
		t.Errorf("fault hook: %v", hookErr)
	case at.Node == "":
		t.Error("the script never called the fault hook")
	case to == "":
		t.Error("the script did not report its rotation")
	default:
		if from != first.Node {
			t.Errorf("the page showed node %q before rotating; the daemon was on %q", from, first.Node)
		}
		if at.Node != to || at.Node == first.Node {
			t.Errorf("after the page rotated %s -> %s the daemon was on %q", from, to, at.Node)
		}
		if at.Counters.Rotations < 1 {
			t.Errorf("the daemon counts %d rotations after the page's rotate", at.Counters.Rotations)
		}
	}

	// The daemon itself left the node the fault took down.
	if at.Node != "" {
		st, err := l.WaitDaemon(ctx, 20*time.Second, func(s DaemonState) bool { return s.Healthy() && s.Node != at.Node })
		if err != nil {
			t.Errorf("the daemon did not recover from %s down: %v\nstatus: %s", at.Node, err, st.Raw)
		}
	}

	shots := []string{"01-no-token.png", "02-live.png", "03-rotated.png", "04-fault.png", "05-polling.png", "06-phone.png", "07-never.png",
		"08-ages.png", "09-wan-down.png", "10-no-client-phone.png", "11-stale.png"}
	if luciTook > 0 {
		shots = append(shots, "luci-status.png", "luci-nodes.png", "luci-log.png", "luci-settings.png",
			"luci-settings-fastsignal.png", "luci-status-never.png")
	}
	for _, name := range shots {
		if err := checkPNG(filepath.Join(out, name)); err != nil {
			t.Error(err)
		}
	}
	t.Logf("lab + daemon healthy in %s, luci.mjs %s, browser.mjs %s, total %s; screenshots in %s",
		tHealthy.Round(time.Millisecond), luciTook.Round(time.Millisecond), scriptTook.Round(time.Millisecond),
		time.Since(t0).Round(time.Millisecond), out)
}

// runScript runs a node test script, logs its output and fails the test
// unless it ends with "want passed, 0 failed". It returns the output and
// how long the script took.
func runScript(t *testing.T, ctx context.Context, node string, want int, script string, args ...string) (string, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{script}, args...)...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	name := filepath.Base(script)
	t.Logf("%s (%s):\n%s", name, took.Round(time.Millisecond), buf.String())
	m := regexp.MustCompile(`(?m)^(\d+) passed, (\d+) failed$`).FindStringSubmatch(buf.String())
	if m == nil {
		t.Errorf("%s gave no summary (%v)", name, err)
		return buf.String(), took
	}
	if passed, _ := strconv.Atoi(m[1]); m[2] != "0" || passed != want || err != nil {
		t.Errorf("%s: %s passed, %s failed (want %d passed, 0 failed; exit %v)", name, m[1], m[2], want, err)
	}
	return buf.String(), took
}

// checkPNG reports whether path is a non-trivial PNG file.
func checkPNG(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("screenshot: %w", err)
	}
	defer f.Close()
	head := make([]byte, 8)
	if _, err := bufio.NewReader(f).Read(head); err != nil || !bytes.Equal(head, []byte("\x89PNG\r\n\x1a\n")) {
		return fmt.Errorf("screenshot %s is not a PNG", path)
	}
	if fi, err := f.Stat(); err != nil || fi.Size() < 2000 {
		return fmt.Errorf("screenshot %s is suspiciously small", path)
	}
	return nil
}
