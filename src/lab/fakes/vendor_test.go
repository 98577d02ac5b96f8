package fakes

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestApplyKnob(t *testing.T) {
	li := DefaultLabInfo("/x", "swx")
	for _, kv := range []string{
		"exits=us", "auto=off", "modes=rule,global", "rule_routing=list", "no_transit=auto",
		"inherit_fds=0", "proxy_delay=3s", "disconnect=strict", "foreground=0", "udp=0",
		"api_access=tunnel", "api_loss=30", "token_ttl=90s", "token_expiry=status",
		"login=argv", "urltest_interval=180", "log_format=1.8",
	} {
		if err := ApplyKnob(&li, kv); err != nil {
			t.Fatalf("%s: %v", kv, err)
		}
	}
	v := li.Vendor
	if !slices.Equal(v.Exits, USExits) || v.Auto != AutoOff || len(v.Modes) != 2 || v.RuleRouting != RoutingList ||
		v.NoTransit != NoTransitAuto || v.InheritFDs || v.ProxyDelayMS != 3000 || !v.DisconnectStrict || v.Foreground ||
		v.UDP || v.APIAccess != APITunnel || v.APILossPct != 30 || v.TokenTTLS != 90 || v.TokenExpiry != ExpiryStatus ||
		v.Login != LoginArgv || li.URLTestIntervalS != 180 || v.LogFormat != LogSingBox18 {
		t.Errorf("knobs not applied: %+v interval %d", v, li.URLTestIntervalS)
	}
	for _, kv := range []string{"nope=1", "auto", "modes=warp", "api_loss=101", "urltest_interval=0", "udp=maybe", "token_ttl=-1s"} {
		if err := ApplyKnob(&li, kv); err == nil {
			t.Errorf("%s: accepted", kv)
		}
	}
	if err := ApplyKnob(&li, "nope=1"); err == nil || !strings.Contains(err.Error(), "log_format") {
		t.Errorf("unknown knob error does not list the knobs: %v", err)
	}
}

func TestKnobsCoverApplyKnob(t *testing.T) {
	for _, k := range Knobs {
		li := DefaultLabInfo("/x", "swx")
		err := ApplyKnob(&li, k.Key+"=")
		if err != nil && strings.Contains(err.Error(), "unknown knob") {
			t.Errorf("Knobs lists %q but ApplyKnob does not know it", k.Key)
		}
	}
}

func TestRuleMatch(t *testing.T) {
	v := DefaultVendor()
	api := netip.MustParseAddr("198.18.40.1")
	other := netip.MustParseAddr("198.18.30.1")
	for _, c := range []struct {
		host string
		dst  netip.Addr
		want bool
	}{
		{"blocked.ipecho.lab", other, true},
		{"BLOCKED.ipecho.lab:80", other, true},
		{"open.ipecho.lab", other, false},
		{"www.foreign.lab", other, true},
		{"notforeign.lab", other, false},
		{"", api, true},
		{"198.18.30.1", other, false},
	} {
		if got := v.RuleMatch(c.host, c.dst); got != c.want {
			t.Errorf("RuleMatch(%q, %s) = %v, want %v", c.host, c.dst, got, c.want)
		}
	}
}
