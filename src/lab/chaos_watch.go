package lab

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The chaos watcher checks the invariants all the time: leak counters,
// the daemon's descriptors, threads and RSS, every state file it writes,
// its log (panics), and its status (for the phases and the timeline).

const (
	chaosSampleEvery   = time.Second            // leaks, fd, RSS, threads, goroutines
	chaosStateEvery    = 150 * time.Millisecond // state files
	chaosStatusEvery   = 500 * time.Millisecond
	chaosLogEvery      = 250 * time.Millisecond
	chaosWarmupExclude = 30 * time.Second // an instance's first seconds are not growth (heap, caches, first connect)
)

// procSample is one reading of the daemon's process.
type procSample struct {
	At      time.Time `json:"at"`
	PID     int       `json:"pid"`
	Start   time.Time `json:"-"` // the instance's start (for the fixed-effects slope)
	FDs     int       `json:"fds"`
	Threads int       `json:"threads"`
	RSSKB   int       `json:"rss_kb"`
	// Goroutines is the daemon's go_goroutines; -1 when the scrape
	// failed (the daemon busy or between instances).
	Goroutines int `json:"goroutines"`
}

// ChaosViolation is one broken invariant.
type ChaosViolation struct {
	At        time.Time `json:"at"`
	Invariant string    `json:"invariant"`
	Detail    string    `json:"detail"`
	// Timeline holds the fault events within ±30 s; Log the daemon's log
	// lines of the 20 s before. Filled when the report is made.
	Timeline []string `json:"timeline,omitempty"`
	Log      []string `json:"log,omitempty"`
}

// chaosWatch collects samples and violations until its ctx ends.
type chaosWatch struct {
	l   *Lab
	sup chaosDaemon
	// runDir is where the daemon keeps its state files (seen from the
	// host); metrics scrapes the daemon's /metrics.
	runDir  string
	metrics *metricsScraper

	mu         sync.Mutex
	procs      []procSample
	states     []statusSample
	viol       []ChaosViolation
	leaks      LeakCounts
	stateReads int
	stateFiles map[string]int
	logOff     int64
	logLines   []logLine
	panics     int
	// scrapeFails counts samples whose /metrics scrape failed.
	scrapeFails int
	wg          sync.WaitGroup
}

func newChaosWatch(l *Lab, sup chaosDaemon, runDir string) *chaosWatch {
	w := &chaosWatch{l: l, sup: sup, runDir: runDir, stateFiles: map[string]int{}, metrics: newMetricsScraper(l)}
	if fi, err := os.Stat(l.LogPath(DaemonName)); err == nil {
		w.logOff = fi.Size()
	}
	return w
}

func (w *chaosWatch) start(ctx context.Context) {
	for _, f := range []struct {
		every time.Duration
		fn    func(context.Context)
	}{{chaosSampleEvery, w.sample}, {chaosStateEvery, w.readStateFiles}, {chaosStatusEvery, w.status}, {chaosLogEvery, w.tailLog}} {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			t := time.NewTicker(f.every)
			defer t.Stop()
			for {
				f.fn(ctx)
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		}()
	}
}

func (w *chaosWatch) wait() { w.wg.Wait() }

func (w *chaosWatch) violate(inv, format string, a ...any) {
	w.violateAt(time.Now(), inv, format, a...)
}

// violateAt records a violation judged later (at the report) at the time
// it happened, so its timeline and log excerpt are the ones around it.
func (w *chaosWatch) violateAt(at time.Time, inv, format string, a ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.viol = append(w.viol, ChaosViolation{At: at, Invariant: inv, Detail: fmt.Sprintf(format, a...)})
}

// sample reads the leak counters and the daemon's /proc figures.
func (w *chaosWatch) sample(ctx context.Context) {
	if lc, err := w.l.Leaks(ctx); err == nil {
		w.mu.Lock()
		prev := w.leaks
		w.leaks = lc
		w.mu.Unlock()
		if d := lc.Total() - prev.Total(); lc.Total() > prev.Total() {
			w.violate(invLeaks, "%d packet(s) leaked since the last sample: %s", d, lc)
		}
	}
	pid := w.sup.running()
	if pid == 0 {
		return
	}
	ps, err := readProc(pid)
	if err != nil {
		return
	}
	_, ps.Start = w.sup.instance()
	ps.Goroutines = w.goroutines(ctx)
	w.mu.Lock()
	w.procs = append(w.procs, ps)
	w.mu.Unlock()
}

// readProc reads one process's descriptors, threads and RSS.
func readProc(pid int) (procSample, error) {
	s := procSample{At: time.Now(), PID: pid}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return s, err
	}
	s.FDs = len(ents)
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.Atoi(f[0])
		switch k {
		case "VmRSS":
			s.RSSKB = n
		case "Threads":
			s.Threads = n
		}
	}
	return s, nil
}

// readStateFiles reads every file the daemon keeps in its run dir and
// checks that it parses: JSON files (and the 503 state) as JSON, the pid
// file as a number. Dot files are the atomic writer's temporaries and the
// chaos filler; sockets and the lock are not state.
func (w *chaosWatch) readStateFiles(ctx context.Context) {
	dir := w.runDir
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !e.Type().IsRegular() || strings.HasSuffix(name, ".lock") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			continue // renamed away between ReadDir and ReadFile
		}
		w.mu.Lock()
		w.stateReads++
		w.stateFiles[name]++
		w.mu.Unlock()
		if bad := checkStateFile(name, b); bad != "" {
			w.violate(invStateFiles, "%s: %s (%d bytes: %.80q)", name, bad, len(b), b)
		}
	}
}

// checkStateFile says what is wrong with a state file's content ("" if
// nothing).
func checkStateFile(name string, b []byte) string {
	switch {
	case strings.HasSuffix(name, ".pid"):
		if _, err := strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
			return "pid file is not a number"
		}
	case strings.HasSuffix(name, ".json"), strings.HasSuffix(name, "_state"):
		if !json.Valid(b) {
			return "not valid JSON (half-written?)"
		}
	}
	return ""
}

// status samples the daemon's state.
func (w *chaosWatch) status(ctx context.Context) {
	if w.sup.running() == 0 {
		return
	}
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	st, err := w.l.DaemonStatus(qctx)
	cancel()
	if err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := len(w.states); n > 0 && w.states[n-1].State == st.State && w.states[n-1].Node == st.Node {
		w.states[n-1].At = time.Now() // keep only changes (and the latest time)
		return
	}
	w.states = append(w.states, statusSample{At: time.Now(), State: st.State, Node: st.Node})
}

// lastState is the daemon's latest reported state.
func (w *chaosWatch) lastState() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.states) == 0 {
		return ""
	}
	return w.states[len(w.states)-1].State
}

// lastNode is the daemon's latest reported node.
func (w *chaosWatch) lastNode() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.states) == 0 {
		return ""
	}
	return w.states[len(w.states)-1].Node
}

// panicMarkers are what a Go runtime crash writes to stderr.
var panicMarkers = []string{"panic: ", "fatal error: ", "goroutine ", "SIGSEGV", "runtime error:", "concurrent map"}

// tailLog reads the daemon's new log lines and flags a crash.
func (w *chaosWatch) tailLog(ctx context.Context) {
	f, err := os.Open(w.l.LogPath(DaemonName))
	if err != nil {
		return
	}
	defer f.Close()
	if _, err := f.Seek(w.logOff, io.SeekStart); err != nil {
		return
	}
	b, err := io.ReadAll(io.LimitReader(f, 8<<20))
	if err != nil {
		return
	}
	end := bytes.LastIndexByte(b, '\n')
	if end < 0 {
		return
	}
	w.logOff += int64(end + 1)
	now := time.Now()
	sc := bufio.NewScanner(bytes.NewReader(b[:end+1]))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var crash []string
	var lines []logLine
	for sc.Scan() {
		t := sc.Text()
		lines = append(lines, parseLogLine(t, now))
		for _, m := range panicMarkers {
			// slog lines are key=value; a runtime crash starts the line.
			if strings.HasPrefix(t, m) {
				crash = append(crash, t)
				break
			}
		}
	}
	w.mu.Lock()
	w.logLines = append(w.logLines, lines...)
	w.panics += len(crash)
	w.mu.Unlock()
	if len(crash) > 0 {
		w.violate(invNoPanic, "the daemon's output has a Go crash: %s", strings.Join(crash[:min(3, len(crash))], " | "))
	}
}

// logAround is the daemon's log lines seen within [t-before, t+after].
func (w *chaosWatch) logAround(t time.Time, before, after time.Duration) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, l := range w.logLines {
		at := l.When()
		if at.After(t.Add(-before)) && at.Before(t.Add(after)) {
			out = append(out, truncate(l.Text, 240))
		}
	}
	if len(out) > 40 {
		out = out[len(out)-40:]
	}
	return out
}

// fixedEffectsSlope is the least-squares slope of y over time (per
// minute) with one intercept per daemon instance: restarts reset RSS and
// descriptors, and a single line through every instance would read a
// restart as shrinkage. Samples within chaosWarmupExclude of their
// instance's start are left out. n is the number of samples used, span
// the time they cover, summed over the instances.
func fixedEffectsSlope(ps []procSample, y func(procSample) float64) (perMin float64, n int, span time.Duration) {
	groups := map[int][]procSample{}
	for _, p := range ps {
		if !p.Start.IsZero() && p.At.Sub(p.Start) < chaosWarmupExclude {
			continue
		}
		groups[p.PID] = append(groups[p.PID], p)
	}
	var sxy, sxx float64
	for _, g := range groups {
		if len(g) < 2 {
			continue
		}
		var mx, my float64
		for _, p := range g {
			mx += p.At.Sub(g[0].At).Minutes()
			my += y(p)
		}
		mx /= float64(len(g))
		my /= float64(len(g))
		for _, p := range g {
			dx := p.At.Sub(g[0].At).Minutes() - mx
			sxy += dx * (y(p) - my)
			sxx += dx * dx
		}
		n += len(g)
		span += g[len(g)-1].At.Sub(g[0].At)
	}
	if sxx == 0 {
		return 0, n, span
	}
	return sxy / sxx, n, span
}
