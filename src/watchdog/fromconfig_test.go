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
