package watchdog

import (
	"testing"

	"surflare-watchdog/src/config"
)

func TestSettingsFromDefaultConfig(t *testing.T) {
	c := config.Default()
	s := SettingsFromConfig(c)
	if err := s.Validate(); err != nil {
		t.Fatalf("default config gives invalid settings: %v", err)
	}
	if s.Node != c.Main.Node || len(s.Candidates) != len(c.Main.Candidates) || s.FailThreshold != c.Main.FailThreshold {
		t.Errorf("settings %+v", s)
	}
	if s.StateFile == "" || s.LoginBackoffMin != c.Auth.LoginBackoffMin {
		t.Errorf("state file %q backoff %v", s.StateFile, s.LoginBackoffMin)
	}
	c.Main.ReconnectLimit = 0 // "no limit"
	c.Main.HeartbeatInterval = 0
	if s := SettingsFromConfig(c); s.Validate() != nil || s.ReconnectLimit < 1000 {
		t.Errorf("no-limit config: limit %d, err %v", s.ReconnectLimit, s.Validate())
	}
}

func TestSettingsCarryConfiguredTransits(t *testing.T) {
	c := config.Default()
	if s := SettingsFromConfig(c); len(s.Transits) != 0 {
		t.Errorf("no transit_candidate configured, settings know %q", s.Transits)
	}
	c.Main.TransitCandidates = []string{"Tokyo", "Singapore"}
	s := SettingsFromConfig(c)
	if len(s.Transits) != 2 || s.Transits[0] != "Tokyo" || s.Transits[1] != "Singapore" {
		t.Errorf("Transits = %q, want [Tokyo Singapore]", s.Transits)
	}
	c.Main.TransitCandidates[0] = "changed"
	if s.Transits[0] != "Tokyo" {
		t.Error("settings share the config's slice")
	}
}
