package watchdog

import (
	"fmt"
	"log/slog"
	"time"
)

// Corroborator tells, after a failed check, whether a strong signal names
// the current node as broken right now (fastsignal.Evidence: the proxy's
// own urltest of that node failing on several transits in the last seconds
// while other nodes pass; a burst of RSTs from the relays). A failed check
// it corroborates counts as reaching the fail threshold.
type Corroborator interface {
	Corroborate(now time.Time, node, transit string) (reason string, broken bool)
}

// AsOfCorroborator is a Corroborator whose evidence the check itself can
// feed: the proxy logs the check's own probes' connections through the
// node, so their failures would make one failed check corroborate itself
// (and "one failure alone never rotates" would not hold). The engine asks
// it for the evidence as it stood when the failed check started (asOf);
// what it saw since is left out.
type AsOfCorroborator interface {
	CorroborateAsOf(asOf, now time.Time, node, transit string) (reason string, broken bool)
}

// corroborateAsOf asks c for the evidence as of asOf where it can tell.
func corroborateAsOf(c Corroborator, asOf, now time.Time, node, transit string) (string, bool) {
	if a, ok := c.(AsOfCorroborator); ok && !asOf.IsZero() {
		return a.CorroborateAsOf(asOf, now, node, transit)
	}
	return c.Corroborate(now, node, transit)
}

// rotateIfCorroboratedLocked is the fast-recovery rule (package doc): a
// failed check below the threshold rotates at once when Deps.Corroborator
// names the current node broken by evidence it had before the check
// started. It reports whether it rotated.
func (w *Watchdog) rotateIfCorroboratedLocked(now time.Time) bool {
	if w.d.Corroborator == nil {
		return false
	}
	why, broken := corroborateAsOf(w.d.Corroborator, w.checkStarted, now, w.node, w.transit)
	if !broken {
		return false
	}
	w.logLocked(slog.LevelWarn, fmt.Sprintf("Fast recovery: failed check on %s corroborated (%s); not waiting for %d failed checks",
		w.node, why, w.s.FailThreshold))
	w.rotateLocked(fmt.Sprintf("failed check corroborated: %s", why))
	return true
}

// confirmCheckLocked says whether the next check only confirms what the
// evidence already says: a connected tunnel whose node Deps.Corroborator
// names broken now. Such a check fails fast on a dead path (the probes are
// bounded by ConfirmProbeTimeout) and, failing, rotates at once
// (rotateIfCorroboratedLocked); a working tunnel still answers it, so the
// evidence alone never rotates.
func (w *Watchdog) confirmCheckLocked() (string, bool) {
	if w.d.Corroborator == nil || !w.f.connected || w.f.connecting || w.node == "" {
		return "", false
	}
	return w.d.Corroborator.Corroborate(w.clock.Now(), w.node, w.transit)
}
