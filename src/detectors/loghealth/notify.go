package loghealth

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Changes tells the Monitor when the log may have changed, so an idle log
// costs no reads (issue 19: the 500 ms poll was 7,200 wake-ups an hour on a
// healthy tunnel, whose proxy logs nothing). Options.Watch makes one.
type Changes interface {
	// C receives a value after something happened to the log's name in its
	// directory: a write, a truncation, a rename, a creation, a removal.
	// Notices are coalesced (at most one pending). C is closed when the
	// watch ends by itself (its directory was removed or renamed, the
	// kernel's queue failed): the Monitor then polls and watches anew.
	C() <-chan struct{}
	// Close ends the watch; C is closed after it.
	Close() error
}

// Inotify watches the log with inotify(7): its directory for what happens
// to the log's name (IN_CREATE, IN_MOVED_TO, IN_MOVED_FROM, IN_DELETE) and
// for the directory itself going away, and the file for its writes and
// truncations (IN_MODIFY, IN_ATTRIB). Writes are watched on the file, not
// the directory, because a directory watch reports every write to every
// file in it, and the vendor's other logs there may be busy: each would
// wake us for nothing. When a new file takes the name (rotation,
// re-creation), the watch moves to it. A name event for another file in
// the directory is ignored.
//
// The Monitor polls whenever its open file is not the regular file path
// names (a rotated file still being written, a symlink): only then could
// the log change with no event for it. It is Options.Watch in the daemon.
//
// A static, cgo-free binary can use it: the calls are golang.org/x/sys's,
// and the descriptor is read through Go's netpoller (non-blocking, no
// thread parked on it). An error (no inotify, out of instances or watches,
// no directory yet) leaves the Monitor polling, as before.
func Inotify(path string) (Changes, error) {
	path = filepath.Clean(path)
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify on %s: %w", dir, err)
	}
	const dirMask = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_MOVED_FROM | unix.IN_DELETE |
		unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR
	dirWD, err := unix.InotifyAddWatch(fd, dir, dirMask)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("inotify on %s: %w", dir, err)
	}
	// A non-blocking descriptor handed to os.NewFile is read through the
	// netpoller, and Close wakes a pending Read.
	f := os.NewFile(uintptr(fd), "inotify:"+dir)
	w := &inotifyWatch{f: f, path: path, name: []byte(base), dirWD: dirWD, fileWD: -1,
		c: make(chan struct{}, 1), done: make(chan struct{})}
	w.watchFile() // none yet is fine: its creation is a name event
	go w.read()
	return w, nil
}

// fileMask is what the file's own watch reports: writes and truncations
// (IN_MODIFY), and IN_ATTRIB (a chmod, the last link gone).
const fileMask = unix.IN_MODIFY | unix.IN_ATTRIB

type inotifyWatch struct {
	f      *os.File
	path   string
	name   []byte
	dirWD  int
	fileWD int // -1: no file watched (only read's goroutine changes it after Inotify)
	c      chan struct{}
	done   chan struct{} // closed when read returns

	once sync.Once
}

// watchFile moves the file watch to the file path names now (best effort:
// a file that is not there yet announces itself by name).
func (w *inotifyWatch) watchFile() {
	rc, err := w.f.SyscallConn()
	if err != nil {
		return
	}
	// Control keeps the descriptor open for the call (Close may race).
	rc.Control(func(fd uintptr) {
		wd, err := unix.InotifyAddWatch(int(fd), w.path, fileMask)
		if err != nil || wd == w.fileWD {
			return
		}
		if w.fileWD >= 0 && w.fileWD != w.dirWD {
			// The old file's writes no longer matter: the Monitor polls
			// while it still reads one.
			unix.InotifyRmWatch(int(fd), uint32(w.fileWD))
		}
		w.fileWD = wd
	})
}

func (w *inotifyWatch) C() <-chan struct{} { return w.c }

func (w *inotifyWatch) Close() error {
	var err error
	w.once.Do(func() { err = w.f.Close() })
	<-w.done
	return err
}

// read turns the kernel's events into coalesced notices until the watch
// ends; it closes C when it does.
func (w *inotifyWatch) read() {
	defer close(w.done)
	defer close(w.c)
	// Room for many events: a burst of writes is one read.
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			// Closed (os.ErrClosed) or broken: either way the watch is over.
			return
		}
		wake, over := w.scan(buf[:n])
		if wake {
			select {
			case w.c <- struct{}{}:
			default:
			}
		}
		if over {
			return
		}
	}
}

// scan reads a buffer of inotify events: wake when one is about the log
// (its file's writes, its name's changes) or the queue overflowed (events
// were lost: look); over when the directory's watch ended (removed,
// renamed away, unmounted), after which no name event would ever come.
func (w *inotifyWatch) scan(b []byte) (wake, over bool) {
	for len(b) >= unix.SizeofInotifyEvent {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&b[0]))
		end := unix.SizeofInotifyEvent + int(ev.Len)
		if end > len(b) {
			break
		}
		name := b[unix.SizeofInotifyEvent:end]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		b = b[end:]
		wd := int(ev.Wd)
		switch {
		case ev.Mask&unix.IN_Q_OVERFLOW != 0:
			wake = true
		case wd == w.dirWD && ev.Mask&(unix.IN_IGNORED|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_UNMOUNT) != 0:
			wake, over = true, true
		case wd == w.dirWD && bytes.Equal(name, w.name):
			wake = true
			if ev.Mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 {
				w.watchFile() // a new file has the name
			}
		case wd == w.fileWD && ev.Mask&unix.IN_IGNORED != 0:
			w.fileWD = -1 // the file is gone; a new one comes by name
		case wd == w.fileWD:
			wake = true
		}
	}
	return wake, over
}
