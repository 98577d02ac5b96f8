// Package storm503 watches for bursts of HTTP 503 in the proxy's urltest
// results (ADR-0001): an exit node that answers 503 is overloaded, and the
// probes can still pass because they hit a cached or lighter path. A burst —
// at least Count 503s within Window — is a storm: the monitor writes its
// evidence to <run_dir>/surflare_503_state, asks the engine for an immediate
// check through an injected trigger, and OverrideActive tells the engine to
// reconnect even when the proxy-path probe passes, for as long as 503s keep
// coming (the last one at most ActiveWindow ago).
//
// The monitor is fed by loghealth.Monitor's OnLine hook: it has no reader of
// its own.
package storm503

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"surflare-watchdog/src/config"
	"surflare-watchdog/src/runfiles"
)

// log is the subsystem logger, looked up at each use: one taken at package
// init would keep the default handler from before the program installed
// its own (lines would lose their level and attributes).
func log() *slog.Logger { return slog.Default().With("subsystem", "storm503") }

// maxKept bounds the 503 times held: the count only needs to reach Count,
// but the evidence file reports the real number, up to this.
const maxKept = 10000

// writeEvery limits how often the state file is rewritten while a storm
// goes on (every 503 would otherwise be a write).
const writeEvery = time.Second

// Options configure a Monitor; zero values take the config defaults.
type Options struct {
	Count        int           // 503s within Window that make a storm (10)
	Window       time.Duration // counting window (300 s)
	ActiveWindow time.Duration // the storm is over once the last 503 is older than this (60 s)
	// StateFile is <run_dir>/surflare_503_state; "" = no file.
	StateFile string
	// Trigger asks the engine for an immediate check; called once when a
	// storm starts, without locks held. It must not block.
	Trigger func(reason string)
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// FromConfig fills Options from the config's storm503 section; the state
// file goes to the run directory.
func FromConfig(c *config.Config, trigger func(string)) Options {
	return Options{
		Count:        c.Storm503.Count,
		Window:       c.Storm503.Window,
		ActiveWindow: c.Storm503.ActiveWindow,
		StateFile:    filepath.Join(c.Paths.RunDir, runfiles.Storm503File),
		Trigger:      trigger,
	}
}

// State is the evidence, as written to the state file (JSON field names are
// stable):
//
//	{"count": 12, "threshold": 10, "window_s": 300, "active_window_s": 60,
//	 "since": "2026-11-29T14:03:11Z", "last_503": "2026-11-29T14:05:40Z",
//	 "active_until": "2026-11-29T14:06:40Z"}
//
// count is the 503s in the window ending at the time of writing; since is
// when the storm started; active_until is when OverrideActive turns false
// unless another 503 comes. The file is rewritten at most once a second
// while a storm lasts, and kept after it ends (active_until says it did).
type State struct {
	Count         int       `json:"count"`
	Threshold     int       `json:"threshold"`
	WindowS       int       `json:"window_s"`
	ActiveWindowS int       `json:"active_window_s"`
	Since         time.Time `json:"since"`
	Last503       time.Time `json:"last_503"`
	ActiveUntil   time.Time `json:"active_until"`
}

// Monitor counts urltest 503s. Safe for concurrent use.
type Monitor struct {
	o Options

	mu        sync.Mutex
	times     []time.Time // 503 times within the window, oldest first
	since     time.Time   // start of the current storm; zero when none
	lastWrite time.Time
}

// New fills the defaults of o.
func New(o Options) *Monitor {
	d := config.Default().Storm503
	if o.Count <= 0 {
		o.Count = d.Count
	}
	if o.Window <= 0 {
		o.Window = d.Window
	}
	if o.ActiveWindow <= 0 {
		o.ActiveWindow = d.ActiveWindow
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Monitor{o: o}
}

// Record counts one urltest 503 logged at t (the line's timestamp; a time in
// the future is taken as now). Lines older than the window, such as those of
// the log tail read at start, count for nothing.
func (m *Monitor) Record(t time.Time) {
	now := m.o.Now()
	if t.IsZero() || t.After(now) {
		t = now
	}
	m.mu.Lock()
	m.pruneLocked(now)
	if !t.After(now.Add(-m.o.Window)) {
		m.mu.Unlock()
		return
	}
	i := len(m.times)
	for i > 0 && m.times[i-1].After(t) {
		i--
	}
	m.times = append(m.times, time.Time{})
	copy(m.times[i+1:], m.times[i:])
	m.times[i] = t
	if len(m.times) > maxKept {
		m.times = m.times[len(m.times)-maxKept:]
	}
	started := false
	if m.since.IsZero() && m.activeLocked(now) {
		m.since, started = now, true
	}
	var st *State
	if !m.since.IsZero() && (started || now.Sub(m.lastWrite) >= writeEvery) {
		s := m.stateLocked(now)
		st = &s
		m.lastWrite = now
	}
	m.mu.Unlock()

	if st == nil {
		return
	}
	if started {
		log().Warn(fmt.Sprintf("503 storm: %d urltest 503 in %s", st.Count, m.o.Window))
	}
	if m.o.StateFile != "" {
		if err := runfiles.WriteJSON(m.o.StateFile, st); err != nil {
			log().Warn("writing 503 state", "err", err)
		}
	}
	if started && m.o.Trigger != nil {
		m.o.Trigger(fmt.Sprintf("503 storm: %d urltest 503", st.Count))
	}
}

// Reset forgets every 503 counted so far: the node they came from is no
// longer the one in use, and its storm is not the new node's.
func (m *Monitor) Reset() {
	m.mu.Lock()
	m.times, m.since = nil, time.Time{}
	m.mu.Unlock()
}

// pruneLocked forgets 503s older than the window, and the storm once it is
// over, so the next one triggers again.
func (m *Monitor) pruneLocked(now time.Time) {
	cut := now.Add(-m.o.Window)
	i := 0
	for i < len(m.times) && !m.times[i].After(cut) {
		i++
	}
	m.times = m.times[i:]
	if !m.since.IsZero() && !m.activeLocked(now) {
		log().Info(fmt.Sprintf("503 storm over: %d urltest 503 in %s", len(m.times), m.o.Window))
		m.since = time.Time{}
	}
}

// activeLocked is the storm condition: Count 503s in the window and the
// last one recent.
func (m *Monitor) activeLocked(now time.Time) bool {
	n := len(m.times)
	return n >= m.o.Count && now.Sub(m.times[n-1]) <= m.o.ActiveWindow
}

// OverrideActive reports whether a 503 storm is going on at now: the engine
// then reconnects even when probe 7 passes ("G2: 503 storm override").
func (m *Monitor) OverrideActive(now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pruneLocked(now)
	return m.activeLocked(now)
}

// Active is OverrideActive, under the name the engine's signal list uses.
func (m *Monitor) Active(now time.Time) bool { return m.OverrideActive(now) }

// State is the current evidence; Since is zero when there is no storm.
func (m *Monitor) State(now time.Time) State {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pruneLocked(now)
	return m.stateLocked(now)
}

func (m *Monitor) stateLocked(now time.Time) State {
	s := State{
		Count:         len(m.times),
		Threshold:     m.o.Count,
		WindowS:       int(m.o.Window / time.Second),
		ActiveWindowS: int(m.o.ActiveWindow / time.Second),
		Since:         m.since,
	}
	if n := len(m.times); n > 0 {
		s.Last503 = m.times[n-1]
		if n >= m.o.Count {
			// Over when the last 503 ages past ActiveWindow, or when the
			// Count-th newest leaves the window, whichever is first.
			s.ActiveUntil = s.Last503.Add(m.o.ActiveWindow)
			if leave := m.times[n-m.o.Count].Add(m.o.Window); leave.Before(s.ActiveUntil) {
				s.ActiveUntil = leave
			}
		}
	}
	return s
}
