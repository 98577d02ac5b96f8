package luciapp

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// boxRunDir is where boot.sh keeps a running box's state (its README).
const boxRunDir = "/run/owrtbox"

// box is the OpenWrt box booted in a namespace of the test's network with
// the box's own scripts (boot.sh, enter.sh, shutdown.sh).
type box struct {
	t    *testing.T
	dir  string // the box: boot.sh and friends
	ns   string
	root string // its root as the host sees it: /proc/PID/root
}

// bootBox boots the box in ns and stops it when the test ends (before the
// namespace goes: register the network first).
func bootBox(t *testing.T, ctx context.Context, dir, ns string) *box {
	t.Helper()
	b := &box{t: t, dir: dir, ns: ns}
	t.Cleanup(func() {
		out, err := exec.Command(filepath.Join(dir, "shutdown.sh"), ns, "15").CombinedOutput()
		if err != nil {
			t.Errorf("stopping the box: %v: %s", err, out)
		}
		// shutdown.sh keeps the box's syslog and console beside its run
		// directory: show the syslog's end when the test failed, then drop both
		logFile := filepath.Join(boxRunDir, ns+".log")
		if log, err := os.ReadFile(logFile); err == nil && t.Failed() {
			lines := strings.Split(strings.TrimSpace(string(log)), "\n")
			t.Logf("the box's syslog, last lines:\n%s", strings.Join(lines[max(0, len(lines)-60):], "\n"))
		}
		os.Remove(logFile)
		os.Remove(filepath.Join(boxRunDir, ns+".console.log"))
	})
	out, err := exec.CommandContext(ctx, filepath.Join(dir, "boot.sh"), ns, "--wait", "60").Output()
	if err != nil {
		t.Fatalf("booting the box: %v\n%s", err, exitText(err))
	}
	fields := strings.Fields(string(out))
	if len(fields) == 0 {
		t.Fatal("boot.sh printed no PID")
	}
	pid, err := strconv.Atoi(fields[len(fields)-1])
	if err != nil {
		t.Fatalf("boot.sh printed %q", out)
	}
	b.root = fmt.Sprintf("/proc/%d/root", pid)
	return b
}

// sh runs an ash script inside the box and returns its output.
func (b *box) sh(ctx context.Context, script string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(b.dir, "enter.sh"), b.ns, script)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (b *box) must(ctx context.Context, script string) string {
	b.t.Helper()
	out, err := b.sh(ctx, script)
	if err != nil {
		b.t.Fatalf("in the box: %s: %v\n%s", script, err, out)
	}
	return out
}

// put copies a host file into the box.
func (b *box) put(src, dst string, mode os.FileMode) {
	b.t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b.root, dst), data, mode); err != nil {
		b.t.Fatalf("copying %s into the box: %v", src, err)
	}
}

// waitFor runs script in the box until its output contains want.
func (b *box) waitFor(ctx context.Context, what, script, want string, d time.Duration) string {
	b.t.Helper()
	end := time.Now().Add(d)
	for {
		out, _ := b.sh(ctx, script)
		if strings.Contains(out, want) {
			return out
		}
		if time.Now().After(end) || ctx.Err() != nil {
			b.t.Fatalf("%s: no %q after %s:\n%s", what, want, d, out)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// shQuote quotes s for a shell.
func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func exitText(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(bytes.TrimSpace(ee.Stderr))
	}
	return ""
}

// newestFile is the newest file matching pattern, or "".
func newestFile(pattern string) string {
	m, _ := filepath.Glob(pattern)
	sort.Slice(m, func(i, j int) bool {
		a, _ := os.Stat(m[i])
		b, _ := os.Stat(m[j])
		return a.ModTime().After(b.ModTime())
	})
	if len(m) == 0 {
		return ""
	}
	return m[0]
}
