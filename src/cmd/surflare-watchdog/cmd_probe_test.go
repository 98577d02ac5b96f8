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

	"surflare-watchdog/src/config"
	"surflare-watchdog/src/control"
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
	case cmdProbe:
		nodes, err := nodesArg(req.Args)
		if err != nil {
			return nil, err
		}
		p.nodes = nodes
		return nodeprobe.JobStatus{Running: true, Nodes: nodes}, nil
	case cmdProbeStatus:
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

func TestNodesArg(t *testing.T) {
	got, err := nodesArg(map[string]any{"node": " Chicago ", "nodes": []any{"Los Angeles"}})
	if err != nil || !slices.Equal(got, []string{"Chicago", "Los Angeles"}) {
		t.Errorf("nodesArg = %q, %v", got, err)
	}
	for _, bad := range []map[string]any{{"node": 5.0}, {"nodes": "Dallas"}, {"nodes": []any{""}}} {
		if _, err := nodesArg(bad); err == nil {
			t.Errorf("nodesArg(%v) accepted", bad)
		}
	}
}

func TestProbeOptionsFromConfig(t *testing.T) {
	c, _, err := config.Parse("surflare", []byte(`
config surflare 'main'
	list candidate 'Dallas'
	list candidate 'Chicago'

config probe 'search'
	option kind 'search'
	option url 'https://search.example/generate_204'

config probe 'search2'
	option kind 'search'
	option url 'http://198.18.30.21/generate_204'

config probe 'echo1'
	option kind 'ip-echo'
	option url 'http://198.18.30.1/'
`))
	if err != nil {
		t.Fatal(err)
	}
	o, err := probeOptions(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.Nodes, []string{"Dallas", "Chicago"}) {
		t.Errorf("nodes %q, want the candidates", o.Nodes)
	}
	if o.TTFBURL != "http://198.18.30.21/generate_204" || o.EchoURL != "http://198.18.30.1/" {
		t.Errorf("targets %q %q: want the http:// search probe and the echo", o.TTFBURL, o.EchoURL)
	}
	if o, _ := probeOptions(c, []string{"Miami"}); !slices.Equal(o.Nodes, []string{"Miami"}) {
		t.Errorf("named nodes: %q", o.Nodes)
	}
	if u := o.Health("Dallas"); u.Source == "" {
		t.Errorf("no node health file must say so: %+v", u)
	}
}

type recVendor struct {
	calls         []string
	disconnectErr error
}

func (v *recVendor) Connect(ctx context.Context, node, mode, transit string) error {
	v.calls = append(v.calls, "connect "+node+" "+mode+" "+transit)
	return nil
}

func (v *recVendor) Disconnect(ctx context.Context) error {
	v.calls = append(v.calls, "disconnect")
	return v.disconnectErr
}

func TestVendorSwitcher(t *testing.T) {
	v := &recVendor{disconnectErr: errors.New("half down")}
	var flushed, ready int
	s := vendorSwitcher{v: v, mode: "rule", transit: "auto",
		flush: func(context.Context) error { flushed++; return nil },
		ready: func(context.Context) error { ready++; return nil }}
	if err := s.Switch(context.Background(), "Los Angeles"); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(v.calls, []string{"disconnect", "connect Los Angeles rule auto"}) || flushed != 1 || ready != 1 {
		t.Errorf("calls %q flushed %d ready %d", v.calls, flushed, ready)
	}
	s.flush = func(context.Context) error { return errors.New("nft gone") }
	if err := s.Switch(context.Background(), "Dallas"); err == nil || !strings.Contains(err.Error(), "leftovers") {
		t.Errorf("a failed flush must stop the switch: %v", err)
	}
}
