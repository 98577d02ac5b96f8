//go:build pprof

package profiling

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"
)

// Env is the variable that switches profiling on: DIR,DELAY,WINDOW.
const Env = "SURFLARE_WATCHDOG_PROFILE"

func init() {
	v := os.Getenv(Env)
	if v == "" {
		return
	}
	dir, delay, window, err := parse(v)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s=%q: %v (want DIR,DELAY,WINDOW, e.g. /tmp/prof,40s,60s); not profiling\n", Env, v, err)
		return
	}
	go run(dir, delay, window)
}

func parse(v string) (dir string, delay, window time.Duration, err error) {
	f := strings.Split(v, ",")
	if len(f) != 3 || f[0] == "" {
		return "", 0, 0, fmt.Errorf("three comma-separated fields")
	}
	if delay, err = time.ParseDuration(f[1]); err != nil {
		return "", 0, 0, err
	}
	if window, err = time.ParseDuration(f[2]); err != nil || window <= 0 {
		return "", 0, 0, fmt.Errorf("window %q: want a duration > 0", f[2])
	}
	return f[0], delay, window, nil
}

func run(dir string, delay, window time.Duration) {
	time.Sleep(delay)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		slog.Error("profiling: no profile directory", "dir", dir, "err", err)
		return
	}
	pid := os.Getpid()
	cpu, err := os.Create(filepath.Join(dir, fmt.Sprintf("cpu-%d.pprof", pid)))
	if err != nil {
		slog.Error("profiling: cannot write the CPU profile", "err", err)
		return
	}
	defer cpu.Close()
	// The default 100 Hz: at 1 kHz (tried) this Go's profiler recorded a
	// fifth of the CPU time /proc/PID/stat counts. Use a long window.
	if err := pprof.StartCPUProfile(cpu); err != nil {
		slog.Error("profiling: cannot start the CPU profile", "err", err)
		return
	}
	slog.Info("profiling: CPU profile started", "window", window, "file", cpu.Name())
	time.Sleep(window)
	pprof.StopCPUProfile()
	runtime.GC()
	heap, err := os.Create(filepath.Join(dir, fmt.Sprintf("heap-%d.pprof", pid)))
	if err != nil {
		slog.Error("profiling: cannot write the heap profile", "err", err)
		return
	}
	defer heap.Close()
	if err := pprof.Lookup("heap").WriteTo(heap, 0); err != nil {
		slog.Error("profiling: cannot write the heap profile", "err", err)
		return
	}
	// The text form ends with runtime.MemStats: heap in use and idle,
	// stacks, what was returned to the OS — the anonymous half of RSS.
	if txt, err := os.Create(filepath.Join(dir, fmt.Sprintf("heap-%d.txt", pid))); err == nil {
		pprof.Lookup("heap").WriteTo(txt, 1)
		txt.Close()
	}
	slog.Info("profiling: profiles written", "dir", dir)
}
