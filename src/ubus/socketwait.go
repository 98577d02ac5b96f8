package ubus

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// DefaultSocketSafety is how long a Service whose reconnect backoff has
// reached its cap waits for ubusd's socket to be created before it dials
// anyway (waitSocket). ubusd creates its socket when it starts, so the
// wait normally ends with that; the safety dial covers what inotify cannot
// see (the directory replaced, a socket that was there all along but
// refused). Where there is no ubusd at all (a laptop, the lab), an attempt
// every 8 s was 450 wake-ups an hour of the idle daemon for nothing
// (issue 19).
const DefaultSocketSafety = time.Minute

// waitSocket waits until a file named like path is created or moved into
// its directory (inotify), or safety has passed, or ctx ends (its error).
// Without inotify, or when the directory cannot be watched, it waits
// fallback instead, as the backoff did.
func waitSocket(ctx context.Context, path string, fallback, safety time.Duration) error {
	dir, name := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return sleepCtx(ctx, fallback)
	}
	f := os.NewFile(uintptr(fd), "inotify:"+dir) // closes fd
	defer f.Close()
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF); err != nil {
		return sleepCtx(ctx, fallback)
	}
	// The socket may have come back between the failed dial and the watch.
	if fi, err := os.Stat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		return ctx.Err()
	}
	deadline := time.Now().Add(safety)
	f.SetReadDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { f.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	buf := make([]byte, 4096)
	for {
		n, err := f.Read(buf)
		if err != nil {
			return ctx.Err() // the safety deadline (nil: dial now) or ctx
		}
		if created(buf[:n], name) {
			return ctx.Err()
		}
	}
}

// created reports whether the inotify events in b name name, or say the
// directory itself went away (then only a dial tells).
func created(b []byte, name string) bool {
	for len(b) >= unix.SizeofInotifyEvent {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&b[0]))
		end := unix.SizeofInotifyEvent + int(ev.Len)
		if end > len(b) {
			return true // truncated: cannot tell, dial
		}
		if ev.Mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_Q_OVERFLOW|unix.IN_IGNORED) != 0 {
			return true
		}
		if string(bytes.TrimRight(b[unix.SizeofInotifyEvent:end], "\x00")) == name {
			return true
		}
		b = b[end:]
	}
	return false
}
