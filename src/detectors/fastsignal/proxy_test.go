package fastsignal

import (
	"context"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeProcs is a process table: Find lists it, Watch returns when the pid
// is removed.
type fakeProcs struct {
	mu    sync.Mutex
	pids  []int
	gone  map[int]chan struct{}
	finds int
}

func newFakeProcs(pids ...int) *fakeProcs {
	f := &fakeProcs{gone: map[int]chan struct{}{}}
	for _, p := range pids {
		f.start(p)
	}
	return f
}

func (f *fakeProcs) start(pid int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pids = append(f.pids, pid)
	f.gone[pid] = make(chan struct{})
}

func (f *fakeProcs) kill(pid int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pids = slices.DeleteFunc(f.pids, func(p int) bool { return p == pid })
	close(f.gone[pid])
}

func (f *fakeProcs) find() ([]int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.finds++
	return slices.Clone(f.pids), nil
}

func (f *fakeProcs) watch(ctx context.Context, pid int) error {
	f.mu.Lock()
	ch := f.gone[pid]
	f.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// The proxy's death is reported at once (no tick to wait for), the
// replacement the vendor starts is found by the 1 s scan, and while a
// proxy is known nobody's question costs a /proc scan.
func TestProxyTrackerExitAndRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeProcs(100)
		var mu sync.Mutex
		var exits []int
		var exitAt time.Time
		tr, err := NewProxyTracker(TrackerOptions{Find: f.find, Watch: f.watch, OnExit: func(pid int) {
			mu.Lock()
			exits, exitAt = append(exits, pid), time.Now()
			mu.Unlock()
		}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { tr.Run(ctx); close(done) }()
		synctest.Wait()
		for range 100 {
			if pid := tr.First(); pid != 100 {
				t.Fatalf("First = %d, want 100", pid)
			}
		}
		time.Sleep(10 * time.Second)
		if scans, _ := tr.Stats(); scans != 1 {
			t.Fatalf("%d /proc scans in 10 s with a known proxy and 100 questions, want 1", scans)
		}
		killedAt := time.Now()
		f.kill(100)
		synctest.Wait()
		mu.Lock()
		if !slices.Equal(exits, []int{100}) || !exitAt.Equal(killedAt) {
			t.Fatalf("exits %v at +%s, want [100] at once", exits, exitAt.Sub(killedAt))
		}
		mu.Unlock()
		if pid := tr.First(); pid != 0 {
			t.Fatalf("First = %d after the exit, want 0", pid)
		}
		time.Sleep(1500 * time.Millisecond)
		f.start(200)
		time.Sleep(time.Second)
		synctest.Wait()
		if pid := tr.First(); pid != 200 {
			t.Fatalf("First = %d one poll after the restart, want 200", pid)
		}
		// Poke (a connect started a proxy) rescans at once.
		f.start(150)
		tr.Poke()
		synctest.Wait()
		if pids, _ := tr.PIDs(); !slices.Equal(pids, []int{150, 200}) {
			t.Fatalf("PIDs after poke = %v, want [150 200]", pids)
		}
		cancel()
		<-done
	})
}

// The safety rescan replaces a cached pid that /proc no longer lists under
// the proxy's name (a reused pid) and finds a second proxy process.
func TestProxyTrackerSafetyRescan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeProcs(100)
		tr, _ := NewProxyTracker(TrackerOptions{Find: f.find, Watch: f.watch})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { tr.Run(ctx); close(done) }()
		synctest.Wait()
		f.start(300)
		time.Sleep(DefaultSafetyRescan - time.Second)
		if pids, _ := tr.PIDs(); !slices.Equal(pids, []int{100}) {
			t.Fatalf("PIDs before the safety rescan = %v", pids)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if pids, _ := tr.PIDs(); !slices.Equal(pids, []int{100, 300}) {
			t.Fatalf("PIDs after the safety rescan = %v, want [100 300]", pids)
		}
		cancel()
		<-done
	})
}

// The real watch: a pidfd on a child process fires when it dies, and a
// cancelled watch returns the context's error.
func TestWatchExitPidfd(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skip("cannot start sleep:", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	if err := WatchExit(ctx, cmd.Process.Pid, time.Second); err != context.Canceled {
		t.Fatalf("cancelled watch = %v, want context.Canceled", err)
	}
	res := make(chan error, 1)
	start := time.Now()
	go func() { res <- WatchExit(context.Background(), cmd.Process.Pid, time.Hour) }()
	time.Sleep(50 * time.Millisecond)
	cmd.Process.Kill()
	select {
	case err := <-res:
		if err != nil {
			t.Fatal(err)
		}
		// The fallback polls every hour here: only the pidfd can be this quick.
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("exit noticed after %s", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("exit not noticed within 5 s")
	}
	if err := WatchExit(context.Background(), cmd.Process.Pid, time.Hour); err != nil {
		t.Fatalf("watch of an exited process = %v, want nil at once", err)
	}
}
