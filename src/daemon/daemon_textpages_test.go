package daemon

import (
	"bufio"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// The segments are found by the file that holds the code, read-only ones
// only, also when the binary was replaced on disk (an upgrade).
func TestOwnReadOnlySegments(t *testing.T) {
	maps := `00400000-009a2000 r-xp 00000000 fe:00 9988075    /usr/sbin/surflare-watchdog (deleted)
009a2000-00f7a000 r--p 005a2000 fe:00 9988075    /usr/sbin/surflare-watchdog (deleted)
00f7a000-00fdd000 rw-p 00b7a000 fe:00 9988075    /usr/sbin/surflare-watchdog (deleted)
00fdd000-03021000 rw-p 00000000 00:00 0
7f0000000000-7f0000100000 r--p 00000000 fe:00 1234    /usr/lib/other.so
7ffe0000-7fff0000 r-xp 00000000 00:00 0    [vdso]
garbage line
`
	segs, err := ownReadOnlySegments(strings.NewReader(maps), 0x500000)
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) != 2 || segs[0].start != 0x400000 || segs[1].end != 0xf7a000 {
		t.Fatalf("segments = %+v, want text and rodata only", segs)
	}
	if _, err := ownReadOnlySegments(strings.NewReader(maps), 0x7ffe1000); err == nil {
		t.Fatal("code in an anonymous mapping (vdso) was taken for the binary")
	}
}

// written is a data-segment variable: dropping pages must never reset it.
var written = 1

// After the trim the binary's mapped text is smaller — the start's pages
// are gone — and the program still runs, with its data intact.
func TestTrimBinaryPagesDropsMappedText(t *testing.T) {
	written = 42
	before := mappedText(t)
	n, err := trimBinaryPages()
	if err != nil {
		t.Fatal(err)
	}
	after := mappedText(t)
	if n == 0 || after >= before {
		t.Fatalf("trim covered %d bytes; mapped read-only text %d kB before, %d kB after: want fewer after", n, before, after)
	}
	if written != 42 {
		t.Fatalf("a data-segment variable reads %d after the trim, want 42", written)
	}
	if s := strconv.Itoa(written); s != "42" { // code runs again from refaulted pages
		t.Fatal(s)
	}
}

// mappedText is the Rss (kB) of the test binary's read-only mappings.
func mappedText(t *testing.T) int {
	t.Helper()
	maps, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Skip("no /proc/self/maps:", err)
	}
	segs, err := ownReadOnlySegments(maps, reflect.ValueOf(trimBinaryPages).Pointer())
	maps.Close()
	if err != nil {
		t.Fatal(err)
	}
	starts := map[uint64]bool{}
	for _, s := range segs {
		starts[uint64(s.start)] = true
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	total, in := 0, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		switch {
		case len(fs) == 0:
		case !strings.HasSuffix(fs[0], ":"): // a mapping's header
			lo, _, _ := strings.Cut(fs[0], "-")
			a, _ := strconv.ParseUint(lo, 16, 64)
			in = starts[a]
		case in && fs[0] == "Rss:":
			v, _ := strconv.Atoi(fs[1])
			total += v
		}
	}
	return total
}
