package fastsignal

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"surflare-watchdog/src/clock"
	"surflare-watchdog/src/detectors/loghealth"
)

// Defaults of LogOptions.
const (
	// DefaultLogWindow is the short window: about two urltest rounds of a
	// proxy that tests every 5 s, far shorter than log health's 10 min, so
	// what it holds describes the node now, not a past outage.
	DefaultLogWindow = 15 * time.Second
	// DefaultMinPairs: the current node must have failed on this many of
	// its node/transit pairs (the current one among them) to be broken by
	// the log. One failed pair is one relay or one lost request; a node
	// that fails via two relays is the node.
	DefaultMinPairs = 2
	// DefaultTriggerGap is the least time between two checks this source
	// asks for.
	DefaultTriggerGap = 10 * time.Second
)

// transitAuto is the vendor's automatic transit; the proxy tests it as a
// pair of its own ("Dallas via auto").
const transitAuto = "auto"

// LogOptions configure a LogWatch.
type LogOptions struct {
	// Current is the node and transit the tunnel uses now (the engine's
	// status). Required.
	Current func() (node, transit string)
	// Nodes are the other nodes whose errors tell a node fault from a
	// relay or uplink fault (the rotation candidates).
	Nodes []string
	// Trigger asks the engine for a check; it must not block.
	Trigger    func(reason string)
	Window     time.Duration
	MinPairs   int
	TriggerGap time.Duration
	Clock      clock.Clock
}

// logErr is one urltest error as LogWatch keeps it.
type logErr struct {
	at            time.Time
	node, transit string
	is503         bool // the node answered 503 (overloaded), not a timeout or refusal
}

// LogWatch keeps the last Window of urltest errors (fed by log health's
// OnLine) and judges the current node by them. Safe for concurrent use.
type LogWatch struct {
	o LogOptions

	mu        sync.Mutex
	errs      []logErr // oldest first
	lastFired time.Time
}

// NewLogWatch checks o and fills defaults.
func NewLogWatch(o LogOptions) (*LogWatch, error) {
	if o.Current == nil {
		return nil, fmt.Errorf("log watch: no way to know the current node")
	}
	if o.Window <= 0 {
		o.Window = DefaultLogWindow
	}
	if o.MinPairs <= 0 {
		o.MinPairs = DefaultMinPairs
	}
	if o.TriggerGap <= 0 {
		o.TriggerGap = DefaultTriggerGap
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	return &LogWatch{o: o}, nil
}

// Observe records one urltest error (log health's OnLine). A line whose
// own timestamp is older than the window (the tail read at start-up) is
// ignored. When the error is about the current node and the log now says
// the node is broken, a check is asked for (at most once per TriggerGap).
func (w *LogWatch) Observe(l loghealth.Line) {
	now := w.o.Clock.Now()
	// The log stamps whole seconds: allow one second of rounding.
	if !l.Time.IsZero() && now.Sub(l.Time) > w.o.Window+time.Second {
		return
	}
	node, transit := w.o.Current()
	w.mu.Lock()
	w.pruneLocked(now)
	w.errs = append(w.errs, logErr{at: now, node: l.Node, transit: l.Transit, is503: l.Is503()})
	var reason string
	if l.Node == node {
		if why, broken := w.brokenLocked(node, transit); broken && now.Sub(w.lastFired) >= w.o.TriggerGap {
			w.lastFired = now
			reason = "LOG_HEALTH_FAST: " + why
		}
	}
	w.mu.Unlock()
	if reason != "" && w.o.Trigger != nil {
		w.o.Trigger(reason)
	}
}

// NodeBroken reports whether the last Window of urltest errors says node
// (via transit) is broken now, with the evidence.
func (w *LogWatch) NodeBroken(node, transit string) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pruneLocked(w.o.Clock.Now())
	return w.brokenLocked(node, transit)
}

func (w *LogWatch) pruneLocked(now time.Time) {
	i := 0
	for i < len(w.errs) && now.Sub(w.errs[i].at) > w.o.Window {
		i++
	}
	w.errs = w.errs[i:]
}

// brokenLocked is the rule: the current pair failed, at least MinPairs of
// the node's pairs failed, and fewer than half of the other nodes failed
// via the current transit (if they did too, the relay or the uplink is to
// blame, and rotating nodes would not help).
func (w *LogWatch) brokenLocked(node, transit string) (string, bool) {
	if transit == "" {
		transit = transitAuto
	}
	var pairs []string
	current := false
	others := map[string]bool{}
	for _, e := range w.errs {
		switch {
		case e.node == node:
			if !slices.Contains(pairs, e.transit) {
				pairs = append(pairs, e.transit)
			}
			current = current || e.transit == transit
		case e.transit == transit:
			others[e.node] = true
		}
	}
	if !current || len(pairs) < w.o.MinPairs {
		return "", false
	}
	n := 0
	for _, o := range w.o.Nodes {
		if o != node {
			n++
		}
	}
	if len(others)*2 >= n && len(others) > 0 {
		return "", false
	}
	slices.Sort(pairs)
	return fmt.Sprintf("urltest failed for %s via %s in the last %s (%d of %d other nodes failed via %s)",
		node, strings.Join(pairs, ", "), w.o.Window, len(others), n, transit), true
}

// Node503 reports whether the last Window says node's exit is overloaded:
// its urltest got HTTP 503 via at least MinPairs transits, while fewer
// than half of the other nodes got any 503 (a 503 from the urltest target
// itself would hit every node). This is ADR-0001's storm judged by breadth
// instead of count: 503s via independent relays within one urltest round
// say as much about the exit as ten 503s over minutes, and the engine's G2
// override can start after one round instead of four.
func (w *LogWatch) Node503(node string) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pruneLocked(w.o.Clock.Now())
	var pairs []string
	others := map[string]bool{}
	for _, e := range w.errs {
		switch {
		case !e.is503:
		case e.node == node:
			if !slices.Contains(pairs, e.transit) {
				pairs = append(pairs, e.transit)
			}
		default:
			others[e.node] = true
		}
	}
	if len(pairs) < w.o.MinPairs {
		return "", false
	}
	n := 0
	for _, o := range w.o.Nodes {
		if o != node {
			n++
		}
	}
	if len(others) > 0 && len(others)*2 >= n {
		return "", false
	}
	slices.Sort(pairs)
	return fmt.Sprintf("urltest 503 from %s via %s in the last %s (%d of %d other nodes got 503)",
		node, strings.Join(pairs, ", "), w.o.Window, len(others), n), true
}

// NewTunnel lets the next broken verdict ask for a check at once, without
// waiting out TriggerGap: the gap limits checks about one tunnel, and after
// a (re)connect the question is whether the new tunnel is broken too (a
// G2 reconnect is judged by the first urltest round of the new proxy).
func (w *LogWatch) NewTunnel() {
	w.mu.Lock()
	w.lastFired = time.Time{}
	w.mu.Unlock()
}
