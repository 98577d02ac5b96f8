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

// Inotify watches path's directory with inotify(7) for events on path's
// name: IN_MODIFY (writes and truncations), IN_CREATE, IN_MOVED_TO,
// IN_MOVED_FROM, IN_DELETE, IN_ATTRIB; and for the
// directory itself going away. The directory, not the file, is watched,
// so a file that does not exist yet, or one that replaced a rotated file,
// is announced too. Events about other names in the directory are ignored
// (the vendor's other logs may be busy), which is why the Monitor polls
// whenever its open file is not the regular file path names (a rotated
// file still being written, a symlink): only then can the log change with
// no event for its name. It is Options.Watch in the daemon.
//
// A static, cgo-free binary can use it: the calls are golang.org/x/sys's,
// and the descriptor is read through Go's netpoller (non-blocking, no
// thread parked on it). An error (no inotify, out of instances or watches,
// no directory yet) leaves the Monitor polling, as before.
func Inotify(path string) (Changes, error) {
	dir, base := filepath.Split(filepath.Clean(path))
	if dir == "" {
		dir = "."
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify on %s: %w", dir, err)
	}
	const mask = unix.IN_MODIFY | unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_MOVED_FROM |
		unix.IN_DELETE | unix.IN_ATTRIB |
		unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR
	if _, err := unix.InotifyAddWatch(fd, dir, mask); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("inotify on %s: %w", dir, err)
	}
	// A non-blocking descriptor handed to os.NewFile is read through the
	// netpoller, and Close wakes a pending Read.
	f := os.NewFile(uintptr(fd), "inotify:"+dir)
	w := &inotifyWatch{f: f, name: []byte(base), c: make(chan struct{}, 1), done: make(chan struct{})}
	go w.read()
	return w, nil
}

type inotifyWatch struct {
	f    *os.File
	name []byte
	c    chan struct{}
	done chan struct{} // closed when read returns

	once sync.Once
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

// scan reads a buffer of inotify events: wake when one is about the log's
// name or the queue overflowed (events were lost: look); over when the
// directory's watch ended (removed, renamed away, unmounted), after which
// no event would ever come.
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
		switch {
		case ev.Mask&unix.IN_Q_OVERFLOW != 0:
			wake = true
		case ev.Mask&(unix.IN_IGNORED|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_UNMOUNT) != 0:
			wake, over = true, true
		case bytes.Equal(name, w.name):
			wake = true
		}
	}
	return wake, over
}
