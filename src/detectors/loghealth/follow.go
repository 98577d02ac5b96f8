package loghealth

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// DefaultTail is how much of the log is read at most, from its end (the
// config's loghealth.tail default).
const DefaultTail int64 = 2 << 20

// readChunk is the size of one read(2); the tail bound limits how many.
const readChunk = 64 << 10

// Follower reads a log file as it grows, like tail -F, with a bound on how
// much it ever reads: on opening a file, and whenever the file has grown by
// more than Tail since the last poll, it skips to the last Tail bytes. It
// notices rotation (the path names a different inode: the rest of the old
// file is read, then the new one from its start) and truncation (the file is
// smaller than our offset: read again from the start).
//
// It does no waiting itself: the owner calls Poll on its own schedule, so
// tests drive it without sleeping. Not safe for concurrent use.
type Follower struct {
	path  string
	tail  int64
	f     *os.File
	pos   int64
	buf   []byte   // an unterminated line carried to the next read
	skip  skipMode // what to do with the bytes up to the next newline
	stats *Stats
	chunk []byte
}

// skipMode says whether the bytes up to the next newline are dropped, and
// how they are counted.
type skipMode int

const (
	keep     skipMode = iota
	skipCut           // we seeked into the middle of a line: counted as partial
	skipLong          // the line passed MaxLineLen: already counted as garbage
)

// NewFollower follows path reading at most tail bytes per poll (0 =
// DefaultTail). Counts go to stats.
func NewFollower(path string, tail int64, stats *Stats) *Follower {
	if tail <= 0 {
		tail = DefaultTail
	}
	return &Follower{path: path, tail: tail, stats: stats, chunk: make([]byte, readChunk)}
}

// Close releases the open file.
func (fl *Follower) Close() error {
	if fl.f == nil {
		return nil
	}
	err := fl.f.Close()
	fl.f = nil
	return err
}

// Poll reads every complete line added since the last call and hands each
// (without its newline) to fn; the slice is only valid during the call. A
// missing file is not an error (the proxy may not have started yet): Poll
// returns fs.ErrNotExist wrapped so the caller can tell.
func (fl *Follower) Poll(fn func([]byte)) error {
	if fl.f == nil {
		if err := fl.open(); err != nil {
			return err
		}
	}
	// Rotation: the path now names another file (or none, between the
	// rename and the proxy's reopen). Finish the old one first.
	onDisk, statErr := os.Stat(fl.path)
	if err := fl.readAvailable(fn); err != nil {
		return err
	}
	if statErr == nil {
		open, err := fl.f.Stat()
		if err != nil {
			return fmt.Errorf("following %s: %w", fl.path, err)
		}
		if !os.SameFile(onDisk, open) {
			fl.stats.Rotations++
			fl.flushPartial()
			fl.Close()
			if err := fl.open(); err != nil {
				return err
			}
			return fl.readAvailable(fn)
		}
	}
	return nil
}

// Settled reports whether the log can only change with an event on path's
// name in its directory (Inotify): the file we read is the regular file
// path names, or there is no file and none open. It is not settled while
// we still read a rotated file (its writer may not have reopened: its
// lines come under another name), or when path is a symlink (the target's
// writes happen elsewhere); the Monitor polls then.
func (fl *Follower) Settled() bool {
	onDisk, err := os.Lstat(fl.path)
	if fl.f == nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	if err != nil || !onDisk.Mode().IsRegular() {
		return false
	}
	open, err := fl.f.Stat()
	return err == nil && os.SameFile(onDisk, open)
}

// open opens path at offset 0; readAvailable then applies the tail bound,
// so a file found at start and a file that replaced a rotated one are both
// read from max(0, size-Tail).
func (fl *Follower) open() error {
	f, err := os.Open(fl.path)
	if err != nil {
		return fmt.Errorf("following %s: %w", fl.path, err)
	}
	fl.f, fl.pos, fl.buf, fl.skip = f, 0, fl.buf[:0], keep
	return nil
}

// readAvailable reads from pos to the current end, skipping ahead when more
// than Tail bytes are pending.
func (fl *Follower) readAvailable(fn func([]byte)) error {
	st, err := fl.f.Stat()
	if err != nil {
		return fmt.Errorf("following %s: %w", fl.path, err)
	}
	size := st.Size()
	if size < fl.pos { // truncated (copytruncate or "> file")
		fl.stats.Truncations++
		fl.flushPartial()
		fl.pos, fl.skip = 0, keep
	}
	if size-fl.pos > fl.tail {
		fl.stats.SkippedBytes += size - fl.tail - fl.pos
		fl.pos = size - fl.tail
		fl.buf = fl.buf[:0]
		fl.skip = skipCut
		// Only a cut line is partial: if the byte before pos is a newline
		// the line at pos is whole.
		var one [1]byte
		if n, _ := fl.f.ReadAt(one[:], fl.pos-1); n == 1 && one[0] == '\n' {
			fl.skip = keep
		}
	}
	for fl.pos < size {
		want := min(int64(len(fl.chunk)), size-fl.pos)
		n, err := fl.f.ReadAt(fl.chunk[:want], fl.pos)
		if n > 0 {
			fl.pos += int64(n)
			fl.consume(fl.chunk[:n], fn)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", fl.path, err)
		}
	}
	return nil
}

// consume splits data into lines, carrying an unterminated one over.
func (fl *Follower) consume(data []byte, fn func([]byte)) {
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			if fl.skip != keep {
				return
			}
			fl.buf = append(fl.buf, data...)
			if len(fl.buf) > MaxLineLen {
				fl.stats.Garbage++
				fl.buf, fl.skip = fl.buf[:0], skipLong
			}
			return
		}
		line := data[:i]
		data = data[i+1:]
		if fl.skip != keep {
			if fl.skip == skipCut {
				fl.stats.Partial++
			}
			fl.skip = keep
			continue
		}
		if len(fl.buf) > 0 {
			fl.buf = append(fl.buf, line...)
			line = fl.buf
		}
		fl.stats.Lines++
		fn(line)
		fl.buf = fl.buf[:0]
	}
}

// flushPartial drops an unterminated line left by a file that is going away
// (rotated or truncated): it will never be completed.
func (fl *Follower) flushPartial() {
	if len(fl.buf) > 0 {
		fl.stats.Partial++
	}
	fl.buf, fl.skip = fl.buf[:0], keep
}
