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
	// Counters with Names: a jump of one of those counters within the
	// burst memory is evidence — RSTs from relays (the path is being
	// reset), the proxy's own traffic refused by strict direct (the proxy
	// is going direct: a domestic exit the probes see only as failures).
	Counters *CounterWatch
	Names    []string
	// Since, if set, is when node came into use: a jump before it
	// happened on the node we left and says nothing about this one (RSTs
	// counted per node, issue 19).
	Since func(node string) time.Time
}

// Corroborate is watchdog.Corroborator.
func (e Evidence) Corroborate(_ time.Time, node, transit string) (string, bool) {
	if e.Log != nil {
		if why, ok := e.Log.NodeBroken(node, transit); ok {
			return why, true
		}
	}
	if e.Counters != nil {
		for _, name := range e.Names {
			var n uint64
			for _, j := range e.Counters.Recent(name) {
				if e.Since != nil && j.At.Before(e.Since(node)) {
					continue
				}
				n += j.Delta
			}
			if n == 0 {
				continue
			}
			r, _ := e.Counters.o.Watch(name)
			return fmt.Sprintf("%s jumped by %d (%s) in the last %s on %s", name, n, r.Meaning, e.Counters.o.BurstMemory, node), true
		}
	}
	return "", false
}
