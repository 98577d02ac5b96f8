package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"surflare-watchdog/src/control"
)

// fakeDaemon serves the control socket in runDir and records requests.
type fakeDaemon struct {
	mu   sync.Mutex
	reqs []control.Request
}

func (f *fakeDaemon) Handle(ctx context.Context, req control.Request) (any, error) {
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.mu.Unlock()
	switch req.Cmd {
	case control.CmdStatus, control.CmdCheck: // the daemon answers an action with the status it leaves
		return map[string]any{
			"state": "healthy", "node": "Los Angeles", "transit": "auto", "mode": "rule",
			"exit":         map[string]any{"ip": "198.18.20.2", "country": "US"},
			"counters":     map[string]any{"rotations": 2, "consecutive_failures": 0, "fail_threshold": 3},
			"last_check":   map[string]any{"outcome": "OK", "at": time.Now().Add(-12 * time.Second), "duration_ms": 840, "tunnel": []any{map[string]any{"kind": "search", "ok": true}}},
			"signals":      map[string]any{"auth": map[string]any{"state": "ok"}, "detectors": []any{map[string]any{"name": "early_detector", "state": "off", "since": time.Time{}}}},
			"candidates":   []any{map[string]any{"node": "Los Angeles", "current": true}, map[string]any{"node": "Dallas"}},
			"daemon":       map[string]any{"wan": map[string]any{"device": "eth0", "addr": "192.0.2.10"}},
			"future_field": nil,
			// A time that never happened is Go's zero time in the JSON.
			"last_rotation": time.Time{},
			"started_at":    time.Date(2026, 11, 29, 14, 3, 11, 0, time.UTC),
		}, nil
	case control.CmdRotate:
		if req.Args["node"] == "Atlantis" {
			return nil, errors.New(`unknown node "Atlantis"`)
		}
		return nil, nil
	}
	return map[string]any{"done": true}, nil
}

func (f *fakeDaemon) last() control.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reqs[len(f.reqs)-1]
}

func startFakeDaemon(t *testing.T) (*fakeDaemon, string) {
	t.Helper()
	dir := t.TempDir()
	f := &fakeDaemon{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { control.Serve(ctx, control.SocketPath(dir), f); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	for i := 0; i < 500; i++ {
		if _, err := os.Stat(control.SocketPath(dir)); err == nil {
			return f, dir
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatal("fake daemon socket never appeared")
	return nil, ""
}

func runDaemonCLI(name string, args ...string) (code int, stdout, stderr string) {
	for _, d := range daemonCommands {
		if d.name == name {
			var out, errb bytes.Buffer
			code = d.run(context.Background(), args, &out, &errb)
			return code, out.String(), errb.String()
		}
	}
	panic("no command " + name)
}

func TestDaemonNotRunning(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"status", "check", "rotate", "reconnect"} {
		code, out, errOut := runDaemonCLI(name, "--run-dir", dir)
		want := "surflare-watchdog: daemon not running (no control socket at " + filepath.Join(dir, control.SocketName) + ")\n"
		if code != exitNoDaemon || errOut != want || out != "" {
			t.Errorf("%s: code=%d stderr=%q stdout=%q", name, code, errOut, out)
		}
	}
	if code, _, _ := runDaemonCLI("diag", "--run-dir", dir, "on"); code != exitNoDaemon {
		t.Errorf("diag on: code=%d, want %d", code, exitNoDaemon)
	}
}

func TestStatusVerboseAndJSON(t *testing.T) {
	_, dir := startFakeDaemon(t)
	code, out, errOut := runDaemonCLI("status", "--run-dir", dir, "--verbose")
	if code != exitOK {
		t.Fatalf("status: code=%d err=%q", code, errOut)
	}
	for _, want := range []string{
		"state: healthy\nnode: Los Angeles\ntransit: auto\nmode: rule\nexit:\n  country: US\n  ip: 198.18.20.2\nstarted at: 2026-11-29T14:03:11Z\n",
		"candidates:\n  - node=Los Angeles current=yes\n  - node=Dallas\n",
		"counters:\n  consecutive failures: 0\n  fail threshold: 3\n  rotations: 2\n",
		"  tunnel:\n    - kind=search ok=yes\n",
		"future field: -\n",
		"last rotation: never\n",
		"    - state=off since=never name=early_detector\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status --verbose lacks %q:\n%s", want, out)
		}
	}
	// Without --verbose: the compact view, the why line first.
	code, out, _ = runDaemonCLI("status", "--run-dir", dir)
	if !regexp.MustCompile(`^Protected: traffic goes through Los Angeles, exit US\n(.*\n)*exit: +198\.18\.20\.2 US, checked 1\d s ago\n`).MatchString(out) ||
		!regexp.MustCompile(`\nnodes:\n  Los Angeles +- +in use\n  Dallas +- +ready\n$`).MatchString(out) ||
		strings.Contains(out, "counters") || strings.Count(out, "\n") > 10 {
		t.Errorf("status (compact): code=%d out:\n%s", code, out)
	}
	// check (like rotate, reconnect, diag) answers with the state it leaves,
	// as short: the same lines without the node table.
	code, out, _ = runDaemonCLI("check", "--run-dir", dir)
	if code != exitOK || !strings.HasPrefix(out, "Protected: ") || strings.Contains(out, "nodes:") || strings.Count(out, "\n") != 7 {
		t.Errorf("check: code=%d out:\n%s", code, out)
	}
	code, out, _ = runDaemonCLI("status", "--json", "--run-dir", dir)
	if !strings.Contains(out, "0001-01-01") || strings.Contains(out, "never") {
		t.Errorf("status --json must keep the API's zero time, not the text's \"never\":\n%s", out)
	}
	if code != exitOK || !strings.Contains(out, `"country": "US"`) {
		t.Errorf("status --json: code=%d out=%s", code, out)
	}
}

func TestCommandsSendTheirRequests(t *testing.T) {
	f, dir := startFakeDaemon(t)
	cases := []struct {
		name string
		args []string
		cmd  string
		arg  any
	}{
		{"check", nil, control.CmdCheck, nil},
		{"rotate", []string{"Los Angeles"}, control.CmdRotate, "Los Angeles"},
		{"rotate", nil, control.CmdRotate, nil},
		{"reconnect", nil, control.CmdReconnect, nil},
		{"diag", []string{"on"}, control.CmdDiag, true},
		{"diag", []string{"off"}, control.CmdDiag, false},
	}
	for _, c := range cases {
		code, _, errOut := runDaemonCLI(c.name, append([]string{"--run-dir", dir}, c.args...)...)
		if code != exitOK {
			t.Errorf("%s %v: code=%d err=%q", c.name, c.args, code, errOut)
			continue
		}
		req := f.last()
		var arg any
		switch req.Cmd {
		case control.CmdRotate:
			arg = req.Args["node"]
		case control.CmdDiag:
			arg = req.Args["on"]
		}
		if req.Cmd != c.cmd || arg != c.arg {
			t.Errorf("%s %v sent %+v", c.name, c.args, req)
		}
	}
}

func TestDaemonErrorsAndUsage(t *testing.T) {
	_, dir := startFakeDaemon(t)
	code, _, errOut := runDaemonCLI("rotate", "--run-dir", dir, "Atlantis")
	if code != exitFailure || !strings.Contains(errOut, `unknown node "Atlantis"`) {
		t.Errorf("refused rotate: code=%d err=%q", code, errOut)
	}
	for _, c := range [][]string{{"diag", "maybe"}, {"diag"}, {"rotate", "a", "b"}, {"status", "extra"}, {"check", "--nope"}} {
		if code, _, _ := runDaemonCLI(c[0], append([]string{"--run-dir", dir}, c[1:]...)...); code != exitUsage {
			t.Errorf("%v: code=%d, want usage error", c, code)
		}
	}
	code, out, _ := runDaemonCLI("status", "--help")
	if code != exitOK || !strings.HasPrefix(out, "Usage: surflare-watchdog status") {
		t.Errorf("status --help: code=%d out=%q", code, out)
	}
}

// Without --run-dir the socket is found through paths.run_dir of --config.
func TestRunDirFromConfig(t *testing.T) {
	_, dir := startFakeDaemon(t)
	cfg := filepath.Join(t.TempDir(), "surflare")
	os.WriteFile(cfg, []byte("config paths 'paths'\n\toption run_dir '"+dir+"'\n"), 0o600)
	if code, out, errOut := runDaemonCLI("status", "--config", cfg); code != exitOK || !strings.Contains(out, "Protected: traffic goes through Los Angeles") {
		t.Errorf("status via config: code=%d out=%q err=%q", code, out, errOut)
	}
	// A broken config falls back to the default run dir, with a warning.
	os.WriteFile(cfg, []byte("config paths 'paths'\n\toption run_dir 'relative'\n"), 0o600)
	var errb bytes.Buffer
	if got := runDirFromConfig(cfg, &errb); got != "/run" || !strings.Contains(errb.String(), "does not load") {
		t.Errorf("broken config: run dir %q, warning %q", got, errb.String())
	}
}
