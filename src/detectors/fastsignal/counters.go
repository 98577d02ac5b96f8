package fastsignal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"surflare-watchdog/src/clock"
)

// log is the subsystem logger, looked up at each use so the daemon's
// handler (installed after package init) applies.
func log() *slog.Logger { return slog.Default().With("subsystem", "fastsignal") }

// Defaults of CounterOptions.
const (
	// DefaultCounterInterval is also the signal's latency, and it does not
	// back off on a quiet tunnel: every counter it watches can jump with
	// the next packet (an injected RST, a router service going direct),
	// and nothing announces a counter's move without reading it (nftables
	// sends no event for counters). What was cut instead is the cost of a
	// read (firewall.FastCounters, issue 19).
	DefaultCounterInterval = time.Second
	// DefaultMinJump: fewer new packets than this in one interval is never
	// a jump (a few dropped packets are normal on a router).
	DefaultMinJump = 5
	// DefaultJumpFactor: a delta is a jump only when it is this many times
	// the counter's recent average delta, so a counter that always moves
	// (a router service that keeps trying to go direct) does not trigger
	// a check every interval.
	DefaultJumpFactor = 4
	// DefaultBaseline is how much history the average delta covers.
	DefaultBaseline = 30 * time.Second
	// DefaultBurstMemory is how long a jump is remembered as evidence for
	// the engine's corroboration.
	DefaultBurstMemory = 15 * time.Second
	// minHistory is how many deltas a counter needs before a jump counts.
	minHistory = 3
)

// CounterOptions configure a CounterWatch.
type CounterOptions struct {
	// Read returns the current packet counts by name (one netlink dump per
	// table). Required.
	Read func(ctx context.Context) (map[string]uint64, error)
	// Watch says whether a counter matters, what a jump of it means (e.g.
	// "rst_in" -> "RSTs from relays") and how it is judged. Required.
	Watch func(name string) (r Rule, watched bool)
	// Trigger asks the engine for a check; it must not block.
	Trigger func(reason string)

	Interval    time.Duration
	MinJump     uint64
	JumpFactor  uint64
	Baseline    time.Duration
	BurstMemory time.Duration
	TriggerGap  time.Duration
	Clock       clock.Clock
	// Wake, if set, receives when the kernel logs a packet that a watched
	// counter counts (firewall.CounterWakeLogGroup, through an NFLOG
	// subscription): Run then reads only while the counters move and
	// sleeps on a quiet tunnel (counterwake.go). A closed channel is a
	// subscription that ended: Run polls every Interval from then on.
	Wake <-chan struct{}
}

// Rule is how one counter is judged.
type Rule struct {
	Meaning string
	// AnyRise: the counter should not move at all in normal operation
	// (strict direct's refusals of the proxy's own traffic), so any rise
	// of MinJump in one interval is a jump — no baseline to learn, which
	// a burst that starts with the daemon would otherwise become. If it
	// rises in every one of the last steadyDeltas intervals anyway, it has
	// a rate of its own and is judged like the others.
	AnyRise bool
}

// steadyDeltas: an AnyRise counter that rose in this many consecutive
// intervals has a normal rate.
const steadyDeltas = 10

// Jump is one counter jump.
type Jump struct {
	At    time.Time
	Name  string
	Delta uint64
}

// CounterWatch polls named counters and reports jumps. Safe for concurrent
// use while Run goes.
type CounterWatch struct {
	o CounterOptions

	mu        sync.Mutex
	last      map[string]uint64
	hist      map[string][]sample // deltas within Baseline, oldest first
	jumps     []Jump
	lastFired time.Time
	errLogged bool
	reads     int // successful reads so far

	// Wake-up mode (counterwake.go).
	lastRead time.Time // last committed read
	moved    bool      // a watched counter moved at the last committed read
	slept    bool      // Run slept on wake-ups since the last committed read: every watched counter stood still
}

type sample struct {
	at    time.Time
	delta uint64
}

// NewCounterWatch checks o and fills defaults.
func NewCounterWatch(o CounterOptions) (*CounterWatch, error) {
	if o.Read == nil || o.Watch == nil {
		return nil, errors.New("counter watch: nothing to read or watch")
	}
	if o.Interval <= 0 {
		o.Interval = DefaultCounterInterval
	}
	if o.MinJump == 0 {
		o.MinJump = DefaultMinJump
	}
	if o.JumpFactor == 0 {
		o.JumpFactor = DefaultJumpFactor
	}
	if o.Baseline <= 0 {
		o.Baseline = DefaultBaseline
	}
	if o.BurstMemory <= 0 {
		o.BurstMemory = DefaultBurstMemory
	}
	if o.TriggerGap <= 0 {
		o.TriggerGap = DefaultTriggerGap
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	return &CounterWatch{o: o, last: map[string]uint64{}, hist: map[string][]sample{}}, nil
}

// Run reads every Interval until ctx ends; with Options.Wake, only while
// the watched counters move (counterwake.go).
func (w *CounterWatch) Run(ctx context.Context) error {
	if w.o.Wake != nil {
		return w.runWoken(ctx)
	}
	for {
		w.Tick(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-w.o.Clock.After(w.o.Interval):
		}
	}
}

// Tick reads the counters once and triggers a check on a jump.
func (w *CounterWatch) Tick(ctx context.Context) { w.tick(ctx, false) }

// tick is Tick. A peek (counterwake.go) judges the deltas since the last
// read but keeps them only when one is a jump (kept true); otherwise it
// leaves no trace, so the next read's deltas still span a whole interval.
// ok is false when the read failed.
func (w *CounterWatch) tick(ctx context.Context, peek bool) (ok, kept bool) {
	cs, err := w.o.Read(ctx)
	now := w.o.Clock.Now()
	w.mu.Lock()
	if err != nil {
		first := !w.errLogged
		w.errLogged = true
		w.mu.Unlock()
		if first {
			log().Warn("counter watch: reading counters failed; retrying quietly", "err", err)
		}
		return false, false
	}
	w.errLogged = false
	type update struct {
		name  string
		v     uint64
		fresh bool
		hist  []sample
	}
	var jumps []string
	var found []Jump
	var ups []update
	moved := false
	for name, v := range cs {
		rule, ok := w.o.Watch(name)
		if !ok {
			continue
		}
		prev, seen := w.last[name]
		u := update{name: name, v: v}
		switch {
		case !seen && w.reads == 0:
			ups = append(ups, u)
			continue // the first read: only a starting point
		case !seen || v < prev:
			// A counter that appeared later (its rule was added: strict
			// direct is applied after the first connect) or restarted (its
			// table was re-made) counted from 0 meanwhile. Its packets are
			// all new, and there is no rate to learn: judge it against 0,
			// or a burst that begins with it would become its own baseline.
			prev, u.fresh = 0, true
		}
		d := v - prev
		moved = moved || d > 0
		var h []sample
		if !u.fresh {
			h = w.hist[name]
			if w.slept {
				h = w.quietDeltas(h, now)
			}
		}
		for len(h) > 0 && now.Sub(h[0].at) > w.o.Baseline {
			h = h[1:]
		}
		var sum uint64
		for _, s := range h {
			sum += s.delta
		}
		avg := uint64(0)
		if len(h) > 0 {
			avg = sum / uint64(len(h))
		}
		// Judge a counter known from the start only against a known rate:
		// its first deltas only build the history.
		jump := (u.fresh || len(h) >= minHistory) && d >= w.o.MinJump && d > w.o.JumpFactor*avg
		if rule.AnyRise && !alwaysRose(h) {
			jump = d >= w.o.MinJump
		}
		u.hist = append(h, sample{at: now, delta: d})
		ups = append(ups, u)
		if jump {
			found = append(found, Jump{At: now, Name: name, Delta: d})
			jumps = append(jumps, fmt.Sprintf("%s +%d (%s)", name, d, rule.Meaning))
		}
	}
	if peek && len(jumps) == 0 {
		w.mu.Unlock()
		return true, false
	}
	for _, u := range ups {
		w.last[u.name] = u.v
		if u.hist != nil {
			w.hist[u.name] = u.hist
		} else {
			delete(w.hist, u.name)
		}
	}
	w.jumps = append(w.jumps, found...)
	w.lastRead, w.moved, w.slept = now, moved, false
	w.reads++
	for len(w.jumps) > 0 && now.Sub(w.jumps[0].At) > w.o.BurstMemory {
		w.jumps = w.jumps[1:]
	}
	fire := len(jumps) > 0 && now.Sub(w.lastFired) >= w.o.TriggerGap
	if fire {
		w.lastFired = now
	}
	w.mu.Unlock()
	if fire && w.o.Trigger != nil {
		sort.Strings(jumps)
		w.o.Trigger("COUNTER_JUMP: " + strings.Join(jumps, ", ") + " in " + w.o.Interval.String())
	}
	return true, true
}

// alwaysRose: the last steadyDeltas deltas all moved.
func alwaysRose(h []sample) bool {
	if len(h) < steadyDeltas {
		return false
	}
	for _, s := range h[len(h)-steadyDeltas:] {
		if s.delta == 0 {
			return false
		}
	}
	return true
}

// Recent is the jumps of name within the burst memory.
func (w *CounterWatch) Recent(name string) []Jump {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.o.Clock.Now()
	var out []Jump
	for _, j := range w.jumps {
		if j.Name == name && now.Sub(j.At) <= w.o.BurstMemory {
			out = append(out, j)
		}
	}
	return out
}

// Names is a CounterOptions.Watch over a fixed table of names and rules.
func Names(m map[string]Rule) func(string) (Rule, bool) {
	return func(name string) (Rule, bool) {
		r, ok := m[name]
		return r, ok
	}
}
