package loghealth

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// These tests use real time and real inotify: they wait on conditions
// (eventually), and sleep only to show that nothing happens in a window
// where a poll would have read many times (quiet).

const (
	// testPoll is the monitor's poll interval in these tests: a monitor
	// that polled would read about 15 times in a quiet window.
	testPoll = 20 * time.Millisecond
	// quietWindow is how long an idle log is watched for reads.
	quietWindow = 300 * time.Millisecond
	// patience bounds every wait on a condition (a loaded CI machine).
	patience = 10 * time.Second
)

// numbered is an urltest line whose node is N<n>, so a test can tell
// which lines were read.
func numbered(n int) string { return logLine(fmt.Sprint("N", n), n) }

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", patience, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// watchedMonitor runs a Monitor on path with inotify notices and a
// Refresh of an hour: with notices and a settled log, a line can only be
// read because an event announced it.
type watchedMonitor struct {
	m  *Monitor
	mu sync.Mutex
	ns []string // the nodes of the urltest lines seen (numbered)
}

func startWatched(t *testing.T, path string) *watchedMonitor {
	t.Helper()
	w := &watchedMonitor{}
	m, err := NewMonitor(Options{LogPath: path, Threshold: -1, Poll: testPoll, Refresh: time.Hour, Watch: Inotify,
		OnLine: func(l Line) {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.ns = append(w.ns, l.Node)
		}})
	if err != nil {
		t.Fatal(err)
	}
	w.m = m
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

func (w *watchedMonitor) saw(n int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Contains(w.ns, fmt.Sprint("N", n))
}

// quiet asserts that an idle log is not read in a window where polling
// would have read it about quietWindow/testPoll times. The notices of the
// last change may still trail in (a loaded machine delivers a write's
// events in several reads), so it is enough that one of a few windows in a
// row is quiet: a monitor that polled would read in every one of them.
func (w *watchedMonitor) quiet(t *testing.T, when string) {
	t.Helper()
	eventually(t, when+": the monitor settles", func() bool { return w.m.settled() })
	var n int64
	for range 5 {
		before := w.m.reads.Load()
		time.Sleep(quietWindow)
		if n = w.m.reads.Load() - before; n <= 1 {
			return
		}
	}
	t.Errorf("%s: %d reads of an idle log in %s, in each of 5 windows; want none (it is followed by change notices, not every %s)", when, n, quietWindow, testPoll)
}

func TestMonitorFollowsTheLogByChangeNotices(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "surflare-proxy.log")
	appendFile(t, path, numbered(1))
	w := startWatched(t, path)
	eventually(t, "the line already in the log is read", func() bool { return w.saw(1) })
	w.quiet(t, "idle")

	// Another file in the directory (the vendor's other logs) wakes nothing.
	for range 10 {
		appendFile(t, filepath.Join(dir, "surflare.log"), "INFO busy\n")
	}
	w.quiet(t, "another file written")

	appendFile(t, path, numbered(2))
	eventually(t, "an appended line is read", func() bool { return w.saw(2) })

	// copytruncate, or "> log": the file shrinks under the reader.
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	appendFile(t, path, numbered(3))
	eventually(t, "the line after a truncation is read", func() bool { return w.saw(3) })
	if st := w.m.Stats(); st.Truncations != 1 {
		t.Errorf("truncations = %d, want 1", st.Truncations)
	}
	w.quiet(t, "after the truncation")

	// Rotation by rename: the proxy goes on writing the old file until it
	// reopens — lines that come under the old file's new name.
	r := w.m.reads.Load()
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	// The rename itself has been read (and a gap passed): only what the
	// monitor does after it can find the next line.
	eventually(t, "the rename is noticed", func() bool { return w.m.reads.Load() > r })
	time.Sleep(2 * testPoll)
	appendFile(t, path+".1", numbered(4))
	eventually(t, "a line the proxy writes to the rotated file before it reopens is read", func() bool { return w.saw(4) })
	appendFile(t, path, numbered(5))
	eventually(t, "the new file's first line is read", func() bool { return w.saw(5) })
	if st := w.m.Stats(); st.Rotations != 1 {
		t.Errorf("rotations = %d, want 1", st.Rotations)
	}
	w.quiet(t, "after the rotation")
	appendFile(t, path, numbered(51))
	eventually(t, "a later write to the new file is read (the file's watch moved to it)", func() bool { return w.saw(51) })

	// Removed and created again.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	appendFile(t, path, numbered(6))
	eventually(t, "the recreated file's line is read", func() bool { return w.saw(6) })
	w.quiet(t, "after the re-creation")
	appendFile(t, path, numbered(61))
	eventually(t, "a later write to the re-created file is read", func() bool { return w.saw(61) })

	// The directory itself removed and made again: the watch ends; the
	// monitor polls until it can watch again.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the monitor polls while there is no directory to watch", func() bool {
		r := w.m.reads.Load()
		time.Sleep(5 * testPoll)
		return w.m.reads.Load() > r+1
	})
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	appendFile(t, path, numbered(7))
	eventually(t, "a line in the re-made directory is read", func() bool { return w.saw(7) })
	w.quiet(t, "watching the re-made directory")
	appendFile(t, path, numbered(8))
	eventually(t, "and the next line too", func() bool { return w.saw(8) })
}

// A proxy that has not made its log yet: the file's creation is an event,
// no poll is needed to find it.
func TestMonitorWaitsForTheLogByChangeNotices(t *testing.T) {
	path := filepath.Join(t.TempDir(), "surflare-proxy.log")
	w := startWatched(t, path)
	w.quiet(t, "no log yet")
	appendFile(t, path, numbered(1))
	eventually(t, "the new log's line is read", func() bool { return w.saw(1) })
}

// A log path that is a symlink can change with no event on its name (the
// target is written elsewhere): the monitor polls it.
func TestMonitorPollsASymlinkedLog(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "real.log")
	path := filepath.Join(dir, "surflare-proxy.log")
	appendFile(t, target, numbered(1))
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	w := startWatched(t, path)
	eventually(t, "the first line is read", func() bool { return w.saw(1) })
	appendFile(t, target, numbered(2))
	eventually(t, "a line written to the symlink's target is read", func() bool { return w.saw(2) })
	if w.m.settled() {
		t.Error("a symlinked log counts as settled; its writes would need an event on another name")
	}
}

// Without a watch the monitor polls as before (also when inotify fails).
func TestMonitorPollsWhenItCannotWatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "surflare-proxy.log")
	appendFile(t, path, numbered(1))
	w := &watchedMonitor{}
	m, err := NewMonitor(Options{LogPath: path, Threshold: -1, Poll: testPoll, Refresh: time.Hour,
		Watch:  func(string) (Changes, error) { return nil, os.ErrPermission },
		OnLine: func(l Line) { w.mu.Lock(); w.ns = append(w.ns, l.Node); w.mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	w.m = m
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	eventually(t, "the first line is read", func() bool { return w.saw(1) })
	appendFile(t, path, numbered(2))
	eventually(t, "an appended line is read by polling", func() bool { return w.saw(2) })
}

func TestInotifyNoticesOnlyTheLogsName(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "surflare-proxy.log")
	c, err := Inotify(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	appendFile(t, filepath.Join(dir, "other.log"), "x\n")
	select {
	case <-c.C():
		t.Fatal("a write to another file in the directory was a notice")
	case <-time.After(quietWindow):
	}
	appendFile(t, path, "x\n")
	select {
	case _, ok := <-c.C():
		if !ok {
			t.Fatal("C closed on a write")
		}
	case <-time.After(patience):
		t.Fatal("no notice for a write to the log")
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(patience)
	for {
		select {
		case _, ok := <-c.C():
			if !ok {
				return // the watch ended with its directory
			}
		case <-deadline:
			t.Fatal("C not closed after the directory was removed")
		}
	}
}

func TestInotifyNeedsTheDirectory(t *testing.T) {
	_, err := Inotify(filepath.Join(t.TempDir(), "missing", "surflare-proxy.log"))
	if err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("err = %v, want one naming the missing directory", err)
	}
}
