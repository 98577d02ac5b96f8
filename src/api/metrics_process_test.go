package api_test

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"testing"
	"time"
)

// The process figures follow the process: goroutines, descriptors and
// resident memory taken on and given back show in the next scrape. The
// test's process is the server's, so what it does is what the metrics
// must see.
func TestMetricsFollowTheProcess(t *testing.T) {
	f := newFixture(t, nil)
	scrape := func() map[string]float64 {
		t.Helper()
		rec := f.do("GET", "/api/v1/metrics", f.token, "", "127.0.0.1:1")
		if rec.Code != 200 {
			t.Fatalf("metrics: %d %s", rec.Code, rec.Body)
		}
		return parseExposition(t, rec.Body.String())
	}
	debug.FreeOSMemory() // what earlier tests left resident goes back first
	before := scrape()
	for _, name := range []string{"go_goroutines", "go_threads", "process_open_fds", "process_resident_memory_bytes", "go_memstats_heap_inuse_bytes"} {
		if v, ok := before[name]; !ok || v <= 0 {
			t.Fatalf("%s = %v (present %v), want a positive figure", name, v, ok)
		}
	}

	const goroutines, files = 200, 40
	release := make(chan struct{})
	started := make(chan struct{}, goroutines)
	for range goroutines {
		go func() { started <- struct{}{}; <-release }()
	}
	for range goroutines {
		<-started
	}
	dir := t.TempDir()
	var open []*os.File
	for i := range files {
		fh, err := os.Create(filepath.Join(dir, strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, fh)
	}
	// 64 MiB touched page by page: resident, not just reserved.
	ballast := make([]byte, 64<<20)
	for i := 0; i < len(ballast); i += 4096 {
		ballast[i] = 1
	}
	during := scrape()
	runtime.KeepAlive(ballast)
	// Three quarters, not all: the test binary's own goroutines (the
	// previous tests' servers winding down) may end between the scrapes; a
	// figure that does not follow the process rises by about nothing.
	if d := during["go_goroutines"] - before["go_goroutines"]; d < goroutines*3/4 {
		t.Errorf("go_goroutines rose by %v with %d more goroutines", d, goroutines)
	}
	if d := during["process_open_fds"] - before["process_open_fds"]; d < files*3/4 {
		t.Errorf("process_open_fds rose by %v with %d more open files", d, files)
	}
	if d := during["process_resident_memory_bytes"] - before["process_resident_memory_bytes"]; d < 48<<20 {
		t.Errorf("process_resident_memory_bytes rose by %.0f bytes with 64 MiB touched", d)
	}

	close(release)
	for _, fh := range open {
		fh.Close()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		after := scrape()
		back := after["go_goroutines"] < during["go_goroutines"]-goroutines/2 &&
			after["process_open_fds"] <= during["process_open_fds"]-files
		if back {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines %v and fds %v did not fall back after release (during: %v, %v)",
				after["go_goroutines"], after["process_open_fds"], during["go_goroutines"], during["process_open_fds"])
		}
		time.Sleep(20 * time.Millisecond)
	}
}
