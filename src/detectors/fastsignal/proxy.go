package fastsignal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"surflare-watchdog/src/clock"
)

// Defaults of TrackerOptions.
const (
	// DefaultTrackerPoll is how often /proc is scanned while no proxy runs
	// (between a disconnect and the next connect's proxy), and how often
	// the fallback watch (no pidfd) reads the proxy's stat.
	DefaultTrackerPoll = time.Second
	// DefaultSafetyRescan is how often /proc is scanned although a proxy is
	// known: it catches a second proxy process or a pid the kernel reused
	// between our scan and the pidfd open (an exit is the pidfd's job, a
	// new proxy after a connect the poke's). A scan reads three files per
	// process — ~13 ms of CPU on a host with a few hundred — so not often.
	DefaultSafetyRescan = 5 * time.Minute
)

// TrackerOptions configure a ProxyTracker.
type TrackerOptions struct {
	// Find lists the proxy's pids (a /proc scan by comm in our network
	// namespace). Required.
	Find func() ([]int, error)
	// OnExit is told each time a known proxy process exits. It runs on
	// Run's goroutine and must not block.
	OnExit func(pid int)
	// OnChange is told the new pid list after every scan that changed it
	// (a new proxy: the keepalive clamp moves it, the loop guard checks
	// its headroom). Runs on the scanning goroutine; must not block long.
	OnChange func(pids []int)
	// Poll and SafetyRescan: see the defaults.
	Poll, SafetyRescan time.Duration
	Clock              clock.Clock
	// Watch waits until pid has exited (nil) or ctx ends (ctx's error).
	// nil = WatchExit (pidfd, with a /proc stat fallback).
	Watch func(ctx context.Context, pid int) error
}

// ProxyTracker knows the proxy's pids without scanning /proc each time
// someone asks, and reports a proxy exit the moment the kernel does.
// PIDs, First and Poke are safe to call while Run goes.
type ProxyTracker struct {
	o    TrackerOptions
	poke chan struct{}

	mu      sync.Mutex
	pids    []int
	scanned bool // pids holds a scan result
	scans   int
	exits   int
	lastErr error
}

// NewProxyTracker checks o and fills defaults.
func NewProxyTracker(o TrackerOptions) (*ProxyTracker, error) {
	if o.Find == nil {
		return nil, errors.New("proxy tracker: no way to find the proxy")
	}
	if o.Poll <= 0 {
		o.Poll = DefaultTrackerPoll
	}
	if o.SafetyRescan <= 0 {
		o.SafetyRescan = DefaultSafetyRescan
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Watch == nil {
		poll := o.Poll
		o.Watch = func(ctx context.Context, pid int) error { return WatchExit(ctx, pid, poll) }
	}
	return &ProxyTracker{o: o, poke: make(chan struct{}, 1)}, nil
}

// PIDs is the known proxy pids (sorted). It scans /proc only if Run has
// not scanned yet; otherwise it is a copy of the cache. It has the shape
// of detect.SamplerOptions.PIDs.
func (t *ProxyTracker) PIDs() ([]int, error) {
	t.mu.Lock()
	scanned := t.scanned
	t.mu.Unlock()
	if !scanned {
		t.rescan()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.pids), t.lastErr
}

// First is the lowest known proxy pid, 0 when none runs.
func (t *ProxyTracker) First() int {
	pids, _ := t.PIDs()
	if len(pids) == 0 {
		return 0
	}
	return pids[0]
}

// Poke asks for a rescan now (a connect just started a proxy). It never
// blocks.
func (t *ProxyTracker) Poke() {
	select {
	case t.poke <- struct{}{}:
	default:
	}
}

// Stats are the tracker's counters: /proc scans and proxy exits seen.
func (t *ProxyTracker) Stats() (scans, exits int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.scans, t.exits
}

// rescan replaces the cache with a fresh scan and reports the pids.
func (t *ProxyTracker) rescan() []int {
	pids, err := t.o.Find()
	slices.Sort(pids)
	pids = slices.Compact(pids)
	t.mu.Lock()
	changed := !t.scanned || !slices.Equal(pids, t.pids)
	t.pids, t.scanned, t.lastErr = pids, true, err
	t.scans++
	t.mu.Unlock()
	if changed && len(pids) > 0 && t.o.OnChange != nil {
		t.o.OnChange(slices.Clone(pids))
	}
	return pids
}

// forget drops an exited pid from the cache.
func (t *ProxyTracker) forget(pid int) {
	t.mu.Lock()
	t.pids = slices.DeleteFunc(t.pids, func(p int) bool { return p == pid })
	t.exits++
	t.mu.Unlock()
}

// Run follows the proxy until ctx ends: scan, watch every pid found, and
// on an exit report it and scan again at once (the vendor may have
// restarted it). While no proxy runs it scans every Poll.
func (t *ProxyTracker) Run(ctx context.Context) error {
	for {
		pids := t.rescan()
		if len(pids) == 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-t.o.Clock.After(t.o.Poll):
			case <-t.poke:
			}
			continue
		}
		wctx, cancel := context.WithCancel(ctx)
		exited := make(chan int, len(pids))
		var wg sync.WaitGroup
		for _, pid := range pids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := t.o.Watch(wctx, pid); err == nil {
					exited <- pid
				}
			}()
		}
		select {
		case <-ctx.Done():
		case pid := <-exited:
			t.forget(pid)
			if t.o.OnExit != nil {
				t.o.OnExit(pid)
			}
		case <-t.poke:
		case <-t.o.Clock.After(t.o.SafetyRescan):
		}
		cancel()
		wg.Wait()
		if ctx.Err() != nil {
			return nil
		}
	}
}

// WatchExit waits until pid has exited (nil), or ctx ends (ctx's error).
// It holds a pidfd in Go's netpoller — the kernel makes it readable when
// the process exits, so nothing polls — and falls back to reading
// /proc/PID/stat every poll when pidfds are unavailable (kernel < 5.3).
func WatchExit(ctx context.Context, pid int, poll time.Duration) error {
	err := watchPidfd(ctx, pid)
	if err == nil || ctx.Err() != nil {
		return err
	}
	for {
		if !ProcAlive(pid) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}

// watchPidfd is WatchExit through a pidfd; an error other than ctx's means
// pidfds cannot be used here.
func watchPidfd(ctx context.Context, pid int) error {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if errors.Is(err, unix.EINVAL) { // PIDFD_NONBLOCK needs 5.10
		if fd, err = unix.PidfdOpen(pid, 0); err == nil {
			err = unix.SetNonblock(fd, true)
		}
	}
	if errors.Is(err, unix.ESRCH) {
		return nil // already gone
	}
	if err != nil {
		return fmt.Errorf("pidfd of %d: %w", pid, err)
	}
	f := os.NewFile(uintptr(fd), "pidfd:"+strconv.Itoa(pid))
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("pidfd of %d: %w", pid, err)
	}
	stop := context.AfterFunc(ctx, func() { f.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	exited := false
	err = rc.Read(func(fd uintptr) bool {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, _ := unix.Poll(pfd, 0)
		exited = n > 0
		return exited
	})
	switch {
	case exited:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return fmt.Errorf("waiting on the pidfd of %d: %w", pid, err)
}

// ProcAlive reads /proc/PID/stat: gone, zombie or dead is not alive.
func ProcAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the last ')' (comm may contain one).
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == ')' {
			if i+2 < len(b) {
				s := b[i+2]
				return s != 'Z' && s != 'X'
			}
			break
		}
	}
	return false
}
