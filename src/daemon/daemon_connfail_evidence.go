package daemon

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// Corroborate is watchdog.Corroborator over the failed-connection window
// (issue 19, recovery after a detected node-down): the burst of failed LAN
// connections through the node in use that asked for the check, to
// connFailDests or more destinations within connFailWindow, names the node
// broken. It is the same rule that asks for the check, so a node-down seen
// by connfail rotates on the first failed confirming check instead of
// waiting for fail_threshold checks at degraded_interval (~20 s) or for the
// vendor's urltest, whose cadence is unknown (DESIGN §9). "Other paths
// answer" is the check's part: a WAN outage is WAN_DOWN, not a failed
// check, and a working tunnel passes the confirming check, so this
// evidence alone never rotates.
//
// Only failures read on the tunnel in use count (connFailWatch.last): a
// node we left and came back to within the window starts clean, and so
// does a same-node reconnect, even before its first line is read.
func (w *connFailWatch) Corroborate(now time.Time, node, transit string) (string, bool) {
	return w.CorroborateAsOf(now, now, node, transit)
}

// CorroborateAsOf is watchdog.AsOfCorroborator: only failures read by asOf
// (the failed check's start) count. The proxy logs the check's own probes
// through the node like any LAN connection, to several destinations:
// counted, they would make one failed check its own corroboration.
func (w *connFailWatch) CorroborateAsOf(asOf, now time.Time, node, _ string) (string, bool) {
	if w == nil || node == "" {
		return "", false
	}
	cur := w.current()
	w.mu.Lock()
	w.followLocked(cur)
	w.mu.Unlock()
	if !strings.EqualFold(cur.node, node) {
		return "", false
	}
	n, dests := w.window.CountAsOf(cur.node, asOf, now)
	if n < connFailMin || dests < connFailDests {
		return "", false
	}
	return fmt.Sprintf("CONN_FAIL: %d LAN connections to %d destinations failed via %s in the last %s", n, dests, node, connFailWindow), true
}

// idleMissEvidence is the idle probe's last miss as evidence (issue 19):
// one request through an idle tunnel that got no answer, on the node then
// in use, is an observation of its own, made before the confirming check it
// asks for. That check failing too is the second: together they rotate at
// once instead of waiting for fail_threshold checks at degraded_interval,
// whatever the vendor's urltest cadence. A miss alone never rotates (the
// check decides), nor does a failed check whose start came before the miss.
type idleMissEvidence struct {
	mu   sync.Mutex
	at   time.Time
	node string
	why  string
}

// idleMissMemory is how long a miss stays evidence: the confirming check
// it asks for starts at once and is bounded by confirm_probe_timeout.
const idleMissMemory = 15 * time.Second

func (e *idleMissEvidence) record(at time.Time, node, why string) {
	e.mu.Lock()
	e.at, e.node, e.why = at, node, why
	e.mu.Unlock()
}

// Corroborate is watchdog.Corroborator.
func (e *idleMissEvidence) Corroborate(now time.Time, node, transit string) (string, bool) {
	return e.CorroborateAsOf(now, now, node, transit)
}

// CorroborateAsOf is watchdog.AsOfCorroborator: a miss on node at or
// before asOf, at most idleMissMemory before now.
func (e *idleMissEvidence) CorroborateAsOf(asOf, now time.Time, node, _ string) (string, bool) {
	if e == nil || node == "" {
		return "", false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.at.IsZero() || e.node != node || e.at.After(asOf) || now.Sub(e.at) > idleMissMemory {
		return "", false
	}
	return fmt.Sprintf("IDLE_PROBE: no answer through the idle tunnel on %s at %s (%s)", node, e.at.Format("15:04:05"), e.why), true
}
