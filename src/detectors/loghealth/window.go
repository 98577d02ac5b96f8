package loghealth

import (
	"sort"
	"time"
)

// Memory bounds of the tracker. A log can name any node the pattern
// matches, so the number of pairs and the errors kept per pair are capped:
// past the cap a pair's count saturates (it is dead either way) and new
// pairs are dropped and counted in Stats.DroppedPairs.
const (
	maxPairs         = 1024
	maxErrorsPerPair = 4096
)

// pairWindow is the recent errors of one node/transit pair.
type pairWindow struct {
	node, transit string
	times         []time.Time // error times, oldest first (mostly; see add)
	lastError     string
	lastAt        time.Time
}

// Tracker counts urltest errors per node/transit pair over a sliding window.
// It is not safe for concurrent use; Monitor guards it.
type Tracker struct {
	window    time.Duration
	threshold int
	pairs     map[string]*pairWindow
	dropped   int
}

// NewTracker counts errors over window; a pair with more than threshold
// errors in the window is unhealthy.
func NewTracker(window time.Duration, threshold int) *Tracker {
	return &Tracker{window: window, threshold: threshold, pairs: map[string]*pairWindow{}}
}

// Add records one urltest error at time at.
func (t *Tracker) Add(l Line, at time.Time) {
	k := l.Key()
	p := t.pairs[k]
	if p == nil {
		if len(t.pairs) >= maxPairs {
			t.dropped++
			return
		}
		p = &pairWindow{node: l.Node, transit: l.Transit}
		t.pairs[k] = p
	}
	// Lines arrive in log order, except across a rotation; keep the slice
	// sorted so pruning can cut a prefix.
	i := len(p.times)
	for i > 0 && p.times[i-1].After(at) {
		i--
	}
	p.times = append(p.times, time.Time{})
	copy(p.times[i+1:], p.times[i:])
	p.times[i] = at
	if len(p.times) > maxErrorsPerPair {
		p.times = p.times[len(p.times)-maxErrorsPerPair:]
	}
	if !at.Before(p.lastAt) {
		p.lastAt, p.lastError = at, l.Error
	}
}

// prune drops errors older than the window ending at now, and pairs with no
// error left.
func (t *Tracker) prune(now time.Time) {
	cut := now.Add(-t.window)
	for k, p := range t.pairs {
		i := sort.Search(len(p.times), func(i int) bool { return p.times[i].After(cut) })
		p.times = p.times[i:]
		if len(p.times) == 0 {
			delete(t.pairs, k)
		}
	}
}

// Count is the number of errors of node/transit in the window ending at now.
func (t *Tracker) Count(node, transit string, now time.Time) (int, bool) {
	p := t.pairs[Key(node, transit)]
	if p == nil {
		return 0, false
	}
	cut := now.Add(-t.window)
	i := sort.Search(len(p.times), func(i int) bool { return p.times[i].After(cut) })
	n := len(p.times) - i
	return n, n > 0
}

// Report is the tracker's view at now, in the node health file's shape.
func (t *Tracker) Report(now time.Time) Report {
	t.prune(now)
	r := Report{
		GeneratedAt:   now.UTC().Truncate(time.Second),
		WindowMinutes: int(t.window / time.Minute),
		Threshold:     t.threshold,
		Nodes:         make(map[string]PairHealth, len(t.pairs)),
	}
	for k, p := range t.pairs {
		r.Nodes[k] = PairHealth{
			Node:           p.node,
			Transit:        p.transit,
			ErrorCount:     len(p.times),
			UrltestHealthy: len(p.times) <= t.threshold,
			LastError:      p.lastError,
			LastErrorAt:    p.lastAt.UTC(),
		}
	}
	return r
}
