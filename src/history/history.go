// Package history keeps the last day of the tunnel's health, for the
// uptime strip the web UI and LuCI draw ("was it down tonight, and when?").
//
// A household asks what happened, not what the state machine did: so the
// record is a sequence of spans, each one of a few plain states (up,
// degraded, down, paused), plus the rotations, and a strip is that record
// cut into equal buckets, each saying how much of it was down and what the
// worst moment was. Memory is bounded: consecutive observations of the same
// state extend one span, spans older than Keep are dropped, and at most
// MaxSpans are kept (a flapping tunnel merges its oldest spans first).
package history

import (
	"sync"
	"time"
)

// State is how the household's Internet was, in the strip's words.
type State string

// States, from best to worst (worse wins in a bucket).
const (
	Unknown  State = ""         // the daemon was not running or had not checked yet
	Paused   State = "paused"   // supervision off on purpose: diagnostics, WAN down, disabled
	Up       State = "up"       // the tunnel worked
	Degraded State = "degraded" // it worked, with a fault being handled (a rotation under way, a node slow)
	Down     State = "down"     // the LAN had no Internet (kill switch holding)
)

func rank(s State) int {
	switch s {
	case Paused:
		return 1
	case Up:
		return 2
	case Degraded:
		return 3
	case Down:
		return 4
	}
	return 0
}

// Defaults.
const (
	DefaultKeep     = 24 * time.Hour
	DefaultMaxSpans = 2048
)

type span struct {
	from  time.Time
	state State
}

// Recorder holds the record. The zero value is not usable; use New.
type Recorder struct {
	keep     time.Duration
	maxSpans int

	mu        sync.Mutex
	spans     []span      // in time order; each lasts until the next one's from (the last until now)
	rotations []time.Time // in time order
}

// New returns an empty recorder keeping keep (DefaultKeep when 0).
func New(keep time.Duration) *Recorder {
	if keep <= 0 {
		keep = DefaultKeep
	}
	return &Recorder{keep: keep, maxSpans: DefaultMaxSpans}
}

// Observe records that the state is s from at on. Observations out of time
// order (a clock stepped back) are taken as happening at the last one's time
// so the record stays ordered.
func (r *Recorder) Observe(at time.Time, s State) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.spans); n > 0 {
		last := r.spans[n-1]
		if at.Before(last.from) {
			at = last.from
		}
		if last.state == s {
			return
		}
		if at.Equal(last.from) {
			r.spans[n-1].state = s
			return
		}
	}
	r.spans = append(r.spans, span{from: at, state: s})
	r.trimLocked(at)
}

// Rotation records a node rotation at at.
func (r *Recorder) Rotation(at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.rotations); n > 0 && at.Before(r.rotations[n-1]) {
		at = r.rotations[n-1]
	}
	r.rotations = append(r.rotations, at)
	r.trimLocked(at)
}

func (r *Recorder) trimLocked(now time.Time) {
	cut := now.Add(-r.keep)
	// Keep the span that covers cut: it says what the state was then.
	i := 0
	for i+1 < len(r.spans) && !r.spans[i+1].from.After(cut) {
		i++
	}
	r.spans = r.spans[i:]
	for len(r.spans) > r.maxSpans {
		// Merge the two oldest spans into the worse of them.
		a, b := r.spans[0], r.spans[1]
		if rank(b.state) > rank(a.state) {
			a.state = b.state
		}
		r.spans[1] = span{from: a.from, state: a.state}
		r.spans = r.spans[1:]
	}
	j := 0
	for j < len(r.rotations) && r.rotations[j].Before(cut) {
		j++
	}
	r.rotations = r.rotations[j:]
}

// Bucket is one cell of the strip.
type Bucket struct {
	From      time.Time `json:"from"`
	Worst     State     `json:"worst"`     // the worst state seen in the bucket
	DownS     float64   `json:"down_s"`    // seconds the LAN had no Internet
	UpS       float64   `json:"up_s"`      // seconds up or degraded
	KnownS    float64   `json:"known_s"`   // seconds with any known state
	Rotations int       `json:"rotations"` // node rotations in the bucket
}

// Strip is the record over the span that ends at now, cut into n buckets.
type Strip struct {
	From      time.Time `json:"from"`
	To        time.Time `json:"to"`
	BucketS   float64   `json:"bucket_s"`
	Buckets   []Bucket  `json:"buckets"`
	UptimePct float64   `json:"uptime_pct"` // up share of the known time, 0–100; -1 when nothing is known
	Outages   []Outage  `json:"outages"`    // every down span that overlaps the strip, oldest first
}

// Outage is one span during which the LAN had no Internet.
type Outage struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"` // now when still down
	Open bool      `json:"open,omitempty"`
}

// Strip cuts the last length of the record (ending at now) into n buckets.
func (r *Recorder) Strip(now time.Time, length time.Duration, n int) Strip {
	if n <= 0 {
		n = 1
	}
	r.mu.Lock()
	spans := append([]span(nil), r.spans...)
	rots := append([]time.Time(nil), r.rotations...)
	r.mu.Unlock()

	from := now.Add(-length)
	step := length / time.Duration(n)
	st := Strip{From: from, To: now, BucketS: step.Seconds(), Buckets: make([]Bucket, n), UptimePct: -1}
	for i := range st.Buckets {
		st.Buckets[i].From = from.Add(time.Duration(i) * step)
	}
	bucketOf := func(t time.Time) int {
		i := int(t.Sub(from) / step)
		if i >= n {
			i = n - 1
		}
		return i
	}
	var up, known float64
	for k, s := range spans {
		end := now
		if k+1 < len(spans) {
			end = spans[k+1].from
		}
		a, b := maxTime(s.from, from), minTime(end, now)
		if s.state == Down && b.After(s.from) && end.After(from) {
			st.Outages = append(st.Outages, Outage{From: s.from, To: minTime(end, now), Open: k+1 == len(spans)})
		}
		if !b.After(a) || s.state == Unknown {
			continue
		}
		// Spread [a, b) over the buckets it covers.
		for t := a; t.Before(b); {
			i := bucketOf(t)
			bEnd := minTime(st.Buckets[i].From.Add(step), b)
			if i == n-1 {
				bEnd = b
			}
			d := bEnd.Sub(t).Seconds()
			bk := &st.Buckets[i]
			bk.KnownS += d
			switch s.state {
			case Down:
				bk.DownS += d
			case Up, Degraded:
				bk.UpS += d
				up += d
			}
			if s.state != Paused {
				known += d
			}
			if rank(s.state) > rank(bk.Worst) {
				bk.Worst = s.state
			}
			t = bEnd
		}
	}
	for _, t := range rots {
		if !t.Before(from) && !t.After(now) {
			st.Buckets[bucketOf(t)].Rotations++
		}
	}
	if known > 0 {
		st.UptimePct = 100 * up / known
	}
	return st
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// ForEngineState maps the watchdog engine's state names to what the
// household had: connecting, cooling down and waiting for a login all hold
// the LAN offline behind the kill switch, so they are Down; diagnostics and
// a WAN outage are Paused (not the tunnel's doing); fail-open works but
// unprotected, which is Degraded.
func ForEngineState(s string) State {
	switch s {
	case "healthy":
		return Up
	case "degraded", "fail_open":
		return Degraded
	case "diag", "wan_down":
		return Paused
	case "connecting", "starting", "disconnected", "blocked", "storm_cooldown", "auth_wait", "auth_failed", "subscription_inactive":
		return Down
	}
	return Unknown
}

// View is what the API and ubus serve: the strip, drawn and summed up.
type View struct {
	Strip
	SVG     string `json:"svg"`
	Summary string `json:"summary"`
}

// View cuts the record like Strip and adds the drawing and the sentence.
func (r *Recorder) View(now time.Time, length time.Duration, n int) View {
	s := r.Strip(now, length, n)
	return View{Strip: s, SVG: s.SVG(), Summary: s.Summary()}
}
