package loghealth

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// Gigabytes of garbage in the proxy log, read the way the daemon reads it
// (Follower.Poll feeding Parser.ParseLine), with the heap measured. The
// file is made sparse: written in place ahead of the reader and punched
// out behind it, so the disk never holds more than a few megabytes while
// the file's size runs into gigabytes.

// garbageChunk is 1 MiB of random bytes with no newline: one line that
// never ends, the worst case for a line reader.
func garbageChunk(seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, 1<<20)
	for i := range b {
		b[i] = byte(r.UintN(256))
		if b[i] == '\n' {
			b[i] = 'x'
		}
	}
	return b
}

// heapInuse is the live heap after a GC.
func heapInuse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// Protection: MaxLineLen in Follower.consume (an unterminated line is
// dropped once it passes 64 KiB). Without it the carried-over line grows by
// every byte read: 512 MiB of newline-free garbage would be 512 MiB of
// heap. The test also checks lines after the garbage are still parsed.
func TestFollowerStreamsGarbageInBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 512 MiB")
	}
	path := filepath.Join(t.TempDir(), "surflare-proxy.log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := NewParser(nil)
	if err != nil {
		t.Fatal(err)
	}
	var stats Stats
	fl := NewFollower(path, DefaultTail, &stats)
	defer fl.Close()
	chunk := garbageChunk(1)
	matched := 0
	poll := func() {
		if err := fl.Poll(func(b []byte) {
			if _, k := p.ParseLine(b); k == Matched {
				matched++
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	base := heapInuse()
	var peak uint64
	const total = 512
	var off int64
	for i := range total {
		if _, err := f.WriteAt(chunk, off); err != nil {
			t.Fatal(err)
		}
		poll()
		// Free what the reader has passed: the file keeps its size.
		if off >= 2<<20 {
			if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off-(2<<20), 1<<20); err != nil {
				t.Skipf("cannot punch holes here (%v): the test would need 512 MiB of disk", err)
			}
		}
		off += int64(len(chunk))
		if i%32 == 0 {
			if h := heapInuse(); h > peak {
				peak = h
			}
		}
	}
	line := []byte("\n+0000 2026-11-29 14:03:11 ERROR [1820334452 2.1s] outbound/urltest[Dallas via Tokyo]: Get \"http://198.18.30.21/generate_204\": context deadline exceeded\n")
	if _, err := f.WriteAt(line, off); err != nil {
		t.Fatal(err)
	}
	poll()
	if h := heapInuse(); h > peak {
		peak = h
	}
	grew := int64(peak) - int64(base)
	t.Logf("%d MiB of garbage read; heap in use %d kB over the start at its peak; stats %+v", total, grew>>10, stats)
	if grew > 8<<20 {
		t.Fatalf("the heap grew by %d MiB while streaming garbage: a line is not bounded", grew>>20)
	}
	if stats.Garbage == 0 {
		t.Fatal("no garbage counted")
	}
	if matched != 1 {
		t.Fatalf("the urltest line after the garbage: matched %d, want 1", matched)
	}
}

// Protection: the tail bound (DefaultTail, 2 MiB) in readAvailable. A log
// that jumped by 4 GiB between two polls is read from its last 2 MiB;
// without the bound one poll would read 4 GiB.
func TestFollowerSkipsAGigabyteJumpToTheTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "surflare-proxy.log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var stats Stats
	fl := NewFollower(path, DefaultTail, &stats)
	defer fl.Close()
	read := int64(0)
	poll := func() {
		if err := fl.Poll(func(b []byte) { read += int64(len(b)) + 1 }); err != nil {
			t.Fatal(err)
		}
	}
	poll()
	const jump = 4 << 30
	if err := f.Truncate(jump); err != nil { // a hole: zeros, no disk
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("\nlast line\n"), jump); err != nil {
		t.Fatal(err)
	}
	poll()
	if stats.SkippedBytes < jump-DefaultTail {
		t.Fatalf("skipped %d bytes of a %d byte jump: the tail bound did not hold", stats.SkippedBytes, int64(jump))
	}
	if read > DefaultTail+64<<10 {
		t.Fatalf("read %d bytes after the jump, want at most the tail (%d)", read, DefaultTail)
	}
}
