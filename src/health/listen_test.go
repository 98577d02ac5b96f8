package health

import (
	"context"
	"testing"
)

type fakeListen struct{ up bool }

func (f fakeListen) ProxyListening(context.Context) (bool, error) { return f.up, nil }

// E6: a proxy that runs but does not listen yet is not local plumbing up;
// the connect sequence keeps polling Local until it listens.
func TestLocalWaitsForTheProxyToListen(t *testing.T) {
	f := newFixture(t)
	f.build(Config{Targets: targets})
	deps := f.c.deps
	deps.Listen = fakeListen{false}
	c := NewChecker(f.c.cfg, deps)
	r := c.Local(context.Background())
	if r.Outcome != LocalFail || r.Reason != "proxy not listening on its port (yet; vendor.proxy_port)" || !r.Local.ProxyNotListening {
		t.Errorf("not listening: %s (%s) %+v, want LOCAL_FAIL", r.Outcome, r.Reason, r.Local)
	}
	deps.Listen = fakeListen{true}
	if r := NewChecker(f.c.cfg, deps).Local(context.Background()); r.Outcome != OK {
		t.Errorf("listening: %s (%s), want OK", r.Outcome, r.Reason)
	}
	// A dead proxy is reported as dead, not as deaf.
	f.local.proxy = false
	deps.Listen = fakeListen{false}
	if r := NewChecker(f.c.cfg, deps).Local(context.Background()); r.Reason != "proxy process not running" {
		t.Errorf("dead proxy: %q", r.Reason)
	}
}
