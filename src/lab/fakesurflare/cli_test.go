package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"surflare-watchdog/src/lab"
	"surflare-watchdog/src/lab/fakes"
	"surflare-watchdog/src/lab/internet"
)

// envAsCLI makes the test binary behave as the surflare CLI, so tests can
// run it as a child process (on a pty, without a terminal, ...).
const envAsCLI = "FAKESURFLARE_TEST_AS_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(envAsCLI) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// apiLab is a lab dir whose account API runs on loopback.
type apiLab struct {
	dir  string
	info fakes.LabInfo
}

func newAPILab(t *testing.T) *apiLab {
	t.Helper()
	l := &apiLab{dir: t.TempDir()}
	base := netip.AddrFrom4([4]byte{127, byte(1 + rand.IntN(250)), byte(1 + rand.IntN(250)), 0})
	var tick atomic.Int64
	clock := func() time.Time { return time.Unix(tick.Add(1), 0) }
	cfg := internet.LoopbackConfig(base, fakes.NewWatcher(l.dir, clock))
	info := fakes.NewInfoWatcher(l.dir)
	cfg.Vendor = func() fakes.Vendor { return info.Current().Vendor }
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := internet.Start(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); srv.Wait() })
	l.info = fakes.DefaultLabInfo(l.dir, "test")
	l.info.APIURL = fmt.Sprintf("http://%s/", netip.AddrPortFrom(cfg.AccountAPI[0], cfg.HTTPPort))
	if err := l.info.Save(l.dir); err != nil {
		t.Fatal(err)
	}
	return l
}

func (l *apiLab) faults(t *testing.T, change func(*fakes.Faults)) {
	t.Helper()
	if _, err := fakes.Update(l.dir, time.Now(), change); err != nil {
		t.Fatal(err)
	}
}

// knobs sets vendor knobs in the lab's lab.json and waits out the account
// API's re-read interval.
func (l *apiLab) knobs(t *testing.T, kvs ...string) {
	t.Helper()
	for _, kv := range kvs {
		if err := fakes.ApplyKnob(&l.info, kv); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.info.Save(l.dir); err != nil {
		t.Fatal(err)
	}
	time.Sleep(fakes.WatchInterval + 50*time.Millisecond)
}

func (l *apiLab) cmd(args ...string) *exec.Cmd {
	c := exec.Command(os.Args[0], args...)
	c.Env = append(os.Environ(), envAsCLI+"=1", "SURFLARE_LAB_DIR="+l.dir)
	return c
}

// runCLI runs the CLI without a controlling terminal.
func (l *apiLab) runCLI(t *testing.T, args ...string) (string, int) {
	t.Helper()
	c := l.cmd(args...)
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // no controlling tty
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err := c.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), code
}

// ptyLogin runs "login -u EMAIL --remember" on a pty, answers the prompt
// with password, and returns everything the terminal showed and the code.
func (l *apiLab) ptyLogin(t *testing.T, password string) (string, int) {
	t.Helper()
	c := l.cmd("login", "-u", "user@lab.test", "--remember")
	f, err := pty.Start(c)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := readPty(f)
	if seen := out.until("Password: ", 5*time.Second); !strings.HasSuffix(seen, "Password: ") {
		c.Process.Kill()
		c.Wait()
		t.Fatalf("no password prompt on the terminal, got %q", seen)
	}
	io.WriteString(f, password+"\n")
	err = c.Wait()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	return out.rest(), code
}

// ptyOutput collects what a pty shows; pty masters may not support read
// deadlines, so a goroutine reads until the child is gone (EIO).
type ptyOutput struct {
	chunks chan []byte
	got    []byte
}

func readPty(f *os.File) *ptyOutput {
	o := &ptyOutput{chunks: make(chan []byte, 64)}
	go func() {
		defer close(o.chunks)
		buf := make([]byte, 256)
		for {
			n, err := f.Read(buf)
			if n > 0 {
				o.chunks <- append([]byte(nil), buf[:n]...)
			}
			if err != nil {
				return
			}
		}
	}()
	return o
}

// until waits until the output ends with want, the pty closes, or d passes.
func (o *ptyOutput) until(want string, d time.Duration) string {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for !bytes.HasSuffix(o.got, []byte(want)) {
		select {
		case c, ok := <-o.chunks:
			if !ok {
				return string(o.got)
			}
			o.got = append(o.got, c...)
		case <-timer.C:
			return string(o.got)
		}
	}
	return string(o.got)
}

// rest drains everything until the pty closes.
func (o *ptyOutput) rest() string {
	for c := range o.chunks {
		o.got = append(o.got, c...)
	}
	return string(o.got)
}

func TestPtyLoginAnswersPasswordPrompt(t *testing.T) {
	l := newAPILab(t)
	out, code := l.ptyLogin(t, fakes.LabPassword)
	if code != 0 || !strings.Contains(out, "Logged in as user@lab.test") {
		t.Fatalf("pty login: code %d, terminal:\n%s", code, out)
	}
	if strings.Contains(out, fakes.LabPassword) {
		t.Errorf("the password was echoed on the terminal:\n%s", out)
	}
	out, _ = l.runCLI(t, "status")
	if strings.Contains(out, "not logged in") || !strings.Contains(out, "account: user@lab.test") {
		t.Fatalf("status after login:\n%s", out)
	}
	out, code = l.ptyLogin(t, "wrong")
	if code == 0 || !strings.Contains(out, "invalid username/password") {
		t.Fatalf("wrong password on pty: code %d\n%s", code, out)
	}
}

func TestLoginWithoutTerminalOrPasswordFails(t *testing.T) {
	l := newAPILab(t)
	out, code := l.runCLI(t, "login", "-u", "user@lab.test", "--remember")
	if code == 0 || !strings.Contains(out, "no terminal") {
		t.Fatalf("code %d: %s", code, out)
	}
}

func TestLoginHangNeverPrompts(t *testing.T) {
	l := newAPILab(t)
	l.faults(t, func(f *fakes.Faults) { f.LoginHang = true })
	c := l.cmd("login", "-u", "user@lab.test", "--remember")
	f, err := pty.Start(c)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	exited := make(chan error, 1)
	go func() { exited <- c.Wait() }()
	got := readPty(f).until("Password: ", 700*time.Millisecond)
	select {
	case err := <-exited:
		t.Fatalf("login exited (%v) under login_hang", err)
	default:
	}
	c.Process.Kill()
	<-exited
	if strings.Contains(got, "Password") {
		t.Fatalf("login_hang still prompted: %q", got)
	}
}

func TestLoginAuthFaultsPrintContractStrings(t *testing.T) {
	l := newAPILab(t)
	for auth, want := range map[string]string{
		fakes.AuthRateLimited:  "429",
		fakes.AuthInvalid:      "invalid username/password",
		fakes.AuthSubscription: "Subscription expired",
		fakes.AuthDeviceLimit:  "Device limit",
		fakes.AuthAccountCheck: "Account check failed",
	} {
		l.faults(t, func(f *fakes.Faults) { f.Auth = auth })
		out, code := l.runCLI(t, "login", "-u", "user@lab.test", "-p", fakes.LabPassword, "--remember")
		if code == 0 || !strings.Contains(out, want) {
			t.Errorf("auth=%s: code %d, output %q, want %q", auth, code, out, want)
		}
	}
	l.faults(t, func(f *fakes.Faults) { f.Auth = fakes.AuthRateLimited })
	if out, _ := l.runCLI(t, "login", "-u", "user@lab.test", "-p", fakes.LabPassword); !strings.Contains(out, "Too Many Requests") {
		t.Errorf("429 login should also say Too Many Requests: %q", out)
	}
	// API down: a retryable network error, none of the fatal patterns.
	l.faults(t, func(f *fakes.Faults) { f.Auth = ""; f.APIDown = true })
	out, code := l.runCLI(t, "login", "-u", "user@lab.test", "-p", fakes.LabPassword)
	if code == 0 || !strings.Contains(out, "network error") {
		t.Fatalf("api_down login: code %d %q", code, out)
	}
	for _, fatal := range []string{"429", "Too Many Requests", "invalid username/password", "Subscription expired", "Device limit", "Account check failed"} {
		// As the client matches them: whole words, so "429" is not found in
		// an ephemeral port such as 127.0.0.1:42922.
		word := regexp.MustCompile(`(?i)(^|[^\pL\pN_])` + regexp.QuoteMeta(fatal) + `($|[^\pL\pN_])`)
		if word.MatchString(out) {
			t.Errorf("api_down login output %q contains fatal pattern %q", out, fatal)
		}
	}
}

func TestStatusReportsSessionProblems(t *testing.T) {
	l := newAPILab(t)
	if out, _ := l.runCLI(t, "status"); !strings.Contains(out, "not logged in") || !strings.Contains(out, "state: disconnected") {
		t.Fatalf("fresh status:\n%s", out)
	}
	if out, code := l.runCLI(t, "login", "-u", "a@b.c", "-p", fakes.LabPassword, "--remember"); code != 0 {
		t.Fatalf("login: %s", out)
	}
	l.faults(t, func(f *fakes.Faults) { f.Auth = fakes.AuthExpired })
	if out, _ := l.runCLI(t, "status"); !strings.Contains(out, "session expired") {
		t.Fatalf("status under expired fault:\n%s", out)
	}
	if out, code := l.runCLI(t, "connect", "--node", "Los Angeles", "--daemon"); code == 0 || !strings.Contains(out, "session expired") {
		t.Fatalf("connect with an expired session: %d %s", code, out)
	}
	if out, code := l.runCLI(t, "login", "-u", "a@b.c", "-p", fakes.LabPassword, "--remember"); code != 0 {
		t.Fatalf("re-login: %s", out)
	}
	if out, _ := l.runCLI(t, "status"); strings.Contains(out, "expired") {
		t.Fatalf("a new login should cure the expired session:\n%s", out)
	}
	l.faults(t, func(f *fakes.Faults) { f.Auth = fakes.AuthSubscription })
	if out, _ := l.runCLI(t, "status"); !strings.Contains(out, "subscription not active") {
		t.Fatalf("status under subscription fault:\n%s", out)
	}
}

func TestNodesAndConnectValidation(t *testing.T) {
	l := newAPILab(t)
	out, code := l.runCLI(t, "nodes")
	var want []string
	for _, n := range lab.Nodes {
		want = append(want, n.Name)
	}
	// E1: Tokyo is an exit too, by default.
	if code != 0 || out != strings.Join(append(slices.Clone(want), "Tokyo"), "\n")+"\n" {
		t.Fatalf("nodes: %d %q", code, out)
	}
	// The old list, and auto listed first.
	l.knobs(t, "exits=us", "auto=listed")
	if out, code := l.runCLI(t, "nodes"); code != 0 || out != strings.Join(append([]string{"auto"}, want...), "\n")+"\n" {
		t.Fatalf("nodes with exits=us auto=listed: %d %q", code, out)
	}
	l.knobs(t, "exits=Dallas,Tokyo", "auto=accepted")
	for _, args := range [][]string{
		{"connect", "--node", "Atlantis", "--daemon"},
		{"connect", "--node", "Los", "Angeles", "--daemon"},
		{"connect", "--node", "Dallas", "--transit", "Mars", "--daemon"},
		{"connect", "--node", "Dallas"},
	} {
		if out, code := l.runCLI(t, args...); code == 0 {
			t.Errorf("%q accepted: %s", args, out)
		}
	}
	// Valid arguments get as far as the session check.
	for _, args := range [][]string{
		{"connect", "--node", "Tokyo", "--daemon"},
		{"connect", "--node", "auto", "--mode", "direct", "--daemon"},
		{"connect", "--node", "Dallas", "--mode", "global", "--daemon"},
	} {
		if out, code := l.runCLI(t, args...); code == 0 || !strings.Contains(out, "not logged in") {
			t.Fatalf("%q before login: %d %s", args, code, out)
		}
	}
	// The old fake: no auto, no direct mode, the six US exits.
	l.knobs(t, "exits=us", "auto=off", "modes=rule,global")
	for _, args := range [][]string{
		{"connect", "--node", "auto", "--daemon"},
		{"connect", "--node", "Tokyo", "--daemon"},
		{"connect", "--node", "Dallas", "--mode", "direct", "--daemon"},
	} {
		if out, code := l.runCLI(t, args...); code == 0 || strings.Contains(out, "not logged in") {
			t.Errorf("%q accepted by the old fake: %d %s", args, code, out)
		}
	}
	if out, code := l.runCLI(t, "connect", "--node", "Los Angeles", "--daemon"); code == 0 || !strings.Contains(out, "not logged in") {
		t.Fatalf("connect before login: %d %s", code, out)
	}
	if _, code := l.runCLI(t, "bogus"); code != exitUsage {
		t.Fatalf("unknown command: code %d", code)
	}
}

// E10: the login knob removes the prompt (argv) or the -p form (pty).
func TestLoginForms(t *testing.T) {
	l := newAPILab(t)
	l.knobs(t, "login=argv")
	if out, code := l.runCLI(t, "login", "-u", "a@b.c", "--remember"); code != exitUsage || !strings.Contains(out, "-p PASSWORD is required") {
		t.Errorf("login=argv without -p: %d %s", code, out)
	}
	if out, code := l.runCLI(t, "login", "-u", "a@b.c", "-p", fakes.LabPassword, "--remember"); code != 0 {
		t.Errorf("login=argv with -p: %d %s", code, out)
	}
	l.knobs(t, "login=pty")
	if out, code := l.runCLI(t, "login", "-u", "a@b.c", "-p", fakes.LabPassword, "--remember"); code != exitUsage || !strings.Contains(out, "-p") {
		t.Errorf("login=pty with -p: %d %s", code, out)
	}
	if out, code := l.ptyLogin(t, fakes.LabPassword); code != 0 {
		t.Errorf("login=pty on a terminal: %d %s", code, out)
	}
}

// E9: an expired token fails connect with "Account check failed" while
// status stays silent, or (token_expiry=status) status says so.
func TestTokenExpiry(t *testing.T) {
	l := newAPILab(t)
	l.knobs(t, "token_ttl=1s")
	if out, code := l.runCLI(t, "login", "-u", "a@b.c", "-p", fakes.LabPassword, "--remember"); code != 0 {
		t.Fatalf("login: %s", out)
	}
	time.Sleep(1100 * time.Millisecond)
	if out, _ := l.runCLI(t, "status"); strings.Contains(out, "expired") {
		t.Errorf("token_expiry=account_check: status knows of the expiry:\n%s", out)
	}
	if out, code := l.runCLI(t, "connect", "--node", "Dallas", "--daemon"); code == 0 || !strings.Contains(out, "Account check failed") {
		t.Errorf("connect with an expired token: %d %s", code, out)
	}
	l.knobs(t, "token_expiry=status")
	if out, _ := l.runCLI(t, "status"); !strings.Contains(out, "session expired") {
		t.Errorf("token_expiry=status: status silent:\n%s", out)
	}
	l.knobs(t, "token_ttl=0")
	if out, _ := l.runCLI(t, "status"); strings.Contains(out, "expired") {
		t.Errorf("token_ttl=0: still expired:\n%s", out)
	}
}

// E9: a tunnel-only (or lossy) API resets a caller that is not an exit.
func TestAPIAccessKnobs(t *testing.T) {
	l := newAPILab(t)
	login := func() (string, int) {
		return l.runCLI(t, "login", "-u", "a@b.c", "-p", fakes.LabPassword, "--remember")
	}
	for _, kv := range []string{"api_access=tunnel", "api_loss=100"} {
		l.knobs(t, "api_access=any", "api_loss=0", kv)
		if out, code := login(); code == 0 || !strings.Contains(out, "network error") {
			t.Errorf("%s: login from outside the tunnel: %d %s", kv, code, out)
		}
	}
	l.knobs(t, "api_access=any", "api_loss=0")
	if out, code := login(); code != 0 {
		t.Errorf("api_access=any: %d %s", code, out)
	}
}
