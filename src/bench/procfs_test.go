package bench

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	// A command name with spaces and a ')' must not shift the fields.
	stat := []byte("4242 (surflare (x) y) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 75 30 12 20 0 9 0 100 1000000 2000 18446744073709551615\n")
	self, kids, err := parseStatCPU(stat)
	if err != nil {
		t.Fatal(err)
	}
	if self != 3250*time.Millisecond || kids != 420*time.Millisecond {
		t.Errorf("cpu %v children %v, want 3.25s and 420ms (ticks of 10 ms)", self, kids)
	}
	if _, _, err := parseStatCPU([]byte("1 (x) S 1 2")); err == nil {
		t.Error("truncated stat accepted")
	}
}

func TestParseStatusMemory(t *testing.T) {
	rss, hwm, err := parseStatusMemory([]byte("Name:\tsurflare-watch\nVmPeak:\t 800000 kB\nVmHWM:\t   17500 kB\nVmRSS:\t   14000 kB\nThreads:\t9\n"))
	if err != nil || rss != 14000 || hwm != 17500 {
		t.Errorf("rss %d hwm %d err %v, want 14000 17500", rss, hwm, err)
	}
	if _, _, err := parseStatusMemory([]byte("Name:\tkthreadd\nThreads:\t1\n")); err == nil {
		t.Error("a status without memory lines (kernel thread) was accepted")
	}
}

func TestReadProcSelf(t *testing.T) {
	s, err := ReadProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s.RSSKB <= 0 || s.PeakRSSKB < s.RSSKB {
		t.Errorf("own RSS %d kB, peak %d kB: want 0 < RSS <= peak", s.RSSKB, s.PeakRSSKB)
	}
}

func TestPerHour(t *testing.T) {
	if got := perHour(30, 2*time.Minute); got != 900 {
		t.Errorf("30 in 2 min = %v/h, want 900", got)
	}
	if got := perHour(5, 0); got != 0 {
		t.Errorf("empty window gave %v", got)
	}
}

// TestForkCounterCountsChildren starts three short-lived children (a /proc
// scan would likely miss them) and expects exactly three, and none for an
// unwatched process.
func TestForkCounterCountsChildren(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the proc connector requires CAP_NET_ADMIN")
	}
	fc, err := NewForkCounter()
	if err != nil {
		t.Fatalf("proc connector: %v", err)
	}
	defer fc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fc.Run(ctx) }()
	// Go's first exec in a process forks once more to probe for pidfd
	// support: get that out of the way (and its events consumed) before
	// counting.
	fc.Watch(os.Getpid())
	if err := exec.Command("true").Run(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	fc.Reset()
	for range 3 {
		if err := exec.Command("true").Run(); err != nil {
			t.Fatal(err)
		}
	}
	// Events arrive asynchronously.
	deadline := time.Now().Add(3 * time.Second)
	for {
		c, _, _ := fc.Counts()
		if c >= 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	c, d, lost := fc.Counts()
	if c != 3 || d != 3 || lost != 0 {
		t.Errorf("children %d descendants %d lost %d, want 3 3 0", c, d, lost)
	}
	// A grandchild counts as a descendant, not a child.
	fc.Reset()
	if err := exec.Command("sh", "-c", "/bin/true; /bin/true").Run(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	c, d, _ = fc.Counts()
	if c != 1 || d < 2 {
		t.Errorf("sh running two commands: children %d descendants %d, want 1 and >= 2", c, d)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}
