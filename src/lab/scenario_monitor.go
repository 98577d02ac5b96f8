package lab

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The scenario monitor watches a lab running the daemon from the outside,
// as a household would: it asks the daemon for its status every
// statusPoll, tails its log and keeps a LAN client fetching the IP-echo
// host every monitorPoll. Everything is stamped with the monitor's own clock (the
// same host clock the daemon and FaultLog use).

const (
	// monitorPoll is how often the log and the client are sampled.
	monitorPoll = 100 * time.Millisecond
	// statusPoll is how often the daemon is asked for its status (a
	// process each time; the transitions in it carry their own times).
	statusPoll = 200 * time.Millisecond
	// clientTimeout is how long a LAN client waits for one page before it
	// counts as failed. Generous, as a browser is: a slow answer still
	// counts as traffic, and since a request starts every monitorPoll a
	// hung one does not delay the moment recovery is seen.
	clientTimeout = 5 * time.Second
	// maxClientInFlight bounds the client requests open at once (a black
	// hole keeps each open for clientTimeout).
	maxClientInFlight = 60
)

// statusSample is one answer of the daemon's status.
type statusSample struct {
	At            time.Time
	State         string
	Node          string
	LoginAttempts int
	AuthState     string
}

// transition is a daemon state change as its status reports it.
type transition struct {
	At       time.Time
	From, To string
	Reason   string
}

// logLine is one daemon log line with the moment the monitor saw it.
type logLine struct {
	Seen time.Time // when the tailer read it (at most monitorPoll late)
	At   time.Time // the line's own time=, zero if it has none
	Msg  string
	Text string
}

// When is the line's own time when it has one, else when it was seen.
func (l logLine) When() time.Time {
	if !l.At.IsZero() {
		return l.At
	}
	return l.Seen
}

// clientResult is one LAN client request.
type clientResult struct {
	Start, End time.Time
	OK         bool   // HTTP 200 with an IP-echo answer
	IP         string // the address the echo host saw
	Err        string
}

// monitor collects samples until its context ends.
type monitor struct {
	l      *Lab
	client int

	mu          sync.Mutex
	samples     []statusSample
	transitions []transition
	seenTr      map[string]bool
	logs        []logLine
	clients     []clientResult
	pending     map[int]time.Time // start of each client request still open
	nextReq     int
	statusErrs  int
	lastStatErr string

	logOff int64
	wg     sync.WaitGroup
}

func newMonitor(l *Lab) *monitor {
	m := &monitor{l: l, seenTr: map[string]bool{}, pending: map[int]time.Time{}}
	if fi, err := os.Stat(l.LogPath(DaemonName)); err == nil {
		m.logOff = fi.Size() // only lines written from now on
	}
	return m
}

// start runs the three samplers until ctx ends; wait for them with stop.
func (m *monitor) start(ctx context.Context) {
	m.wg.Add(3)
	go m.loop(ctx, statusPoll, m.pollStatus)
	go m.loop(ctx, monitorPoll, m.tailLog)
	go func() {
		defer m.wg.Done()
		m.pollClient(ctx)
	}()
}

func (m *monitor) loop(ctx context.Context, every time.Duration, fn func(context.Context)) {
	defer m.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		fn(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// rawStatus is the part of the status JSON the monitor needs beyond
// DaemonState.
type rawStatus struct {
	Counters struct {
		LoginAttempts int `json:"login_attempts"`
	} `json:"counters"`
	Signals struct {
		Auth struct {
			State string `json:"state"`
		} `json:"auth"`
	} `json:"signals"`
}

func (m *monitor) pollStatus(ctx context.Context) {
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	st, err := m.l.DaemonStatus(qctx)
	cancel()
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			m.statusErrs++
			m.lastStatErr = err.Error()
		}
		return
	}
	var raw rawStatus
	_ = json.Unmarshal(st.Raw, &raw)
	m.samples = append(m.samples, statusSample{At: now, State: st.State, Node: st.Node,
		LoginAttempts: raw.Counters.LoginAttempts, AuthState: raw.Signals.Auth.State})
	for _, t := range st.Transitions {
		key := t.At.Format(time.RFC3339Nano) + "|" + t.From + "|" + t.To
		if m.seenTr[key] {
			continue
		}
		m.seenTr[key] = true
		m.transitions = append(m.transitions, transition{At: t.At, From: t.From, To: t.To, Reason: t.Reason})
	}
}

// tailLog reads the daemon log lines appended since the last call. A
// restarted daemon appends to the same file, so the offset stays valid;
// a truncated file is read again from the start.
func (m *monitor) tailLog(ctx context.Context) {
	f, err := os.Open(m.l.LogPath(DaemonName))
	if err != nil {
		return
	}
	defer f.Close()
	m.mu.Lock()
	off := m.logOff
	m.mu.Unlock()
	if fi, err := f.Stat(); err == nil && fi.Size() < off {
		off = 0
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return
	}
	b, err := io.ReadAll(io.LimitReader(f, 4<<20))
	if err != nil {
		return
	}
	end := bytes.LastIndexByte(b, '\n')
	if end < 0 {
		return
	}
	now := time.Now()
	var lines []logLine
	sc := bufio.NewScanner(bytes.NewReader(b[:end+1]))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, parseLogLine(sc.Text(), now))
	}
	m.mu.Lock()
	m.logOff = off + int64(end+1)
	m.logs = append(m.logs, lines...)
	m.mu.Unlock()
}

var (
	textTime = regexp.MustCompile(`(?:^|\s)time=("[^"]*"|\S+)`)
	textMsg  = regexp.MustCompile(`(?:^|\s)msg=("(?:[^"\\]|\\.)*"|\S+)`)
)

// parseLogLine understands slog's text and JSON handlers; any other line
// keeps its whole text as the message.
func parseLogLine(s string, seen time.Time) logLine {
	ll := logLine{Seen: seen, Text: s, Msg: s}
	if strings.HasPrefix(s, "{") {
		var j struct {
			Time time.Time `json:"time"`
			Msg  string    `json:"msg"`
		}
		if json.Unmarshal([]byte(s), &j) == nil {
			ll.At, ll.Msg = j.Time, j.Msg
		}
		return ll
	}
	if mm := textMsg.FindStringSubmatch(s); mm != nil {
		ll.Msg = unquote(mm[1])
	}
	if mt := textTime.FindStringSubmatch(s); mt != nil {
		if t, err := time.Parse(time.RFC3339Nano, unquote(mt[1])); err == nil {
			ll.At = t
		}
	}
	return ll
}

func unquote(s string) string {
	if u, err := strconv.Unquote(s); err == nil {
		return u
	}
	return s
}

// pollClient starts one IP-echo request from the LAN client every
// monitorPoll, without waiting for the previous one, so a hung request
// does not hide the moment traffic comes back.
func (m *monitor) pollClient(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	sem := make(chan struct{}, maxClientInFlight)
	t := time.NewTicker(monitorPoll)
	defer t.Stop()
	for {
		select {
		case sem <- struct{}{}:
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				m.clientOnce(ctx)
			}()
		default: // too many hung requests: skip this tick
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (m *monitor) clientOnce(ctx context.Context) {
	start := time.Now()
	m.mu.Lock()
	id := m.nextReq
	m.nextReq++
	m.pending[id] = start
	m.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, clientTimeout)
	e, err := m.l.ClientEcho(rctx, m.client)
	cancel()
	r := clientResult{Start: start, End: time.Now(), OK: err == nil, IP: e.IP}
	if err != nil {
		r.Err = err.Error()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.pending, id)
	if ctx.Err() == nil { // else the run ended, not the network
		m.clients = append(m.clients, r)
	}
}

// settledBefore reports whether every client request started before t has
// finished, so a verdict about them cannot change any more.
func (m *monitor) settledBefore(t time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.pending {
		if s.Before(t) {
			return false
		}
	}
	return true
}

// wait blocks until the samplers have ended (after their ctx is done).
func (m *monitor) wait() { m.wg.Wait() }

// snapshot copies what was collected so far.
func (m *monitor) snapshot() (samples []statusSample, trs []transition, logs []logLine, clients []clientResult) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]statusSample(nil), m.samples...), append([]transition(nil), m.transitions...),
		append([]logLine(nil), m.logs...), append([]clientResult(nil), m.clients...)
}

// last is the latest status sample (zero if none).
func (m *monitor) last() statusSample {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.samples) == 0 {
		return statusSample{}
	}
	return m.samples[len(m.samples)-1]
}
