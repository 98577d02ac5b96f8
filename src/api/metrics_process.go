package api

import (
	"bytes"
	"os"
	"runtime"
	"strconv"
)

// The daemon's own process figures, under the names Prometheus's Go and
// process collectors use (client_golang), so a router's scraper and the
// chaos run read them as they read any Go service. They are what a daemon
// that lives for years must keep bounded: a goroutine or descriptor that
// leaks per reconnect shows as a slope here long before the router runs
// out. The chaos watcher (src/lab/chaos_watch.go) judges the goroutine
// slope from go_goroutines: /proc shows only threads, which the Go
// runtime caps and reuses, so a goroutine leak is invisible there.

// pageSize converts /proc/self/statm's pages to bytes.
var pageSize = int64(os.Getpagesize())

func processMetrics(e *exposition) {
	e.add("go_goroutines", "gauge", "Number of goroutines that currently exist.", float64(runtime.NumGoroutine()))
	e.add("go_threads", "gauge", "Number of OS threads created.", float64(threadCount()))
	if n, err := openFDs(); err == nil {
		e.add("process_open_fds", "gauge", "Number of open file descriptors.", float64(n))
	}
	if rss, err := residentBytes(); err == nil {
		e.add("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", float64(rss))
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	e.add("go_memstats_heap_inuse_bytes", "gauge", "Number of heap bytes that are in use.", float64(ms.HeapInuse))
}

// threadCount is the runtime's thread count (the threadcreate profile).
func threadCount() int {
	n, _ := runtime.ThreadCreateProfile(nil)
	return n
}

// openFDs counts /proc/self/fd (the directory's own descriptor excluded).
func openFDs() (int, error) {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return 0, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return 0, err
	}
	return max(len(names)-1, 0), nil
}

// residentBytes is the second field of /proc/self/statm, in bytes.
func residentBytes() (int64, error) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, err
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0, strconv.ErrSyntax
	}
	pages, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil {
		return 0, err
	}
	return pages * pageSize, nil
}
