package watchdog

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"surflare-watchdog/src/detectors/loghealth"
)

// PairReporter is optionally implemented by Deps.NodeHealth
// (loghealth.Monitor does): the whole node/transit table with when each
// pair last failed. Counts alone cannot tell an error from before a storm
// cooldown from one a minute ago, nor name the transits the proxy tests;
// with this the engine ignores pre-cooldown errors and switches transit.
// Without it those two decisions are skipped and counts decide alone.
type PairReporter interface {
	Report() loghealth.Report
}

// TransitAuto is the transit value that lets the vendor pick a relay.
const TransitAuto = "auto"

// pairsLocked is the fresh log-health table, or false when there is none
// (no reporter, or data older than LogHealthStale).
func (w *Watchdog) pairsLocked() (map[string]loghealth.PairHealth, bool) {
	pr, ok := w.d.NodeHealth.(PairReporter)
	if !ok || pr == nil {
		return nil, false
	}
	r := pr.Report()
	if r.GeneratedAt.IsZero() || w.clock.Now().Sub(r.GeneratedAt) > w.s.LogHealthStale {
		return nil, false
	}
	w.learnTransitsLocked(r.Nodes)
	return r.Nodes, true
}

// learnTransitsLocked remembers every transit log health names: once a
// relay has failed for some node, it is known to exist.
func (w *Watchdog) learnTransitsLocked(pairs map[string]loghealth.PairHealth) {
	changed := false
	for _, p := range pairs {
		if p.Transit != "" && !slices.Contains(w.mem.Transits, p.Transit) {
			w.mem.Transits = append(w.mem.Transits, p.Transit)
			changed = true
		}
	}
	if changed {
		slices.Sort(w.mem.Transits)
		w.saveMemoryLocked()
	}
}

// knownTransitsLocked: the configured default and list, and the learned.
func (w *Watchdog) knownTransitsLocked() []string {
	known := append([]string{w.s.Transit}, w.s.Transits...)
	known = append(known, w.mem.Transits...)
	slices.Sort(known)
	return slices.Compact(known)
}

// lastErrorLocked is when node via transit last failed its urltest.
func (w *Watchdog) lastErrorLocked(node, transit string) (time.Time, bool) {
	pairs, ok := w.pairsLocked()
	if !ok {
		return time.Time{}, false
	}
	p, ok := pairs[loghealth.Key(node, transit)]
	if !ok || p.ErrorCount == 0 {
		return time.Time{}, false
	}
	return p.LastErrorAt, true
}

// deadLocked applies the log-health policy on the current transit: more
// than LogHealthThreshold urltest errors, in data younger than
// LogHealthStale, of which the last is not older than the last storm
// cooldown's start (logSince: the proxy was stopped during the cooldown, so
// those errors say nothing about a node that came back meanwhile).
func (w *Watchdog) deadLocked(node string) (bool, int) {
	if w.d.NodeHealth == nil {
		return false, 0
	}
	n, updated, ok := w.d.NodeHealth.Errors(node, w.transit)
	if !ok {
		return false, 0
	}
	if w.clock.Now().Sub(updated) > w.s.LogHealthStale {
		return false, n // stale: treat every node as healthy
	}
	if !w.logSince.IsZero() {
		if last, ok := w.lastErrorLocked(node, w.transit); ok && last.Before(w.logSince) {
			return false, n // nothing since the cooldown started
		}
	}
	return n > w.s.LogHealthThreshold, n
}

// freshErrorsLocked reports whether node failed its urltest on the current
// transit at or after since: evidence that a failed connect was the node,
// not a transient.
func (w *Watchdog) freshErrorsLocked(node string, since time.Time) bool {
	last, ok := w.lastErrorLocked(node, w.transit)
	// Log lines carry whole seconds: the proxy's first urltest round runs
	// within the second the connect started.
	return ok && !last.Before(since.Truncate(logTimeResolution))
}

// logTimeResolution is the precision of the proxy log's timestamps.
const logTimeResolution = time.Second

// oldestErrorLocked picks, among nodes all marked dead, the one whose last
// urltest error is oldest: the likeliest to have come back. Without error
// times it is the first.
func (w *Watchdog) oldestErrorLocked(nodes []string) string {
	best, bestAt := nodes[0], time.Time{}
	for i, n := range nodes {
		at, ok := w.lastErrorLocked(n, w.transit)
		if !ok {
			return n // no error time at all: as good as it gets
		}
		if i == 0 || at.Before(bestAt) {
			best, bestAt = n, at
		}
	}
	return best
}

// switchTransitLocked: node is being given up on. Before rotating away,
// check whether the transit is to blame: when log health shows node
// failing via the current transit since the tunnel last worked (for
// "auto": node failing via one of the relays auto tries first), and a
// transit the proxy also tests is clean for node in that time, reconnect
// node via that transit instead. It reports whether it did.
//
// The chosen transit then stays for later rotations until a reload
// changes the configured one or a storm cooldown starts a fresh cycle.
func (w *Watchdog) switchTransitLocked(node, reason string) bool {
	pairs, ok := w.pairsLocked()
	if !ok {
		return false
	}
	since := w.lastHealthyAt
	if w.logSince.After(since) {
		since = w.logSince
	}
	recent := func(n, t string) int {
		p, ok := pairs[loghealth.Key(n, t)]
		if !ok || p.LastErrorAt.Before(since) {
			return 0
		}
		return p.ErrorCount
	}
	known := w.knownTransitsLocked()

	cur := w.transit
	curErrs := recent(node, cur)
	if curErrs == 0 && cur == TransitAuto {
		// auto tries relays in the vendor's order; one failing for this
		// node costs every connection a timeout before the next relay.
		for _, t := range known {
			if t != TransitAuto {
				curErrs = max(curErrs, recent(node, t))
			}
		}
	}
	if curErrs == 0 {
		return false
	}
	// Transit-wide errors since then: the fewer, the better the relay.
	wide := func(t string) int {
		n := 0
		for _, c := range w.s.candidates() {
			n += recent(c, t)
		}
		return n
	}
	var alts []string
	for _, t := range known {
		if t == cur || t == "" || w.triedTransit[loghealth.Key(node, t)] || recent(node, t) > 0 {
			continue
		}
		if t == TransitAuto && w.relayFailingLocked(node, known, recent) {
			continue // auto would walk into the failing relay again
		}
		alts = append(alts, t)
	}
	if len(alts) == 0 {
		return false
	}
	slices.SortStableFunc(alts, func(a, b string) int {
		if c := cmp.Compare(wide(a), wide(b)); c != 0 {
			return c
		}
		// The configured default first, then named relays before auto.
		return cmp.Compare(rank(a, w.s.Transit), rank(b, w.s.Transit))
	})
	alt := alts[0]
	w.triedTransit[loghealth.Key(node, cur)] = true
	delete(w.tried, node)
	w.transit = alt
	w.counters.TransitSwitches++
	w.logLocked(slog.LevelWarn, fmt.Sprintf("Transit switch: %s via %s -> %s via %s (%d recent urltest errors via %s, none via %s)",
		node, cur, node, alt, curErrs, cur, alt), "reason", reason)
	w.startConnectLocked(node, "transit switch: "+reason, byEngine)
	return true
}

// relayFailingLocked: some named relay has recent errors for node.
func (w *Watchdog) relayFailingLocked(node string, known []string, recent func(n, t string) int) bool {
	for _, t := range known {
		if t != TransitAuto && recent(node, t) > 0 {
			return true
		}
	}
	return false
}

func rank(t, configured string) int {
	switch {
	case t == configured:
		return 0
	case t != TransitAuto:
		return 1
	}
	return 2
}

// urltestFailingSince reports whether the proxy's own urltest has failed on
// node via s.Transit at or after since, in fresh log health. The connect
// sequence asks it while it waits for a new tunnel's data plane: a node the
// proxy itself cannot reach will not come up within Phase2Timeout either,
// so waiting out that minute (as the seed did) only keeps the LAN down; the
// same evidence sends a finished connect to the next node (cascade). It
// runs outside the loop, so it reads the reporter, never watchdog state.
func (w *Watchdog) urltestFailingSince(s Settings, node string, since time.Time) bool {
	pr, ok := w.d.NodeHealth.(PairReporter)
	if !ok || pr == nil {
		return false
	}
	r := pr.Report()
	if r.GeneratedAt.IsZero() || w.clock.Now().Sub(r.GeneratedAt) > s.LogHealthStale {
		return false
	}
	p, ok := r.Nodes[loghealth.Key(node, s.Transit)]
	// Log lines carry whole seconds: the proxy's first urltest round runs
	// within the second the connect started.
	return ok && p.ErrorCount > 0 && !p.LastErrorAt.Before(since.Truncate(logTimeResolution))
}
