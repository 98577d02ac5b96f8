package watchdog

import (
	"math"
	"path/filepath"

	"surflare-watchdog/src/config"
	"surflare-watchdog/src/runfiles"
)

// SettingsFromConfig maps the typed UCI config onto the engine's settings;
// knobs the config does not expose keep engineDefaults' values.
func SettingsFromConfig(c *config.Config) Settings {
	s := engineDefaults()
	m := c.Main
	s.Node, s.Candidates, s.Transit, s.Mode = m.Node, append([]string(nil), m.Candidates...), m.Transit, string(m.Mode)
	s.Transits = append([]string(nil), m.TransitCandidates...)
	s.CheckInterval, s.DegradedInterval = m.CheckInterval, m.DegradedInterval
	s.FailThreshold, s.HeartbeatInterval = m.FailThreshold, m.HeartbeatInterval
	s.StormCooldown, s.ReconnectWindow, s.ReconnectLimit = m.StormCooldown, m.ReconnectWindow, m.ReconnectLimit
	if s.ReconnectLimit == 0 { // config: 0 = no limit
		s.ReconnectLimit = math.MaxInt
	}
	if m.CascadeAfter > 0 {
		s.CascadeAfter = m.CascadeAfter
	}
	if m.ConnectLocalTimeout > 0 {
		s.Phase1Timeout = m.ConnectLocalTimeout
	}
	if m.ConnectDataplaneTimeout > 0 {
		s.Phase2Timeout = m.ConnectDataplaneTimeout
	}
	s.FailOpen = m.FailOpen
	s.LoginRefresh = m.LoginRefresh
	a := c.Auth
	s.LoginRetries, s.LoginBackoffMin, s.LoginBackoffMax = a.LoginRetries, a.LoginBackoffMin, a.LoginBackoffMax
	s.FailOpenAfter, s.SubscriptionCooldown = a.FailOpenAfter, a.SubscriptionCooldown
	s.LogHealthThreshold, s.LogHealthStale = c.LogHealth.Threshold, c.LogHealth.Stale
	if c.Paths.RunDir != "" {
		s.StateFile = filepath.Join(c.Paths.RunDir, runfiles.StateFile)
		s.MemoryFile = filepath.Join(c.Paths.RunDir, MemoryFileName)
	}
	return s
}
