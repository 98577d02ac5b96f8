package daemon

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"surflare-watchdog/src/config"
	"surflare-watchdog/src/detectors/loghealth"
	"surflare-watchdog/src/firewall"
	"surflare-watchdog/src/runfiles"
)

// emptyNetNS is a fresh network namespace with no tables, for the counter
// watch's reads (they fail there, quietly, and touch nothing of the host).
func emptyNetNS(t *testing.T) netns.NsHandle {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the counter watch reads nftables counters in a fresh network namespace")
	}
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	defer orig.Close()
	ns, err := netns.New()
	if err != nil {
		runtime.UnlockOSThread() // New failed before switching
		t.Fatal(err)
	}
	if err := netns.Set(orig); err != nil {
		ns.Close()
		// Still locked: the thread, left in the new namespace, dies with
		// the test goroutine instead of serving other goroutines.
		t.Fatal(err)
	}
	runtime.UnlockOSThread()
	t.Cleanup(func() { ns.Close() })
	return ns
}

// startFastFrom parses file (UCI text on top of the defaults) and runs
// startFast with it, as `run` does; everything it starts ends with the test.
func startFastFrom(t *testing.T, file string) *Daemon {
	t.Helper()
	c, _, err := config.Parse("surflare", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	d := &Daemon{log: slog.New(slog.NewTextHandler(io.Discard, nil)), procs: newNSProcs(), dets: &detectorSet{}}
	if c.FastSignal.CountersOn() {
		d.fw = &fwAdapter{fw: firewall.New(firewall.WithNetNS(int(emptyNetNS(t))))}
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); d.aux.Wait() })
	d.startFast(ctx, c)
	return d
}

// Each switch of section fastsignal decides whether its signal runs; a
// signal that is off leaves no evidence for the engine (one failed check
// then never rotates on its word) and no tracker in the pid cache.
func TestFastSignalSwitches(t *testing.T) {
	const comm = "surflare-proxy"
	cases := []struct {
		name                    string
		file                    string
		tracker, logs, counters bool
		evidence                bool
	}{
		{"shipped defaults", "", true, true, true, true},
		{"all off", "config fastsignal\n\toption enabled '0'\n", false, false, false, false},
		{"proxy exit off", "config fastsignal\n\toption proxy_exit '0'\n", false, true, true, true},
		{"node log off", "config fastsignal\n\toption node_log '0'\n", true, false, true, true},
		{"counters off", "config fastsignal\n\toption counters '0'\n", true, true, false, true},
		{"only the exit watch", "config fastsignal\n\toption node_log '0'\n\toption counters '0'\n", true, false, false, false},
		{"log health off", "config loghealth\n\toption enabled '0'\n", true, false, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := startFastFrom(t, tc.file)
			f := d.fast
			if got := f.tracker != nil; got != tc.tracker {
				t.Errorf("proxy exit watch running = %v, want %v", got, tc.tracker)
			}
			if got := d.procs.proxy.tracker(comm) != nil; got != tc.tracker {
				t.Errorf("pid cache has the tracker = %v, want %v", got, tc.tracker)
			}
			if got := f.logs != nil; got != tc.logs {
				t.Errorf("node log signal = %v, want %v", got, tc.logs)
			}
			if got := f.counters != nil; got != tc.counters {
				t.Errorf("counter watch running = %v, want %v", got, tc.counters)
			}
			if got := f.evidence() != nil; got != tc.evidence {
				t.Errorf("engine corroborator set = %v, want %v", got, tc.evidence)
			}
		})
	}
}

// With every fast signal off, startFast starts no goroutine at all: the
// aux group is empty while the context is still live.
func TestFastSignalsOffStartNoGoroutine(t *testing.T) {
	d := startFastFrom(t, "config fastsignal\n\toption enabled '0'\n")
	done := make(chan struct{})
	go func() { d.aux.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a fast signal goroutine runs although fastsignal.enabled=0")
	}
	// Off, log health's lines are dropped, never a nil dereference.
	d.fast.observeLine(loghealth.Line{Time: time.Now(), Node: "Dallas", Transit: "auto", Error: "context deadline exceeded"})
}

// storm503.enabled=0: no monitor, no override, and the state file an
// earlier run left is gone; on: the override watches the monitor.
func TestStormSwitch(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, runfiles.Storm503File)
	if err := os.WriteFile(stale, []byte(`{"count":12}`), 0o600); err != nil {
		t.Fatal(err)
	}
	d := &Daemon{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	c := config.Default()
	c.Paths.RunDir = dir
	c.Storm503.Enabled = false
	m, o := d.newStorm503(c, func(string) {})
	if m != nil || o != nil {
		t.Fatalf("storm503.enabled=0 built a monitor (%v) or override (%v)", m, o)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the old storm state file is still there: %v", err)
	}
	if m, o := d.newStorm503(c, func(string) {}); m != nil || o != nil {
		t.Fatal("a second start without a state file built a monitor")
	}

	c.Storm503.Enabled = true
	m, o = d.newStorm503(c, func(string) {})
	if m == nil || o == nil || o.Monitor() != m {
		t.Fatalf("storm503.enabled=1: monitor %v, override %v", m, o)
	}
}
