package lab

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"surflare-watchdog/src/lab/fakes"
)

// Issue 12 in the lab: the daemon's own re-login never puts the password on
// a command line, the scan that proves it does see a password passed in
// argv, and a missing or unsafe password file gives a clear status without
// a login storm.

// cmdlineScan reads every /proc/*/cmdline in a tight loop until ctx ends
// and records the command lines (of this lab's binaries only: other tests
// on the machine may legitimately pass the lab password around) that
// contain secret.
type cmdlineScan struct {
	mu    sync.Mutex
	hits  []string
	scans int
}

func scanCmdlines(ctx context.Context, labDir, secret string) *cmdlineScan {
	s := &cmdlineScan{}
	go func() {
		sec, lab := []byte(secret), []byte(labDir)
		for ctx.Err() == nil {
			ents, _ := os.ReadDir("/proc")
			for _, e := range ents {
				if e.Name()[0] < '0' || e.Name()[0] > '9' {
					continue
				}
				b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
				if err != nil || !bytes.Contains(b, sec) || !bytes.Contains(b, lab) {
					continue
				}
				line := strings.ReplaceAll(string(b), "\x00", " ")
				s.mu.Lock()
				s.hits = append(s.hits, e.Name()+": "+strings.ReplaceAll(line, secret, "<password>"))
				s.mu.Unlock()
			}
			s.mu.Lock()
			s.scans++
			s.mu.Unlock()
			time.Sleep(time.Millisecond)
		}
	}()
	return s
}

func (s *cmdlineScan) result() (hits []string, scans int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.hits...), s.scans
}

func loginAttempts(s DaemonState) int {
	n, _ := rawField(s.Raw, "counters", "login_attempts").(float64)
	return int(n)
}

// forceLogin expires the vendor session and asks the daemon to reconnect:
// its connect sees "session expired" and logs in again. reconnect waits
// for that login and the connect after it; forceLogin returns what it
// said and whether it succeeded (exit 0).
func forceLogin(t *testing.T, ctx context.Context, l *Lab) (string, bool) {
	t.Helper()
	if err := l.Fault(ctx, FaultAuth, true, "expired"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the fakes re-read faults.json within 200 ms
	out, err := l.CommandContext(ctx, RoleRouter, l.DaemonBinary(), "reconnect", "--config", l.DaemonConfigPath()).CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("reconnect: %v %s", err, out)
	}
	return string(out), err == nil
}

// reLogin runs a forced re-login under the scan and returns what it saw.
func reLogin(t *testing.T, sets ...string) (hits []string, scans, attempts int, l *Lab) {
	l = upDaemon(t, sets...)
	ctx := context.Background()
	st, err := l.WaitDaemon(ctx, 20*time.Second, DaemonState.Healthy)
	if err != nil {
		t.Fatal(err)
	}
	before := loginAttempts(st)
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	scan := scanCmdlines(sctx, l.Dir, fakes.LabPassword)
	time.Sleep(50 * time.Millisecond)
	if out, ok := forceLogin(t, ctx, l); !ok || !strings.HasPrefix(out, "reconnected to Dallas in ") {
		t.Errorf("reconnect through a re-login: %q", out)
	}
	st, err = l.WaitDaemon(ctx, 20*time.Second, func(s DaemonState) bool { return s.Healthy() && loginAttempts(s) > before })
	if err != nil {
		t.Fatalf("no successful re-login: %v\n%s", err, st.Raw)
	}
	time.Sleep(100 * time.Millisecond)
	stop()
	hits, scans = scan.result()
	if a := rawField(st.Raw, "signals", "auth", "state"); a != "ok" {
		t.Errorf("auth state after the re-login: %v", a)
	}
	out, err := l.Surflare(ctx, "status")
	if err != nil || !strings.Contains(out, "account: "+LabUsername) {
		t.Errorf("the vendor is not logged in after the re-login: %v\n%s", err, out)
	}
	return hits, scans, loginAttempts(st) - before, l
}

func TestDaemonLoginKeepsPasswordOffCmdlines(t *testing.T) {
	hits, scans, attempts, l := reLogin(t, "surflare.auth=auth", "surflare.auth.login_mode=pty")
	t.Logf("pty login: %d attempt(s), %d scans of /proc/*/cmdline, %d hits", attempts, scans, len(hits))
	if len(hits) > 0 {
		t.Errorf("the password was on a command line:\n%s", strings.Join(hits, "\n"))
	}
	if !strings.Contains(l.DaemonLog(), "Login succeeded") {
		t.Error("the log does not say the login succeeded")
	}
}

// The control: in argv mode (-p PASSWORD) the same scan finds it.
func TestDaemonLoginArgvModeIsSeenByTheScan(t *testing.T) {
	hits, scans, attempts, _ := reLogin(t, "surflare.auth=auth", "surflare.auth.login_mode=argv")
	t.Logf("argv login: %d attempt(s), %d scans, %d hits", attempts, scans, len(hits))
	if len(hits) == 0 {
		t.Error("the scan did not see the password passed with -p: it proves nothing in pty mode either")
	} else {
		t.Logf("seen: %s", hits[0])
	}
}

// A missing password file, then one with unsafe permissions: the daemon
// says why in its status, and a reconnect that would need a login is
// refused with the cause (the preflight's credentials check) instead of
// trying, so there is no login storm and the working tunnel stays; a fixed
// file and a reconnect bring the login back.
func TestDaemonLoginWithoutUsableCredentials(t *testing.T) {
	l := upDaemon(t)
	ctx := context.Background()
	if _, err := l.WaitDaemon(ctx, 20*time.Second, DaemonState.Healthy); err != nil {
		t.Fatal(err)
	}
	pw := l.PasswordPath()
	if err := os.Remove(pw); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		prepare func()
		problem string // in the status's credentials problem
	}{
		{"missing", func() {}, "no password"},
		{"unsafe mode", func() {
			if err := os.WriteFile(pw, []byte(fakes.LabPassword+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			os.Chmod(pw, 0o644)
		}, ""},
	} {
		c.prepare()
		st, err := l.DaemonStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		before := loginAttempts(st)
		if out, ok := forceLogin(t, ctx, l); ok || !strings.Contains(out, "not trying nodes") || !strings.Contains(out, pw) {
			t.Errorf("%s: reconnect without usable credentials: output %s; want a refusal (exit 1) naming %s", c.name, out, pw)
		}
		t0 := time.Now()
		time.Sleep(5 * time.Second)
		st, err = l.DaemonStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n := loginAttempts(st) - before
		problem, _ := rawField(st.Raw, "daemon", "credentials", "problem").(string)
		detail, _ := rawField(st.Raw, "why", "detail").(string)
		t.Logf("%s: state %s, %d login attempt(s) in %s, credentials problem %q, why detail %q",
			c.name, st.State, n, time.Since(t0).Round(100*time.Millisecond), problem, detail)
		if n != 0 {
			t.Errorf("%s: %d login attempts: a credentials problem must not be tried", c.name, n)
		}
		if !strings.Contains(problem, pw) {
			t.Errorf("%s: the status must name the password file: problem %q", c.name, problem)
		}
		if c.problem != "" && !strings.Contains(problem, c.problem) {
			t.Errorf("%s: want %q in the status, got %q", c.name, c.problem, problem)
		}
		if strings.Contains(string(st.Raw), fakes.LabPassword) {
			t.Errorf("%s: the status contains the password", c.name)
		}
	}
	// Fixed: a user command clears the fatal error and the login works.
	if err := os.Chmod(pw, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := l.Exec(ctx, RoleRouter, l.DaemonBinary(), "reconnect", "--config", l.DaemonConfigPath()); err != nil {
		t.Fatalf("reconnect: %v %s", err, out)
	}
	if st, err := l.WaitDaemon(ctx, 20*time.Second, DaemonState.Healthy); err != nil {
		t.Fatalf("no recovery once the file is fixed: %v\n%s", err, st.Raw)
	}
}
