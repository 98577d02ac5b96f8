package daemon

import (
	"io"
	"testing"

	"surflare-watchdog/src/config"
	"surflare-watchdog/src/firewall"
	"surflare-watchdog/src/health"
)

// Each config mode reaches the firewall and the health checker as the same
// vendor mode (issue 18): direct is not silently run as rule, and the
// probes' listed marks reach the checker.
func TestModeMapsOntoFirewallAndHealth(t *testing.T) {
	for _, c := range []struct {
		mode    config.Mode
		fw      firewall.Mode
		judging health.Judging
		narrows firewall.DirectScope
	}{
		{config.ModeRule, firewall.ModeRule, health.JudgeListed, firewall.DirectAny},
		{config.ModeGlobal, firewall.ModeGlobal, health.JudgeAll, firewall.DirectNarrow},
		{config.ModeDirect, firewall.ModeDirect, health.JudgeNone, firewall.DirectAny},
	} {
		cfg := config.Default()
		cfg.Main.Mode = c.mode
		cfg.Paths.ChnrouteV4, cfg.Paths.ChnrouteV6 = "", ""
		s, err := SpecFromConfig(cfg, io.Discard)
		if err != nil {
			t.Fatalf("%s: %v", c.mode, err)
		}
		if s.Mode != c.fw || s.Mode.String() != string(c.mode) {
			t.Errorf("config mode %s: firewall mode %s", c.mode, s.Mode)
		}
		if got := firewall.StrictDirectScope(s.Mode, s.StrictDirect, s.StrictDirectRule); got != c.narrows {
			t.Errorf("config mode %s with the default strict_direct: scope %s, want %s", c.mode, got, c.narrows)
		}
		if err := s.Validate(); err != nil {
			t.Errorf("%s: %v", c.mode, err)
		}
		hc := healthConfig(cfg)
		if hc.Judging != c.judging {
			t.Errorf("config mode %s: judging %d, want %d", c.mode, hc.Judging, c.judging)
		}
		listed := map[string]bool{}
		for _, tg := range hc.Targets {
			listed[tg.Name] = tg.Listed
		}
		if !listed["search"] || listed["echo1"] {
			t.Errorf("listed marks lost: %v (the shipped search probe is listed, echo1 is not)", listed)
		}
	}
}
