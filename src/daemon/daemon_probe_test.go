package daemon

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"surflare-watchdog/src/config"
)

func TestNodesArg(t *testing.T) {
	got, err := NodesArg(map[string]any{"node": " Chicago ", "nodes": []any{"Los Angeles"}})
	if err != nil || !slices.Equal(got, []string{"Chicago", "Los Angeles"}) {
		t.Errorf("NodesArg = %q, %v", got, err)
	}
	for _, bad := range []map[string]any{{"node": 5.0}, {"nodes": "Dallas"}, {"nodes": []any{""}}} {
		if _, err := NodesArg(bad); err == nil {
			t.Errorf("NodesArg(%v) accepted", bad)
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
	o, err := ProbeOptions(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.Nodes, []string{"Dallas", "Chicago"}) {
		t.Errorf("nodes %q, want the candidates", o.Nodes)
	}
	if o.TTFBURL != "http://198.18.30.21/generate_204" || o.EchoURL != "http://198.18.30.1/" {
		t.Errorf("targets %q %q: want the http:// search probe and the echo", o.TTFBURL, o.EchoURL)
	}
	if o, _ := ProbeOptions(c, []string{"Miami"}); !slices.Equal(o.Nodes, []string{"Miami"}) {
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
	s := VendorSwitcher{v: v, mode: "rule", transit: "auto",
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
