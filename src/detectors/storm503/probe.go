package storm503

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Probe is the 503 storm's own question, which does not rest on the
// vendor's urltest (issue 19). The Monitor counts the urltest's 503s, so it
// sees a storm no sooner than the vendor's cadence: every 5 s in the old
// lab, every 3 min in stock sing-box, unknown for the real client. A 503 is
// a connection that worked and an answer that did not, so the
// failed-connection log never shows it either. The Probe asks the same
// endpoint the urltest asks for (storm503.probe_url) through the tunnel,
// every Interval, on a fresh connection each time as the urltest does (a
// kept-alive one would go on reaching the server it reached before).
//
// A 503 is asked again at once, on another fresh connection: one 503 may be
// one busy server behind the exit, two in a row from the node in use is its
// storm. Then the engine is asked for a check (once per storm) and Storm
// names the node in use for as long as the answers stay 503 (the last one
// at most ActiveWindow ago): the override of ADR-0001, which first
// reconnects the node and rotates only if the storm outlives the
// reconnect. Any other answer ends the storm; no answer says nothing about
// 503s (dead nodes are the other detectors'), and neither the probe nor
// its storm ever rotates alone: the engine's check and the override's
// reconnect-first rule decide.
type Probe struct {
	o    ProbeOptions
	poke chan struct{}

	mu       sync.Mutex
	node     string    // the node whose exit storms; "" = no storm
	since    time.Time // when the storm was confirmed
	last     time.Time // the last confirmed 503
	n        int       // confirmed rounds of this storm
	lastMiss time.Time // the last Miss call
}

// ProbeOptions configure a Probe.
type ProbeOptions struct {
	// Interval between rounds; 0 turns the probe off (Run returns).
	Interval time.Duration
	// ActiveWindow: the storm is over once its last 503 is older (the
	// Monitor's, storm503.active_window).
	ActiveWindow time.Duration
	// Ask makes one request for the connectivity endpoint through the
	// tunnel on a fresh connection: the HTTP status, or an error when no
	// answer came. Required.
	Ask func(ctx context.Context) (status int, err error)
	// Node is the node in use ("" = none: no round). Required.
	Node func() string
	// Active reports whether the tunnel should be up now (not connecting);
	// nil means always.
	Active func() bool
	// Trigger asks the engine for a check; called once per storm, without
	// locks held. It must not block. Required.
	Trigger func(reason string)
	// Miss, if set, is told when two asks in a row got no answer at all
	// (one lost handshake is no dead path), at most once per MissGap. The
	// probe's requests prove the path to every counter that watches for
	// traffic through the tunnel, so the idle probe never sees an idle
	// tunnel while this one runs: this is the heartbeat then, and a miss
	// is its miss. It must not block.
	Miss func(node string, err error)
	// MissGap is the least time between two Miss calls (10 s when 0).
	MissGap time.Duration
	// URL is the endpoint, for the messages.
	URL string
	// Now is the clock (time.Now when nil); Run's timer is the time
	// package's, so tests run it in a testing/synctest bubble.
	Now func() time.Time
}

// NewProbe returns a probe; Run starts it.
func NewProbe(o ProbeOptions) *Probe {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.ActiveWindow <= 0 {
		o.ActiveWindow = 60 * time.Second
	}
	if o.MissGap <= 0 {
		o.MissGap = 10 * time.Second
	}
	return &Probe{o: o, poke: make(chan struct{}, 1)}
}

// Run asks every Interval, and at once after NewTunnel, until ctx ends.
func (p *Probe) Run(ctx context.Context) {
	if p == nil || p.o.Interval <= 0 || p.o.Ask == nil || p.o.Node == nil || p.o.Trigger == nil {
		return
	}
	t := time.NewTimer(p.o.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-p.poke:
			if !t.Stop() {
				select {
				case <-t.C:
				default:
				}
			}
		}
		p.Round(ctx)
		t.Reset(p.o.Interval)
	}
}

// NewTunnel forgets the storm and asks at once: a new state (a reconnect,
// a rotation) is a new question, and the reconnect-first rule needs to
// know quickly whether the fresh tunnel still gets 503s.
func (p *Probe) NewTunnel() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.node, p.n = "", 0
	p.mu.Unlock()
	select {
	case p.poke <- struct{}{}:
	default:
	}
}

// Round is one round: a request and, on a 503, the confirming one.
func (p *Probe) Round(ctx context.Context) {
	if p.o.Active != nil && !p.o.Active() {
		return
	}
	node := p.o.Node()
	if node == "" {
		return
	}
	st, err := p.o.Ask(ctx)
	if err != nil && ctx.Err() == nil {
		st, err = p.o.Ask(ctx) // one lost handshake is no dead path
		if err != nil && ctx.Err() == nil {
			p.missed(node, err)
		}
	}
	if err != nil {
		return // no answer: not a 503 (a dead node is Miss's, and the other detectors')
	}
	if st != http.StatusServiceUnavailable {
		p.end(node)
		return
	}
	st, err = p.o.Ask(ctx) // one 503 may be one busy server
	if err != nil {
		return
	}
	if st != http.StatusServiceUnavailable {
		p.end(node)
		return
	}
	if p.o.Node() != node {
		return // the tunnel moved meanwhile: these answers are nobody's now
	}
	now := p.o.Now()
	p.mu.Lock()
	started := p.node != node
	if started {
		p.node, p.since, p.n = node, now, 0
	}
	p.last = now
	p.n++
	p.mu.Unlock()
	if started {
		log().Warn(fmt.Sprintf("503 storm: the exit of %s answered %s with 503 twice in a row", node, p.o.URL))
		p.o.Trigger(fmt.Sprintf("STORM503_PROBE: the exit of %s answered the connectivity check with 503 twice in a row", node))
	}
}

// missed reports two unanswered asks on node, at most once per MissGap.
func (p *Probe) missed(node string, err error) {
	if p.o.Miss == nil || p.o.Node() != node {
		return
	}
	now := p.o.Now()
	p.mu.Lock()
	due := p.lastMiss.IsZero() || now.Sub(p.lastMiss) >= p.o.MissGap
	if due {
		p.lastMiss = now
	}
	p.mu.Unlock()
	if due {
		p.o.Miss(node, err)
	}
}

// end closes node's storm: its exit answered something else.
func (p *Probe) end(node string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.node == node {
		log().Info(fmt.Sprintf("503 storm on %s over: the connectivity check answers again", node))
		p.node, p.n = "", 0
	}
}

// Storm names node's storm while it lasts: node is the node in use, its
// exit answered 503 twice in a row, nothing else since, the last time at
// most ActiveWindow ago.
func (p *Probe) Storm(node string, now time.Time) (string, bool) {
	if p == nil || node == "" {
		return "", false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.node != node || now.Sub(p.last) > p.o.ActiveWindow {
		return "", false
	}
	return fmt.Sprintf("our probe of %s got 503 from the exit of %s in %d rounds since %s", p.o.URL, node, p.n, p.since.Format("15:04:05")), true
}
