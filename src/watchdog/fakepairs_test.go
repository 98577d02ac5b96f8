package watchdog

import (
	"strings"
	"time"

	"surflare-watchdog/src/detectors/loghealth"
)

// urltestEvery is the fake proxy's urltest round interval.
const urltestEvery = 5 * time.Second

// pairErr is one node/transit pair's urltest errors in the fake log.
type pairErr struct {
	n    int
	last time.Time
}

// fakePairs is log health with per-pair error times, as loghealth.Monitor
// gives it (NodeHealth and PairReporter). While a proxy runs, every report
// first lets it urltest: each node via each of world.urltest that cannot
// carry traffic (dead node or bad transit) gets an error now, as the real
// proxy logs failures and stays silent on success.
type fakePairs struct{ w *world }

func (f fakePairs) urltestLocked(now time.Time) {
	w := f.w
	if w.connected == "" || w.proxyDown {
		return
	}
	for _, n := range DefaultSettings().Candidates {
		for _, t := range w.urltest {
			if w.dead[n] || w.badTransit[t] {
				// One round at proxy start, then one per urltestEvery.
				k := loghealth.Key(n, t)
				p := w.pairs[k]
				var add int
				if p.last.Before(w.proxySince) {
					add = 1 + int(now.Sub(w.proxySince)/urltestEvery)
				} else {
					add = int(now.Sub(p.last) / urltestEvery)
				}
				if add > 0 { // the last round's time
					last := w.proxySince.Add(now.Sub(w.proxySince) / urltestEvery * urltestEvery)
					w.pairs[k] = pairErr{n: p.n + add, last: last}
				}
			}
		}
	}
}

func (f fakePairs) Errors(node, transit string) (int, time.Time, bool) {
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	now := time.Now()
	f.urltestLocked(now)
	p, ok := f.w.pairs[loghealth.Key(node, transit)]
	return p.n, now, ok
}

func (f fakePairs) Report() loghealth.Report {
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	now := time.Now()
	f.urltestLocked(now)
	r := loghealth.Report{GeneratedAt: now, Threshold: 10, Nodes: map[string]loghealth.PairHealth{}}
	for k, p := range f.w.pairs {
		node, transit, _ := cutPair(k)
		r.Nodes[k] = loghealth.PairHealth{Node: node, Transit: transit, ErrorCount: p.n,
			UrltestHealthy: p.n <= 10, LastErrorAt: p.last.Truncate(time.Second)} // log lines carry whole seconds
	}
	return r
}

func cutPair(k string) (node, transit string, ok bool) {
	i := strings.LastIndex(k, " via ")
	if i < 0 {
		return k, "", false
	}
	return k[:i], k[i+len(" via "):], true
}

// withPairs wires fakePairs as the node health.
func withPairs(wd *world) func(*Deps) {
	return func(d *Deps) { d.NodeHealth = fakePairs{wd} }
}
