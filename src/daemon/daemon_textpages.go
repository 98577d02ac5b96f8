package daemon

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The binary's read-only segments (text, rodata and the pcln table: about
// 11 MB of the 12 MB static binary) are most of the daemon's resident
// memory. They are clean file pages, shared with the page cache, but RSS
// and VmHWM count every one mapped, and the kernel maps up to 64 kB around
// each fault ("fault-around"), so the runtime's start and the package
// inits — code and tables run once and never again — leave megabytes
// mapped. Dropping those mappings when the daemon proper starts
// (MADV_DONTNEED) lets only the pages it runs afterwards come back. It
// costs one page fault per page that is used again (measured: a few ms of
// a start) and nothing later.
//
// MADV_RANDOM would not help: on this kernel (6.18) it turns read-ahead
// off but not fault-around (measured: 68 kB mapped per touch either way).
//
// Only mappings without write permission are dropped: a private writable
// file mapping (the data segment) holds modified pages that MADV_DONTNEED
// would reset to the file's contents. Text and rodata are never written,
// so dropping them only costs a page fault when they run again.

// binarySegment is one read-only mapping of the daemon's own executable.
type binarySegment struct {
	start, end uintptr
	perms      string
}

// ownReadOnlySegments lists the read-only mappings of the file that
// holds the code at pc, from a /proc/self/maps-formatted text. It matches
// by device and inode, not by path, so a binary replaced on disk by an
// upgrade (" (deleted)") is still found.
func ownReadOnlySegments(maps io.Reader, pc uintptr) ([]binarySegment, error) {
	type mapping struct {
		binarySegment
		dev, inode string
	}
	var all []mapping
	var dev, inode string
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		m := mapping{binarySegment{uintptr(start), uintptr(end), f[1]}, f[3], f[4]}
		all = append(all, m)
		if pc >= m.start && pc < m.end {
			dev, inode = m.dev, m.inode
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if inode == "" || inode == "0" {
		return nil, fmt.Errorf("no file mapping holds the daemon's code at %#x", pc)
	}
	var segs []binarySegment
	for _, m := range all {
		if m.dev == dev && m.inode == inode && !strings.Contains(m.perms, "w") {
			segs = append(segs, m.binarySegment)
		}
	}
	return segs, nil
}

// trimBinaryPages drops the current mappings of the daemon's own
// read-only segments (MADV_DONTNEED). It returns the bytes covered. A
// failure only leaves the memory figure where it was.
func trimBinaryPages() (int, error) {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	segs, err := ownReadOnlySegments(f, reflect.ValueOf(trimBinaryPages).Pointer())
	if err != nil {
		return 0, err
	}
	n := 0
	for _, s := range segs {
		size := s.end - s.start
		if _, _, e := unix.Syscall(unix.SYS_MADVISE, s.start, size, unix.MADV_DONTNEED); e != 0 {
			return n, fmt.Errorf("madvise %#x-%#x (%s): %w", s.start, s.end, s.perms, e)
		}
		n += int(size)
	}
	return n, nil
}
