package lab

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"surflare-watchdog/src/lab/fakes"
)

// proxy-loop (issue 7): the proxy stops marking its own sockets, so its
// tunnel connections are captured by its own tproxy rule and every
// connection spawns another until the proxy runs out of descriptors. The
// daemon's loop guard must open its circuit (block the looping
// destination) before that. The run reports the peak in-flight TCP
// connections in the router, the proxy's peak descriptors against its
// limit, and when the circuit opened and closed. Run with
// `--set surflare.loopguard.min_active=-1` (guard off) it shows the
// exhaustion the guard prevents.

// Log messages of the loop guard (src/loopguard) the scenario waits for.
const (
	loopOpenMsg   = "loopguard: circuit open for"
	loopClosedMsg = "loopguard: circuit closed for"
)

const (
	// loopSample is how often the proxy's descriptors are counted: the
	// loop can burn a thousand in well under a second.
	loopSample = 20 * time.Millisecond
	// loopWatch bounds the wait for the circuit to open (or the proxy to
	// run out of descriptors) after the injection.
	loopWatch = 20 * time.Second
	// loopAfter keeps the loop on this long after the circuit opened, to
	// see that the descriptors stay bounded.
	loopAfter = 3 * time.Second
	// fdSlack: a proxy this close to its limit has run out (a few
	// descriptors are the listener, the log, stdio).
	fdSlack = 8
)

func init() {
	RegisterScenario(ScenarioSpec{Name: ScenarioProxyLoop,
		Summary: "the proxy stops marking its sockets and loops into itself: the loop guard must cut it before fd exhaustion",
		Budget:  120 * time.Second, Run: proxyLoop})
}

// fdSample is the proxy's descriptor count at one moment.
type fdSample struct {
	At  time.Time
	FDs int
}

// loopStats are the proxy-side figures sampled during proxy-loop.
type loopStats struct {
	mu            sync.Mutex
	peakFDs       int
	fdLimit       int
	peakInFlight  int
	exhaustedAt   time.Time
	samples       []fdSample
	proxiesSeen   map[int]bool
	lastProxyPIDs []int
}

func proxyLoop(ctx context.Context, h *Harness) error {
	st := &loopStats{proxiesSeen: map[int]bool{}}
	sctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		st.sample(sctx, h.Lab)
	}()
	defer func() {
		stop()
		wg.Wait()
		h.loopFigures(st)
	}()

	t0, err := h.Inject(ctx, FaultProxyLoop, true)
	if err != nil {
		return err
	}
	opened := h.waitFor(ctx, loopWatch, func() bool {
		return st.exhausted() || h.hasLog(loopOpenMsg)
	})
	if !opened {
		h.Note("neither a loop-guard circuit nor fd exhaustion within %s", loopWatch)
	}
	h.Observe(ctx, loopAfter)
	off, err := h.Inject(ctx, FaultProxyLoop, false)
	if err != nil {
		return err
	}
	h.Extra("loop_off_s", seconds3(off.Sub(t0).Seconds()))
	h.waitOrNote(ctx, recoverBudget)
	return nil
}

// hasLog reports whether the daemon logged a line containing substr since
// the monitor started.
func (h *Harness) hasLog(substr string) bool {
	_, _, logs, _ := h.mon.snapshot()
	for _, l := range logs {
		if strings.Contains(l.Msg, substr) || strings.Contains(l.Text, substr) {
			return true
		}
	}
	return false
}

// loopFigures turns the samples and the daemon's loop-guard log lines
// into the run's extra figures.
func (h *Harness) loopFigures(st *loopStats) {
	t0 := h.T0()
	st.mu.Lock()
	h.Extra("peak_fds", st.peakFDs)
	h.Extra("fd_limit", st.fdLimit)
	h.Extra("peak_in_flight", st.peakInFlight)
	exhausted := !st.exhaustedAt.IsZero()
	h.Extra("fd_exhausted", exhausted)
	if exhausted {
		h.Extra("fd_exhausted_s", seconds3(st.exhaustedAt.Sub(t0).Seconds()))
	}
	h.Extra("proxy_processes", len(st.proxiesSeen))
	off, _ := h.extraTime("loop_off_s")
	atLimit, contained := st.exhaustion(t0, off)
	h.Extra("fd_exhausted_for_s", seconds3(atLimit.Seconds()))
	h.Extra("loop_contained", contained)
	st.mu.Unlock()

	_, _, logs, _ := h.mon.snapshot()
	opens := 0
	var openAt, closeAt time.Time
	for _, l := range logs {
		switch {
		case strings.Contains(l.Text, loopOpenMsg):
			opens++
			if openAt.IsZero() {
				openAt = l.When()
			}
		case strings.Contains(l.Text, loopClosedMsg):
			if !openAt.IsZero() && closeAt.IsZero() {
				closeAt = l.When()
			}
		}
	}
	h.Extra("circuit_opens", opens)
	var open, closed *float64
	if !openAt.IsZero() {
		open = seconds3(openAt.Sub(t0).Seconds())
		h.Note("loop guard opened")
	}
	if !closeAt.IsZero() {
		closed = seconds3(closeAt.Sub(t0).Seconds())
	}
	h.Extra("circuit_open_s", open)
	h.Extra("circuit_close_s", closed)
	if exhausted {
		h.Note("proxy ran out of descriptors")
	}
	h.RecoveredWhen(func(r ScenarioRun) bool { return r.RecoverS != nil && contained })
}

// containWindow is the stretch before the fault is switched off in which
// the proxy must not be at its descriptor limit for the loop to count as
// contained (cut while the vendor bug was still there).
const containWindow = 1500 * time.Millisecond

// exhaustion sums the time the proxy spent at its descriptor limit between
// t0 and off, and says whether it stayed below the limit during the last
// containWindow before off. Call with st.mu held.
func (st *loopStats) exhaustion(t0, off time.Time) (atLimit time.Duration, contained bool) {
	if off.IsZero() || st.fdLimit == 0 {
		return 0, false
	}
	contained = true
	var prev *fdSample
	for i := range st.samples {
		s := &st.samples[i]
		if s.At.Before(t0) || s.At.After(off) {
			continue
		}
		full := s.FDs >= st.fdLimit-fdSlack
		if full && prev != nil {
			atLimit += s.At.Sub(prev.At)
		}
		if full && !s.At.Before(off.Add(-containWindow)) {
			contained = false
		}
		prev = s
	}
	return atLimit, contained
}

// extraTime converts a recorded "…_s" figure back to a time after T0.
func (h *Harness) extraTime(key string) (time.Time, bool) {
	h.mu.Lock()
	v, ok := h.extra[key].(*float64)
	t0 := h.t0
	h.mu.Unlock()
	if !ok || v == nil {
		return time.Time{}, false
	}
	return t0.Add(time.Duration(*v * float64(time.Second))), true
}

func (st *loopStats) exhausted() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return !st.exhaustedAt.IsZero()
}

// sample counts the proxy's descriptors and the router's in-flight TCP
// connections every loopSample until ctx ends.
func (st *loopStats) sample(ctx context.Context, l *Lab) {
	t := time.NewTicker(loopSample)
	defer t.Stop()
	for {
		pids := l.ProcsByComm(RoleRouter, fakes.ProxyName)
		fds := 0
		for _, pid := range pids {
			fds += countFDs(pid)
		}
		inflight := -1
		if len(pids) > 0 {
			inflight = inFlightTCP(pids[0])
		}
		now := time.Now()
		st.mu.Lock()
		st.samples = append(st.samples, fdSample{At: now, FDs: fds})
		for _, pid := range pids {
			if !st.proxiesSeen[pid] {
				st.proxiesSeen[pid] = true
				if lim := nofileLimit(pid); lim > 0 {
					st.fdLimit = lim
				}
			}
		}
		st.lastProxyPIDs = pids
		st.peakFDs = max(st.peakFDs, fds)
		st.peakInFlight = max(st.peakInFlight, inflight)
		if st.fdLimit > 0 && fds >= st.fdLimit-fdSlack && st.exhaustedAt.IsZero() {
			st.exhaustedAt = now
		}
		st.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// countFDs is the number of open descriptors of pid (0 if it is gone).
func countFDs(pid int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0
	}
	return len(ents)
}

// nofileLimit is pid's soft RLIMIT_NOFILE (0 if unknown).
func nofileLimit(pid int) int {
	f, err := os.Open(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "Max open files"); ok {
			fs := strings.Fields(rest)
			if len(fs) > 0 {
				n, _ := strconv.Atoi(fs[0])
				return n
			}
		}
	}
	return 0
}

// TCP states (include/net/tcp_states.h) that count as in flight.
const (
	tcpEstablished = "01"
	tcpSynSent     = "02"
	tcpSynRecv     = "03"
)

// inFlightTCP counts established or opening TCP sockets in pid's network
// namespace (IPv4 and IPv6).
func inFlightTCP(pid int) int {
	n := 0
	for _, name := range []string{"tcp", "tcp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, name))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // header
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) > 3 {
				switch fs[3] {
				case tcpEstablished, tcpSynSent, tcpSynRecv:
					n++
				}
			}
		}
		f.Close()
	}
	return n
}
