package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"surflare-watchdog/src/detectors"
	"surflare-watchdog/src/detectors/detect"
	"surflare-watchdog/src/detectors/loghealth"
	"surflare-watchdog/src/detectors/storm503"
	"surflare-watchdog/src/keepalive"
	"surflare-watchdog/src/loopguard"
	"surflare-watchdog/src/procscan"
	"surflare-watchdog/src/relays"
	"surflare-watchdog/src/watchdog"
)

// detectorSet is the detectors around the engine: the early detector (with the
// loop guard on its samples), log health (with the 503 monitor on its
// lines) and the keepalive clamp. Any of them may be nil (disabled or
// unavailable); DetectorStates reports each one's view for Status.
type detectorSet struct {
	det         *detect.Detector
	lh          *loghealth.Monitor
	storm503    *storm503.Monitor
	override503 *detectors.Storm503Override // the engine's Override over storm503, bound to the node in use
	probe503    *storm503.Probe             // our own request for the urltest endpoint (nil: off)
	tally       *detect.NodeTally           // the early detector's samples per node in use (nil: detector off)
	idleMiss    *idleMissEvidence           // the idle probe's last miss (nil: idle probe off)
	guard       *loopguard.Guard
	clamp       *keepalive.Clamp
	proxy       *proxyWatch
	learner     *relays.Learner // poked on every transition (it backs off while steady)
}

// DetectorStates is watchdog.DetectorSource.
func (s *detectorSet) DetectorStates() []watchdog.DetectorState {
	now := time.Now()
	var out []watchdog.DetectorState
	add := func(name, state, detail string, since time.Time) {
		out = append(out, watchdog.DetectorState{Name: name, State: state, Detail: detail, Since: since})
	}
	if s.det != nil {
		st := s.det.Status(now)
		state := "ok"
		switch {
		case st.Stale:
			state = "stale"
		case !st.LastFired.IsZero() && now.Sub(st.LastFired) < time.Minute:
			state = "fired"
		}
		detail := fmt.Sprintf("score %d/%d over %d proxy sockets", st.Score, st.Threshold, st.Conns)
		if st.Err != "" {
			detail += "; " + st.Err
		}
		add("early_detector", state, detail, st.LastSample)
	} else {
		add("early_detector", "off", "", time.Time{})
	}
	if s.lh != nil {
		r := s.lh.Report()
		var dead []string
		for _, p := range r.Nodes {
			if !p.UrltestHealthy {
				dead = append(dead, fmt.Sprintf("%s via %s (%d)", p.Node, p.Transit, p.ErrorCount))
			}
		}
		sort.Strings(dead)
		state, detail := "ok", fmt.Sprintf("%d pairs with errors, none above %d", len(r.Nodes), r.Threshold)
		if len(dead) > 0 {
			state, detail = "dead_nodes", fmt.Sprintf("%d dead: %v", len(dead), dead)
		}
		add("log_health", state, detail, r.GeneratedAt)
	} else {
		add("log_health", "off", "", time.Time{})
	}
	if s.storm503 != nil {
		st := s.storm503.State(now)
		state := "ok"
		if s.storm503.OverrideActive(now) {
			state = "storm"
		}
		add("storm_503", state, fmt.Sprintf("%d/%d urltest 503s in %ds", st.Count, st.Threshold, st.WindowS), st.Since)
	}
	if s.guard != nil {
		st := s.guard.State()
		state, detail := "closed", fmt.Sprintf("in-flight %d", st.InFlight)
		switch {
		case !st.Enabled:
			state = "off"
		case st.Open:
			var dsts []string
			for _, c := range st.Circuits {
				dsts = append(dsts, c.Dst.String())
			}
			state, detail = "open", fmt.Sprintf("blocking %s (in-flight %d, top %d, %d looped sockets cut)",
				strings.Join(dsts, ", "), st.InFlight, st.Top, st.Cut)
		}
		if st.Advice != "" {
			detail += "; " + st.Advice
		}
		add("loopguard", state, detail, st.Since)
	}
	ks := s.clamp.Status()
	state := "inactive"
	if ks.Active {
		state = "active"
	}
	add("keepalive", state, ks.String(), time.Time{})
	return out
}

// proxyWatch follows the vendor proxy's pid: each new proxy (after every
// connect) is moved into the keepalive clamp's cgroup and has its
// descriptor headroom checked against the loop guard's gate.
type proxyWatch struct {
	procs nsProcs
	comm  string
	clamp *keepalive.Clamp
	guard *loopguard.Guard
	log   *slog.Logger

	mu  sync.Mutex
	pid int
}

// proxyInfo is the proxy part of the daemon's status.
type proxyInfo struct {
	PID    int `json:"pid"`
	FDs    int `json:"fds"`
	NoFile int `json:"nofile"` // soft RLIMIT_NOFILE; -1 = unlimited
}

// trackedProxyPoll is the proxy watch's poll while the fast signals'
// proxy tracker runs: the tracker holds a pidfd on each proxy and reports
// every new one (changed), so the poll is only a safety net. Without the
// tracker it polls every second, as before.
const trackedProxyPoll = 30 * time.Second

// run looks at the proxy every interval and whenever poke (a transition)
// or changed (the tracker saw a new proxy) fires, until ctx ends.
func (p *proxyWatch) run(ctx context.Context, poke, changed <-chan struct{}, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		p.once()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-poke:
		case <-changed:
		}
	}
}

// once notes the proxy's pid. Its descriptors are counted only for a new
// proxy (the log line) and when the status asks (info): counting them every
// second listed /proc/PID/fd — hundreds of entries on a busy router — for
// nobody (issue 19).
func (p *proxyWatch) once() {
	pid := p.procs.First(p.comm)
	p.mu.Lock()
	changed := pid != p.pid
	p.pid = pid
	p.mu.Unlock()
	if !changed || pid == 0 {
		return
	}
	fds, _ := p.procs.scan.FDs(pid)
	if err := p.clamp.AddPID(pid); err != nil {
		p.log.Warn("Keepalive clamp: moving the proxy failed", "pid", pid, "err", err)
	}
	if p.guard != nil {
		if _, err := p.guard.CheckProxyHeadroom(pid); err != nil {
			p.log.Warn("Proxy fd headroom check failed", "pid", pid, "err", err)
		}
	}
	p.log.Info(fmt.Sprintf("Proxy started: pid %d, %d fds open, nofile %d", pid, fds.Open, fds.Limit))
}

// info is the proxy as of now: the pid last seen, its descriptors counted
// at the call.
func (p *proxyWatch) info() proxyInfo {
	p.mu.Lock()
	pid := p.pid
	p.mu.Unlock()
	var fds procscan.FDUsage
	if pid > 0 {
		fds, _ = p.procs.scan.FDs(pid)
	}
	return proxyInfo{PID: pid, FDs: fds.Open, NoFile: fds.Limit}
}
