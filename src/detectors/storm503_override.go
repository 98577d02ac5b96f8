package detectors

import (
	"fmt"
	"sync"
	"time"

	"surflare-watchdog/src/detectors/fastsignal"
	"surflare-watchdog/src/detectors/loghealth"
	"surflare-watchdog/src/detectors/storm503"
)

// NewStorm503Override binds m (and, when not nil, the fast log signal's
// breadth rule) to the node in use.
func NewStorm503Override(m *storm503.Monitor, fast *fastsignal.LogWatch) *Storm503Override {
	return &Storm503Override{m: m, fast: fast}
}

// Monitor is the 503 monitor the override reads.
func (o *Storm503Override) Monitor() *storm503.Monitor { return o.m }

// SetFast adds the fast log signal's breadth rule (nil: none).
func (o *Storm503Override) SetFast(fast *fastsignal.LogWatch) {
	if o != nil {
		o.fast = fast
	}
}

// SetProbe adds the 503 probe's storm (nil: none).
func (o *Storm503Override) SetProbe(p *storm503.Probe) {
	if o != nil {
		o.probe = p
	}
}

// Storm503Override is watchdog.Override over the 503 monitor, bound to the
// node in use: ADR-0001's storm is the exit's, so only the current node's
// urltest 503s are counted, and the count starts over when the node changes
// (a storm on the node we left must not veto the healthy one we moved to).
// The engine calls Override with its lock held, so the node comes from the
// engine's event stream (Follow), never from a call back into the engine.
type Storm503Override struct {
	m *storm503.Monitor
	// fast, if set, judges the storm by breadth (fastsignal.LogWatch's
	// Node503): 503s from the node in use via several relays in the last
	// urltest round, while the other nodes answer, start the override
	// without waiting for Count 503s (one round instead of four).
	fast *fastsignal.LogWatch
	// probe, if set, is the storm our own probe sees (storm503.Probe): the
	// exit of the node in use answering the connectivity check with 503,
	// whatever the vendor's urltest cadence.
	probe *storm503.Probe

	mu      sync.Mutex
	current string // node in use as last seen; "" before the first connect
}

// Follow records the node in use after a transition; a new node starts the
// count over.
func (o *Storm503Override) Follow(node string) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if node != o.current {
		o.m.Reset()
		o.current = node
	}
}

// Record counts one urltest 503 line if it is the current node's.
func (o *Storm503Override) Record(l loghealth.Line) {
	if o == nil {
		return // the 503 monitor is off (storm503.enabled=0)
	}
	o.mu.Lock()
	node := o.current
	o.mu.Unlock()
	if l.Is503() && node != "" && l.Node == node {
		o.m.Record(l.Time)
	}
}

// Override is watchdog.Override: the reason and true while the storm
// vetoes a rotation.
func (o *Storm503Override) Override(now time.Time) (string, bool) {
	if o.m.OverrideActive(now) {
		st := o.m.State(now)
		return fmt.Sprintf("%d urltest 503s within %ds", st.Count, st.WindowS), true
	}
	o.mu.Lock()
	node := o.current
	o.mu.Unlock()
	if node == "" {
		return "", false
	}
	if why, ok := o.probe.Storm(node, now); ok {
		return why, true
	}
	if o.fast == nil {
		return "", false
	}
	return o.fast.Node503(node)
}
