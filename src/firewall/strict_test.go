package firewall

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Strict direct: a proxy that sends a LAN client's connection straight out
// (mark 0xff to a foreign host) is refused at once and counted, while the
// proxy's legitimate direct traffic — relays, the account API, cn_direct,
// a relay not learned yet on a vendor server port — passes. Without
// StrictDirect the same dial leaks (the control). This is mode global;
// TestStrictDirectPerMode has the others.
func TestStrictDirect(t *testing.T) {
	ctx := context.Background()
	tp := newTopo(t)
	echo := serveTCP(t, tp.inet, "tcp4", echoHost+":80", "echo", false)
	serveTCP(t, tp.inet, "tcp4", echoHost+":9443", "unlearned-relay", false)
	serveTCP(t, tp.inet, "tcp4", relayHost+":8443", "relay", false)
	serveTCP(t, tp.inet, "tcp4", domesticWeb+":80", "domestic", false)
	const mark = int(MarkDirect)

	s := labSpec()
	if got, err := dialTCP(tp.router, "tcp4", echoHost+":80", mark); got != "echo" {
		t.Fatalf("control: without strict direct the 0xff dial must pass: %q, %v", got, err)
	}
	s.Mode = ModeGlobal // the mode in which strict direct narrows (StrictDirectScope)
	s.StrictDirect = true
	s.ServerPorts = []uint16{9443, 8443, 9443}
	fw := apply(t, tp.router, s)

	start := time.Now()
	_, err := dialTCP(tp.router, "tcp4", echoHost+":80", mark)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("0xff to a foreign host: err = %v, want refused (a reset)", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("the refusal took %v: the proxy must fail fast, not time out", d)
	}
	if n := len(echo.conns()); n != 1 {
		t.Errorf("echo host saw %d connections, want only the control's", n)
	}
	for _, c := range []struct{ addr, want string }{
		{relayHost + ":8443", "relay"},
		{domesticWeb + ":80", "domestic"},
		{echoHost + ":9443", "unlearned-relay"},
	} {
		if got, err := dialTCP(tp.router, "tcp4", c.addr, mark); got != c.want {
			t.Errorf("0xff to %s: %q, %v; want %q", c.addr, got, err, c.want)
		}
	}
	cs, err := fw.KillSwitchCounters(ctx)
	if err != nil || cs[CounterDirectBlocked] == 0 {
		t.Errorf("counters %v, %v; want direct_blocked > 0", cs, err)
	}
	out := tp.router.nft("list", "chain", "inet", TableKillSwitch, "output")
	if strings.Contains(out, "tcp dport 9443 accept comment \"out-direct-server-port-9443") != true ||
		strings.Count(out, "out-direct-server-port-9443") != 1 {
		t.Errorf("server ports not one rule each:\n%s", out)
	}
	// Apply again with the same Spec: nothing to change.
	if ch, err := fw.Apply(ctx, s); err != nil || !ch.Empty() {
		t.Errorf("re-apply: %v %v", ch, err)
	}
	bad := s
	bad.ServerPorts = []uint16{0}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "server port 0") {
		t.Errorf("port 0 accepted: %v", err)
	}
}

// In modes rule and direct the vendor's 0xff connections to foreign sites
// off its list are its design (E3): with strict_direct on (the default) the
// proxy's dial to a foreign host must pass, and nothing is counted as
// direct_blocked. The same Spec switched to global refuses it (the control,
// in the same tables, so the test proves the mode is what decides).
func TestStrictDirectPerMode(t *testing.T) {
	ctx := context.Background()
	tp := newTopo(t)
	echo := serveTCP(t, tp.inet, "tcp4", echoHost+":80", "echo", false)
	const mark = int(MarkDirect)
	for _, c := range []struct {
		m      Mode
		inRule bool
	}{{ModeRule, false}, {ModeDirect, false}, {ModeDirect, true}, {ModeGlobal, false}, {ModeRule, true}} {
		m := c.m
		s := labSpec()
		s.Mode = m
		s.StrictDirect = true
		s.StrictDirectRule = c.inRule
		s.ServerPorts = []uint16{8443}
		fw := apply(t, tp.router, s)
		before := len(echo.conns())
		got, err := dialTCP(tp.router, "tcp4", echoHost+":80", mark)
		cs, cerr := fw.KillSwitchCounters(ctx)
		if cerr != nil {
			t.Fatalf("%s: counters: %v", m, cerr)
		}
		if m == ModeGlobal || m == ModeRule && c.inRule {
			if !errors.Is(err, syscall.ECONNREFUSED) || len(echo.conns()) != before || cs[CounterDirectBlocked] == 0 {
				t.Errorf("%s, strict_direct_rule %v (control): 0xff to a foreign host: %q, %v, echo saw %d new, direct_blocked %d; want refused and counted",
					m, c.inRule, got, err, len(echo.conns())-before, cs[CounterDirectBlocked])
			}
			continue
		}
		if got != "echo" {
			t.Errorf("%s with strict_direct on: the vendor's direct dial to a foreign host: %q, %v; want it to pass", m, got, err)
		}
		if n, ok := cs[CounterDirectBlocked]; ok && n != 0 {
			t.Errorf("%s: direct_blocked = %d, want nothing refused", m, n)
		}
	}
}

// The per-mode decision itself, for every combination.
func TestStrictDirectScope(t *testing.T) {
	for _, c := range []struct {
		m              Mode
		strict, inRule bool
		want           DirectScope
	}{
		{ModeGlobal, true, false, DirectNarrow}, {ModeGlobal, false, false, DirectAny}, {ModeGlobal, false, true, DirectAny},
		{ModeRule, true, false, DirectAny}, {ModeRule, false, false, DirectAny},
		{ModeRule, true, true, DirectNarrow}, {ModeRule, false, true, DirectAny},
		{ModeDirect, true, false, DirectAny}, {ModeDirect, true, true, DirectAny},
	} {
		if got := StrictDirectScope(c.m, c.strict, c.inRule); got != c.want {
			t.Errorf("StrictDirectScope(%s, strict %v, in rule %v) = %s, want %s", c.m, c.strict, c.inRule, got, c.want)
		}
	}
}
