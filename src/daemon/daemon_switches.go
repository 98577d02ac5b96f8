package daemon

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"surflare-watchdog/src/config"
	"surflare-watchdog/src/detectors"
	"surflare-watchdog/src/detectors/storm503"
	"surflare-watchdog/src/runfiles"
)

// newStorm503 is the 503 storm monitor (ADR-0001) and the engine's override
// over it when storm503.enabled is on. Off, both are nil — no 503 asks for
// a check or vetoes a passing probe, status has no storm_503 — and a state
// file a previous run left in the run directory is removed, so nothing
// that reads it shows an old storm as the current one.
func (d *Daemon) newStorm503(c *config.Config, trig func(string)) (*storm503.Monitor, *detectors.Storm503Override) {
	if !c.Storm503.Enabled {
		stale := filepath.Join(c.Paths.RunDir, runfiles.Storm503File)
		if err := os.Remove(stale); err != nil && !errors.Is(err, fs.ErrNotExist) {
			d.log.Warn("503 storm monitor off: removing its old state file failed", "file", stale, "err", err)
		}
		d.log.Info("503 storm monitor off (storm503.enabled=0)")
		return nil, nil
	}
	m := storm503.New(storm503.FromConfig(c, trig))
	return m, detectors.NewStorm503Override(m, nil)
}
