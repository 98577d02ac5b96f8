package luciapp

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// luciBoxChecks is how many checks luci-box.mjs runs: live over http,
// nodes rotate, log lines, settings save and apply, password, live over
// https, redirect_https, read-only user, phone, no script errors.
const luciBoxChecks = 10

// chromium is Debian's, driven by playwright-core (no browser download).
const chromium = "/usr/bin/chromium"

// The vendor fake's probe targets: the router's "tunnel" probes reach a
// server in the client's namespace (the fake connects no tunnel: marked
// packets find no route in table 100 and take the LAN), which says the
// exit is in the US. That makes the daemon healthy, so a rotation is the
// transitions healthy → connecting → healthy the page must see pushed.
const probeExit = `{"ip":"198.51.100.7","country":"US"}`

// TestLuCIInRealBrowser is luci-app-surflare in the real LuCI of the
// OpenWrt box, used by headless Chromium from a LAN client: root over http,
// https and with redirect_https, and a read-only user (see luci-box.mjs).
func TestLuCIInRealBrowser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: boots the OpenWrt box in network namespaces")
	}
	wd, _ := os.Getwd()
	root := filepath.Clean(filepath.Join(wd, "..", ".."))
	owrt := filepath.Join(root, "..", "shared", "owrt")
	if _, err := os.Stat(filepath.Join(owrt, "boot.sh")); err != nil {
		t.Skipf("no OpenWrt box beside the repository (%s): the real LuCI is not here", owrt)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed (bash scripts/setup-debian.sh)")
	}
	modules := filepath.Join(root, "build", "browser")
	for _, need := range []string{chromium, filepath.Join(modules, "node_modules", "playwright-core", "package.json")} {
		if _, err := os.Stat(need); err != nil {
			t.Skipf("%s is missing (bash scripts/setup-debian.sh)", need)
		}
	}
	core := newestFile(filepath.Join(root, "build", "ipk", "surflare-watchdog_*_x86_64.ipk"))
	app := newestFile(filepath.Join(root, "build", "ipk", "luci-app-surflare_*_all.ipk"))
	if core == "" || app == "" {
		t.Skip("no packages in build/ipk (make ipk)")
	}
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	n := upTestNet(t)
	probeURL := serveProbes(t, n.Client)
	b := bootBox(t, ctx, owrt, n.Box)
	tBoot := time.Since(t0)

	// Install as an owner would, with the vendor fake in place of the
	// proprietary client (opkg exits 255: the box has no kmod packages).
	b.put(core, "/tmp/"+filepath.Base(core), 0o644)
	b.put(app, "/tmp/"+filepath.Base(app), 0o644)
	b.put(filepath.Join(wd, "testdata", "surflare"), "/usr/bin/surflare", 0o755)
	b.sh(ctx, fmt.Sprintf("opkg install --force-depends /tmp/%s /tmp/%s", filepath.Base(core), filepath.Base(app)))
	if out := b.must(ctx, "opkg list-installed"); !strings.Contains(out, "surflare-watchdog") || !strings.Contains(out, "luci-app-surflare") {
		t.Fatalf("opkg did not install both packages:\n%s", out)
	}

	secret := `Vendor "pass" ` + randHex(t)
	viewer, viewerPW := "viewer", "view-"+randHex(t)
	b.must(ctx, strings.Join([]string{
		// the box's LAN is eth0 (no br-lan, see its README); probes to the client
		"uci set surflare.main.lan_interface=eth0",
		"uci set surflare.search=probe", "uci set surflare.search.kind=search", "uci set surflare.search.url=" + probeURL + "/generate_204",
		"uci set surflare.echo=probe", "uci set surflare.echo.kind=ip-echo", "uci set surflare.echo.url=" + probeURL + "/ip",
		// every other target of the shipped config is a real host: the test's
		// server instead, or gone (the box has no route out, but no test
		// config names a public host)
		"for p in cdn1 cdn2 echo1 echo2 echo3 lan; do uci -q delete surflare.$p || true; done",
		"uci set surflare.storm503.probe_url=" + probeURL + "/generate_204",
		"uci set surflare.paths.chnroute_url=" + probeURL + "/delegated",
		"uci commit surflare",
		// an account set up as an owner does (LuCI replaces the password
		// later), and a default route: without either the daemon's
		// preflight rightly tries no node
		"echo lab-first-password | surflare-watchdog credentials set --username first@surflare.test",
		"(ip route add default via " + clientAddr + " dev eth0 || true)",
		// a LuCI user with the read ACL only (rpcd login, md5-crypt password)
		"h=$(/usr/libexec/px5g-openssl passwd -1 " + shQuote(viewerPW) + ")", "s=$(uci add rpcd login)",
		"uci set rpcd.$s.username=" + viewer, `uci set rpcd.$s.password="$h"`,
		"for g in unauthenticated luci-base luci-base-network-status luci-app-surflare; do uci add_list rpcd.$s.read=$g; done",
		"uci commit rpcd", "/etc/init.d/rpcd reload", "/etc/init.d/surflare-watchdog restart",
	}, " && "))
	b.waitFor(ctx, "the daemon healthy", "ubus call surflare status", `"state": "healthy"`, 90*time.Second)
	tReady := time.Since(t0)

	out := filepath.Join(root, "build", "artifacts", "luci")
	if err := os.RemoveAll(out); err != nil {
		t.Fatal(err)
	}
	output := runBrowser(t, ctx, n, node, filepath.Join(root, "htdocs", "test", "luci-box.mjs"), map[string]func(){
		"redirect_https": func() {
			b.must(ctx, "uci set uhttpd.main.redirect_https=1 && uci commit uhttpd && /etc/init.d/uhttpd restart")
			waitRedirect(t, ctx, n.Client)
		},
	}, "--host", "192.168.1.1", "--password", "surflare-test", "--viewer", viewer, "--viewer-password", viewerPW,
		"--secret", secret, "--out", out, "--modules", modules)

	// What the browser did, as the router sees it: the password is in the
	// daemon's own file (0600) and nowhere else, not in uci's config or its
	// staged changes, nor in the log.
	files := strings.Fields(b.must(ctx, "grep -rlF -- "+shQuote(secret)+" /etc /tmp /overlay 2>/dev/null; logread | grep -cF -- "+shQuote(secret)+"; true"))
	var holders []string
	for _, f := range files {
		if f != "0" {
			holders = append(holders, f)
		}
	}
	if len(holders) != 1 || holders[0] != "/etc/surflare/credentials" {
		t.Errorf("the password is in %q, want only /etc/surflare/credentials (and not in the log)", holders)
	} else if mode := strings.TrimSpace(b.must(ctx, "stat -c %a /etc/surflare/credentials")); mode != "600" {
		t.Errorf("/etc/surflare/credentials has mode %s, want 600", mode)
	}

	var shots []string
	for _, m := range regexp.MustCompile(`(?m)^screenshot (.+)$`).FindAllStringSubmatch(output, -1) {
		shots = append(shots, m[1])
		if err := checkPNG(m[1]); err != nil {
			t.Error(err)
		}
	}
	if len(shots) < 10 {
		t.Errorf("%d screenshots, want desktop and phone ones (10 or more)", len(shots))
	}
	t.Logf("box booted in %s, ready in %s, total %s; screenshots:\n  %s", tBoot.Round(time.Millisecond),
		tReady.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond), strings.Join(shots, "\n  "))
}

// runBrowser runs luci-box.mjs in the client's namespace, does the steps it
// asks for ("@@ NAME" on its output, answered "go" on its input), and
// fails the test unless it ends with luciBoxChecks passed and 0 failed.
func runBrowser(t *testing.T, ctx context.Context, n *testNet, node, script string, steps map[string]func(), args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.Client, node, script}, args...)...)
	// its own process group: Chromium and its helpers end with it
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // whatever is left of the group
	var buf strings.Builder
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		buf.WriteString(line + "\n")
		if name, ok := strings.CutPrefix(line, "@@ "); ok {
			step := steps[name]
			if step == nil {
				t.Errorf("luci-box.mjs asked for an unknown step %q", name)
				io.WriteString(stdin, "no\n")
				continue
			}
			step()
			io.WriteString(stdin, "go\n")
		}
	}
	stdin.Close()
	err = cmd.Wait()
	output := buf.String()
	t.Logf("luci-box.mjs (%s):\n%s", time.Since(start).Round(time.Millisecond), output)
	m := regexp.MustCompile(`(?m)^(\d+) passed, (\d+) failed$`).FindStringSubmatch(output)
	if m == nil {
		t.Fatalf("luci-box.mjs gave no summary (%v)", err)
	}
	if passed, _ := strconv.Atoi(m[1]); passed != luciBoxChecks || m[2] != "0" || err != nil {
		t.Errorf("luci-box.mjs: %s passed, %s failed (want %d passed, 0 failed; exit %v)", m[1], m[2], luciBoxChecks, err)
	}
	return output
}

// serveProbes answers the daemon's probes from the client's namespace: 204
// for the search probe, the exit for the IP echo. It returns the base URL.
func serveProbes(t *testing.T, ns string) string {
	t.Helper()
	ln, err := listenIn(ns, clientAddr+":0")
	if err != nil {
		t.Fatalf("probe server: %v", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/generate_204" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, probeExit)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// waitRedirect waits until the box's uhttpd, restarted, answers http with a
// redirect to https and accepts https connections (from the client).
func waitRedirect(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	client := &http.Client{
		Timeout:       2 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return dialIn(ctx, ns, network, addr)
		}},
	}
	end := time.Now().Add(20 * time.Second)
	for {
		resp, err := client.Get("http://192.168.1.1/cgi-bin/luci/")
		if err == nil {
			resp.Body.Close()
			if loc := resp.Header.Get("Location"); resp.StatusCode/100 == 3 && strings.HasPrefix(loc, "https://") {
				if c, err := dialIn(ctx, ns, "tcp", "192.168.1.1:443"); err == nil {
					c.Close()
					return
				}
			}
		}
		if time.Now().After(end) {
			t.Fatalf("uhttpd did not come back redirecting to https (last: %v)", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func randHex(t *testing.T) string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// checkPNG reports whether path is a non-trivial PNG file.
func checkPNG(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("screenshot: %w", err)
	}
	if !strings.HasPrefix(string(b), "\x89PNG\r\n\x1a\n") || len(b) < 2000 {
		return fmt.Errorf("screenshot %s is not a PNG of a page", path)
	}
	return nil
}
