package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"surflare-watchdog/src/control"
	"surflare-watchdog/src/daemon"
	"surflare-watchdog/src/nodeprobe"
)

// probeDaemon plays a daemon whose probe finishes one node per status poll.
type probeDaemon struct {
	mu    sync.Mutex
	nodes []string
	polls int
}

func (p *probeDaemon) Handle(ctx context.Context, req control.Request) (any, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch req.Cmd {
	case daemon.CmdProbe:
		nodes, err := daemon.NodesArg(req.Args)
		if err != nil {
			return nil, err
		}
		p.nodes = nodes
		return nodeprobe.JobStatus{Running: true, Nodes: nodes}, nil
	case daemon.CmdProbeStatus:
		p.polls++
		st := nodeprobe.JobStatus{Running: true, Nodes: p.nodes, File: "/run/x.json", Results: []nodeprobe.Result{}}
		l4 := 80.0
		for i := 0; i < min(p.polls, len(p.nodes)); i++ {
			st.Results = append(st.Results, nodeprobe.Result{Node: p.nodes[i], OK: true, L4RTTMS: &l4, ExitCountry: "US", DurationMS: 1500})
		}
		if p.polls > len(p.nodes) {
			st.Running = false
			st.Report = &nodeprobe.Report{OriginalNode: "Dallas", Nodes: st.Results}
		}
		return st, nil
	}
	return nil, errors.New("unknown")
}

func TestProbeCLIFollowsTheDaemon(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pd := &probeDaemon{}
	go control.Serve(ctx, control.SocketPath(dir), pd)
	waitSocket(t, control.SocketPath(dir))

	var out, errb bytes.Buffer
	code := runProbe(context.Background(), []string{"Chicago", "--run-dir", dir, "New York"}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, errb.String())
	}
	if !slices.Equal(pd.nodes, []string{"Chicago", "New York"}) {
		t.Errorf("the daemon was asked for %q", pd.nodes)
	}
	s := out.String()
	for _, want := range []string{"[1/2] Chicago: 1.5 s — L4 80 ms", "[2/2] New York: 1.5 s", "back on Dallas", "NODE", "80 ms"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if strings.Count(s, "[1/2] Chicago: 1.5 s") != 1 {
		t.Errorf("a finished node is printed once:\n%s", s)
	}

	out.Reset()
	if code := runProbe(context.Background(), []string{"--json", "--run-dir", dir}, &out, &errb); code != exitOK {
		t.Fatalf("--json exit %d", code)
	}
	if !strings.HasPrefix(strings.TrimSpace(out.String()), "{") || !strings.Contains(out.String(), `"original_node": "Dallas"`) {
		t.Errorf("--json prints the report alone on stdout:\n%s", out.String())
	}
}

func waitSocket(t *testing.T, path string) {
	t.Helper()
	for i := 0; i < 100; i++ {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no socket at %s", path)
}

func TestProbeCLIUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := runProbe(context.Background(), []string{"--help"}, &out, &errb); code != exitOK || !strings.Contains(out.String(), "probe [NODE…]") {
		t.Errorf("--help: %d %q", code, out.String())
	}
	if code := runProbe(context.Background(), []string{"--bogus"}, &out, &errb); code != exitUsage {
		t.Errorf("bad flag: exit %d", code)
	}
	// No daemon and a config that does not load: a clear failure, no panic.
	errb.Reset()
	dir := t.TempDir()
	code := runProbe(context.Background(), []string{"--run-dir", dir, "--config", filepath.Join(dir, "missing")}, &out, &errb)
	if code == exitOK || !strings.Contains(errb.String(), "no daemon answers") {
		t.Errorf("no daemon, no config: exit %d, stderr %q", code, errb.String())
	}
}
