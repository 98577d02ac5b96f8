package loghealth

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// logLine is an urltest error the way the proxy writes it, numbered so a
// test can tell which lines were read.
func logLine(node string, n int) string {
	return fmt.Sprintf("+0000 2026-11-29 14:03:11 ERROR [%d 2.1s] outbound/urltest[%s via auto]: Get \"http://198.18.30.21/generate_204\": context deadline exceeded\n", n, node)
}

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

type collector struct {
	fl    *Follower
	stats Stats
	lines []string
}

func newCollector(path string, tail int64) *collector {
	c := &collector{}
	c.fl = NewFollower(path, tail, &c.stats)
	return c
}

// poll returns the lines read by one Poll.
func (c *collector) poll(t *testing.T) []string {
	t.Helper()
	var got []string
	if err := c.fl.Poll(func(b []byte) { got = append(got, string(b)) }); err != nil {
		t.Fatalf("poll: %v", err)
	}
	c.lines = append(c.lines, got...)
	return got
}

func TestFollowGrowthAndPartialLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "proxy.log")
	appendFile(t, path, "one\ntwo\nthr")
	c := newCollector(path, 0)
	t.Cleanup(func() { c.fl.Close() })
	if got := c.poll(t); strings.Join(got, ",") != "one,two" {
		t.Fatalf("first poll %q, want one,two (the unterminated line waits)", got)
	}
	if got := c.poll(t); len(got) != 0 {
		t.Fatalf("nothing new, got %q", got)
	}
	appendFile(t, path, "ee\nfour\n")
	if got := c.poll(t); strings.Join(got, ",") != "three,four" {
		t.Fatalf("after growth %q, want three,four", got)
	}
}

func TestFollowRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "proxy.log")
	appendFile(t, path, "a1\n")
	c := newCollector(path, 0)
	t.Cleanup(func() { c.fl.Close() })
	c.poll(t)
	// logrotate: the proxy writes a last line to the old file after the
	// rename, then a new file appears at the path.
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	appendFile(t, path+".1", "a2\n")
	if got := c.poll(t); strings.Join(got, ",") != "a2" {
		t.Fatalf("while the path is missing: %q, want a2 from the renamed file", got)
	}
	appendFile(t, path+".1", "a3\n")
	appendFile(t, path, "b1\nb2\n")
	if got := c.poll(t); strings.Join(got, ",") != "a3,b1,b2" {
		t.Fatalf("after rotation %q, want the old file's rest then the new file from its start", got)
	}
	if c.stats.Rotations != 1 {
		t.Errorf("rotations %d, want 1", c.stats.Rotations)
	}
	appendFile(t, path, "b3\n")
	if got := c.poll(t); strings.Join(got, ",") != "b3" {
		t.Fatalf("new file growth %q", got)
	}
}

func TestFollowTruncation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "proxy.log")
	appendFile(t, path, "old1\nold2\nold3\n")
	c := newCollector(path, 0)
	t.Cleanup(func() { c.fl.Close() })
	c.poll(t)
	// copytruncate, then the proxy writes on.
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	appendFile(t, path, "new1\n")
	if got := c.poll(t); strings.Join(got, ",") != "new1" {
		t.Fatalf("after truncation %q, want new1", got)
	}
	if c.stats.Truncations != 1 {
		t.Errorf("truncations %d, want 1", c.stats.Truncations)
	}
}

func TestFollowMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "proxy.log")
	c := newCollector(path, 0)
	err := c.fl.Poll(func([]byte) {})
	if !os.IsNotExist(err) && !strings.Contains(fmt.Sprint(err), "no such file") {
		t.Fatalf("missing log: err %v, want not-exist", err)
	}
	appendFile(t, path, "x\n")
	if got := c.poll(t); strings.Join(got, ",") != "x" {
		t.Fatalf("once it appears: %q", got)
	}
	c.fl.Close()
}

// The tail bound: a 5 MB log is read from its last 2 MB only, at start and
// when it grows by more than the bound between two polls.
func TestFollowNeverReadsMoreThanTail(t *testing.T) {
	const tail = 2 << 20
	path := filepath.Join(t.TempDir(), "proxy.log")
	var sb strings.Builder
	n := 0
	for sb.Len() < 5<<20 {
		sb.WriteString(logLine("Dallas", n))
		n++
	}
	appendFile(t, path, sb.String())
	size := int64(sb.Len())

	c := newCollector(path, tail)
	t.Cleanup(func() { c.fl.Close() })
	got := c.poll(t)
	var read int64
	for _, l := range got {
		read += int64(len(l)) + 1
	}
	if read > tail {
		t.Fatalf("read %d bytes of lines, more than the %d tail", read, tail)
	}
	if read < tail-int64(len(logLine("Dallas", n))) {
		t.Errorf("read only %d bytes, want nearly the whole %d tail", read, tail)
	}
	if !strings.Contains(got[len(got)-1], fmt.Sprintf("[%d ", n-1)) {
		t.Errorf("last line read %q, want line %d (the end of the file)", got[len(got)-1], n-1)
	}
	if c.stats.SkippedBytes != size-tail {
		t.Errorf("skipped %d bytes, want %d", c.stats.SkippedBytes, size-tail)
	}
	if c.stats.Partial != 1 {
		t.Errorf("partial %d, want 1 (the line cut by the seek)", c.stats.Partial)
	}

	// A burst of 3 MB between two polls is bounded the same way.
	appendFile(t, path, strings.Repeat(logLine("Miami", 0), (3<<20)/len(logLine("Miami", 0))))
	got = c.poll(t)
	read = 0
	for _, l := range got {
		read += int64(len(l)) + 1
	}
	if read > tail {
		t.Fatalf("burst: read %d bytes, more than the tail", read)
	}
}

func TestFollowGarbage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "proxy.log")
	// A binary blob without newlines longer than MaxLineLen, then a line.
	appendFile(t, path, strings.Repeat("\x00\xff", MaxLineLen)+"\n"+"ok\n")
	c := newCollector(path, 0)
	t.Cleanup(func() { c.fl.Close() })
	if got := c.poll(t); strings.Join(got, ",") != "ok" {
		t.Fatalf("got %q, want only ok", got)
	}
	if c.stats.Garbage != 1 || c.stats.Partial != 0 {
		t.Errorf("garbage %d partial %d, want 1 and 0", c.stats.Garbage, c.stats.Partial)
	}
}
