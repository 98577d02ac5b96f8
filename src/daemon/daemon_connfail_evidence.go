package daemon

import (
	"fmt"
	"strings"
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
// Only failures read while node was the node in use count (lastNode): a
// node we left and came back to within the window starts clean.
func (w *connFailWatch) Corroborate(now time.Time, node, _ string) (string, bool) {
	if w == nil || node == "" {
		return "", false
	}
	w.mu.Lock()
	current := w.lastNode
	w.mu.Unlock()
	if !strings.EqualFold(current, node) {
		return "", false
	}
	n, dests := w.window.Count(current, now)
	if n < connFailMin || dests < connFailDests {
		return "", false
	}
	return fmt.Sprintf("CONN_FAIL: %d LAN connections to %d destinations failed via %s in the last %s", n, dests, node, connFailWindow), true
}
