// Package loghealth turns the proxy's urltest errors into per node/transit
// health: which exit nodes, through which transit, failed the proxy's own
// connectivity tests recently. The watchdog skips a dead node when it
// rotates (LOG_HEALTH: skipping X via Y), and LuCI shows the table.
//
// The proxy logs urltest failures at ERROR and is silent on success
// (SURFLARE-CONTRACT.md). Monitor follows the log like tail -F — surviving
// rotation and truncation, never reading more than the configured tail —
// counts errors per pair over a sliding window and keeps
// <run_dir>/surflare_node_health.json current (Report documents its JSON).
// LoadNodeHealth reads that file back with the staleness rule: data older
// than the stale limit means every node is healthy.
package loghealth

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"surflare-watchdog/src/clock"
	"surflare-watchdog/src/config"
)

// log is the subsystem logger, looked up at each use: one taken at package
// init would keep the default handler from before the program installed
// its own (lines would lose their level and attributes).
func log() *slog.Logger { return slog.Default().With("subsystem", "loghealth") }

// Defaults of Options fields left zero.
const (
	// DefaultPoll is how often the log is read without change notices
	// (Options.Watch), and the least time between two reads with them.
	DefaultPoll       = 500 * time.Millisecond
	DefaultWriteEvery = time.Second // at most one file write per this, while lines arrive
	// DefaultRefresh rewrites the file even when nothing is logged, so
	// counts age out of it and generated_at shows the monitor is alive.
	DefaultRefresh = time.Minute
)

// Options configure a Monitor. Zero values take the config defaults, except
// Threshold: 0 is a real threshold there (any error is one too many), so a
// negative value asks for the default.
type Options struct {
	LogPath   string         // the proxy log (required)
	OutPath   string         // the node health file; "" = keep it in memory only
	Pattern   *regexp.Regexp // urltest error line; nil = config.DefaultLogPattern
	Window    time.Duration  // error counting window (10 min)
	Threshold int            // more errors than this in Window = dead (10; < 0 = default)
	Tail      int64          // bytes read at most, per poll (2 MB)

	Poll, WriteEvery, Refresh time.Duration
	Clock                     clock.Clock

	// Watch, if set, starts change notices for the log (Inotify in the
	// daemon), so Run reads when the log changes instead of every Poll;
	// nil polls. See Run.
	Watch func(path string) (Changes, error)

	// OnLine, if set, sees every urltest error after it is counted (the 503
	// storm monitor hooks in here). It runs on the monitor's goroutine and
	// must not block.
	OnLine func(Line)
	// OnError, if set, sees every other ERROR line of the log, after the
	// poll (the failed-connection signal reads them: package connfail).
	// It runs on the monitor's goroutine and must not block.
	OnError func(line string)
}

// FromConfig fills Options from the config's loghealth and paths sections.
func FromConfig(c *config.Config, outPath string) Options {
	return Options{
		LogPath:   c.Paths.ProxyLog,
		OutPath:   outPath,
		Pattern:   c.LogHealth.Pattern,
		Window:    c.LogHealth.Window,
		Threshold: c.LogHealth.Threshold,
		Tail:      c.LogHealth.Tail,
	}
}

// Monitor follows the proxy log and keeps node health. Its methods are safe
// for concurrent use while Run is going.
type Monitor struct {
	o      Options
	parser *Parser
	clock  clock.Clock

	mu      sync.Mutex
	tracker *Tracker
	stats   Stats
	follow  *Follower
	dirty   bool

	// reads counts Run's reads of the log: with change notices an idle
	// log is not read at all, which the tests check.
	reads atomic.Int64
}

// NewMonitor checks the options (the pattern's groups) and fills defaults.
func NewMonitor(o Options) (*Monitor, error) {
	p, err := NewParser(o.Pattern)
	if err != nil {
		return nil, err
	}
	d := config.Default().LogHealth
	if o.Window <= 0 {
		o.Window = d.Window
	}
	if o.Threshold < 0 {
		o.Threshold = d.Threshold
	}
	if o.Tail <= 0 {
		o.Tail = d.Tail
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.WriteEvery <= 0 {
		o.WriteEvery = DefaultWriteEvery
	}
	if o.Refresh <= 0 {
		o.Refresh = DefaultRefresh
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	m := &Monitor{o: o, parser: p, clock: o.Clock, tracker: NewTracker(o.Window, o.Threshold)}
	m.follow = NewFollower(o.LogPath, o.Tail, &m.stats)
	return m, nil
}

// Run follows the log until ctx ends, writing the file at most once per
// WriteEvery while errors arrive and at least once per Refresh. A missing log
// is waited for; a write failure is logged and retried on the next change.
//
// Without Options.Watch it reads every Poll. With it, it reads when the
// log's name has an event, never sooner than Poll after the last read (a
// proxy logging a storm costs no more reads than the poll did), so a line
// is read at once after a quiet spell and within Poll during a burst; and
// it polls every Poll as before whenever an event could be missed: no
// watch (inotify unavailable, no directory yet: retried at each poll), a
// watch that ended, or a log that is not Settled. Every timer wake (the
// writes' schedule, at least once per Refresh) reads too.
func (m *Monitor) Run(ctx context.Context) error {
	defer m.follow.Close()
	var ch Changes
	defer func() {
		if ch != nil {
			ch.Close()
		}
	}()
	var lastWrite, lastPoll time.Time
	// Problems are logged when they start or change, not every poll.
	var readProblem, writeProblem, watchProblem string
	for {
		if m.o.Watch != nil && ch == nil {
			// Watch before reading, so a change right after the read is an
			// event and not lost.
			c, err := m.o.Watch(m.o.LogPath)
			switch {
			case err == nil:
				ch = c
				if watchProblem != "" {
					log().Info("proxy log: following it by change notices again", "path", m.o.LogPath)
				}
				watchProblem = ""
			case err.Error() != watchProblem:
				log().Info("proxy log: no change notices; polling it", "every", m.o.Poll, "err", err)
				watchProblem = err.Error()
			}
		}
		now := m.clock.Now()
		lastPoll = now
		m.reads.Add(1)
		err := m.PollOnce(now)
		switch {
		case err == nil:
			readProblem = ""
		case errors.Is(err, fs.ErrNotExist):
			if readProblem != "missing" {
				log().Info("proxy log not there yet; waiting for it", "path", m.o.LogPath)
				readProblem = "missing"
			}
		case err.Error() != readProblem:
			log().Warn("reading proxy log", "err", err)
			readProblem = err.Error()
		}
		m.mu.Lock()
		due := m.dirty && now.Sub(lastWrite) >= m.o.WriteEvery || now.Sub(lastWrite) >= m.o.Refresh
		m.mu.Unlock()
		if due && m.o.OutPath != "" {
			lastWrite = now
			err := WriteReport(m.o.OutPath, m.Report())
			if err != nil && err.Error() != writeProblem {
				log().Warn("writing node health", "err", err)
			}
			writeProblem = ""
			if err != nil {
				writeProblem = err.Error()
			}
			m.mu.Lock()
			m.dirty = err != nil // a failed write is retried after WriteEvery, not every poll
			m.mu.Unlock()
		}

		wait := m.o.Poll
		var notices <-chan struct{}
		if ch != nil && m.settled() {
			notices = ch.C()
			wait = m.nextWrite(now, lastWrite)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-m.clock.After(wait):
		case _, open := <-notices:
			if !open {
				ch.Close()
				ch = nil
				continue // watch again, then read: the watch ended with an event
			}
			// Never sooner than Poll after the last read.
			if rest := m.o.Poll - m.clock.Now().Sub(lastPoll); rest > 0 {
				select {
				case <-ctx.Done():
					return nil
				case <-m.clock.After(rest):
				}
			}
		}
	}
}

// settled is the follower's Settled, under the lock PollOnce takes.
func (m *Monitor) settled() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.follow.Settled()
}

// nextWrite is how long after now the file is due: WriteEvery after the
// last write while counts wait to be written, Refresh after it otherwise.
func (m *Monitor) nextWrite(now, lastWrite time.Time) time.Duration {
	if m.o.OutPath == "" {
		return m.o.Refresh
	}
	m.mu.Lock()
	dirty := m.dirty
	m.mu.Unlock()
	every := m.o.Refresh
	if dirty {
		every = m.o.WriteEvery
	}
	return max(every-now.Sub(lastWrite), time.Millisecond)
}

// PollOnce reads what the log gained since the last poll and counts it;
// lines without a timestamp count at now. Run calls it; the one-shot CLI
// calls it once.
func (m *Monitor) PollOnce(now time.Time) error {
	var matched []Line
	var others []string
	m.mu.Lock()
	err := m.follow.Poll(func(b []byte) {
		l, kind := m.parser.ParseLine(b)
		switch kind {
		case Ignored:
			m.stats.Ignored++
			if m.o.OnError != nil && bytes.Contains(b, errorWord) {
				others = append(others, string(b))
			}
			return
		case Garbage:
			m.stats.Garbage++
			return
		}
		m.stats.Matched++
		// A timestamp from the future (clock skew, a bad line) would keep
		// an error in the window forever: clamp it.
		if l.Time.IsZero() || l.Time.After(now) {
			l.Time = now
		}
		m.tracker.Add(l, l.Time)
		m.dirty = true
		matched = append(matched, l)
	})
	m.stats.DroppedPairs = int64(m.tracker.dropped)
	m.mu.Unlock()
	if m.o.OnLine != nil {
		for _, l := range matched {
			m.o.OnLine(l)
		}
	}
	for _, l := range others {
		m.o.OnError(l)
	}
	return err
}

// errorWord marks the lines OnError is given.
var errorWord = []byte(" ERROR ")

// Report is the current node health with the reader's stats.
func (m *Monitor) Report() Report {
	now := m.clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.tracker.Report(now)
	st := m.stats
	r.Stats = &st
	return r
}

// Stats are the reader's counters so far.
func (m *Monitor) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stats
}

// Errors is the live error count of node/transit in the window ending now;
// updated is now (the monitor is the source, its data is never stale while
// Run is going). It satisfies the engine's NodeHealth interface.
func (m *Monitor) Errors(node, transit string) (count int, updated time.Time, ok bool) {
	now := m.clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.tracker.Count(node, transit, now)
	return n, now, ok
}

// Dead reports whether node/transit has more than Threshold errors in the
// window, and how many.
func (m *Monitor) Dead(node, transit string) (dead bool, errors int) {
	n, _, _ := m.Errors(node, transit)
	return n > m.o.Threshold, n
}
