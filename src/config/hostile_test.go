package config

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Garbage in /etc/config/surflare, read the way the daemon reads it at
// start and on every SIGHUP (Load), with the allocations measured.

func allocatedBy(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// Protection: MaxFileSize in Load (the read is bounded before parsing).
// Without it a 2 GiB config is 2 GiB of heap — on a router, the OOM
// killer — and /dev/zero is read for ever.
func TestLoadRefusesHugeConfigsWithoutReadingThem(t *testing.T) {
	path := filepath.Join(t.TempDir(), "surflare")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("config surflare 'main'\n\toption mode 'global'\n# ")
	if err := f.Truncate(2 << 30); err != nil { // a hole: no disk
		t.Fatal(err)
	}
	f.Close()
	var lerr error
	alloc := allocatedBy(func() { _, _, lerr = Load(path) })
	if lerr == nil || !strings.Contains(lerr.Error(), "larger than") {
		t.Fatalf("2 GiB config: err %v, want a size error", lerr)
	}
	if alloc > 8<<20 {
		t.Fatalf("loading a 2 GiB config allocated %d MiB", alloc>>20)
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		link := filepath.Join(t.TempDir(), "zero")
		if err := os.Symlink("/dev/zero", link); err != nil {
			t.Fatal(err)
		}
		alloc = allocatedBy(func() { _, _, lerr = Load(link) })
		if lerr == nil || alloc > 8<<20 {
			t.Fatalf("config linked to /dev/zero: err %v after %d MiB", lerr, alloc>>20)
		}
	}
}

// Protection: the UCI parser reports garbage as errors and never panics;
// the allocations stay proportional to the (bounded) input. 1 MiB of
// random bytes, of random UCI-looking tokens and of one endless line
// must each give an error list, not a crash or a config.
func TestLoadGarbageIsAnErrorInBoundedMemory(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 21))
	words := []string{"config", "option", "list", "package", "'", "\"", "\\", "surflare", "main", "\n", "\t", " ", "#", "mode", "global"}
	inputs := map[string][]byte{}
	raw := make([]byte, MaxFileSize)
	for i := range raw {
		raw[i] = byte(r.UintN(256))
	}
	inputs["random bytes"] = raw
	var tok strings.Builder
	for tok.Len() < MaxFileSize-16 {
		tok.WriteString(words[r.IntN(len(words))])
	}
	inputs["random tokens"] = []byte(tok.String())
	inputs["one endless line"] = []byte("config surflare 'main'\n\toption mode '" + strings.Repeat("x", MaxFileSize-64))
	for name, in := range inputs {
		path := filepath.Join(t.TempDir(), "surflare")
		if err := os.WriteFile(path, in, 0o600); err != nil {
			t.Fatal(err)
		}
		var c *Config
		var lerr error
		alloc := allocatedBy(func() { c, _, lerr = Load(path) })
		t.Logf("%s: %d kB in, %d kB allocated, %.80v", name, len(in)>>10, alloc>>10, lerr)
		if lerr == nil || c != nil {
			t.Errorf("%s: loaded as a config", name)
		}
		if alloc > 64*uint64(len(in)) {
			t.Errorf("%s: %d MiB allocated for %d KiB", name, alloc>>20, len(in)>>10)
		}
	}
}
