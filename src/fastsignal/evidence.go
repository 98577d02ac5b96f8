package fastsignal

import (
	"fmt"
	"time"
)

// Evidence is the engine's corroboration (watchdog.Corroborator): after a
// failed check it says whether a strong signal names the current node as
// broken, so the engine rotates at once instead of waiting for the fail
// threshold. Either source may be nil.
type Evidence struct {
	Log *LogWatch
	// Counters with RSTName: a jump of that counter (RSTs from relays)
	// within the burst memory is evidence that the path is being reset.
	Counters *CounterWatch
	RSTName  string
}

// Corroborate is watchdog.Corroborator.
func (e Evidence) Corroborate(_ time.Time, node, transit string) (string, bool) {
	if e.Log != nil {
		if why, ok := e.Log.NodeBroken(node, transit); ok {
			return why, true
		}
	}
	if e.Counters != nil && e.RSTName != "" {
		if js := e.Counters.Recent(e.RSTName); len(js) > 0 {
			var n uint64
			for _, j := range js {
				n += j.Delta
			}
			return fmt.Sprintf("burst of %d RSTs from relays (%s) in the last %s", n, e.RSTName, e.Counters.o.BurstMemory), true
		}
	}
	return "", false
}
