package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// logFile appends sing-box style lines to the proxy log. Before each write
// it checks that the path still names the open file and reopens it when the
// file was rotated away or deleted; truncation needs nothing because the
// file is opened O_APPEND.
type logFile struct {
	path string
	now  func() time.Time

	mu sync.Mutex
	f  *os.File
}

func openLog(path string, now func() time.Time) (*logFile, error) {
	l := &logFile{path: path, now: now}
	if err := l.reopenLocked(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *logFile) reopenLocked() error {
	if err := os.MkdirAll(filepath.Dir(l.path), 0o755); err != nil {
		return fmt.Errorf("creating log dir: %w", err)
	}
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("opening proxy log: %w", err)
	}
	if l.f != nil {
		l.f.Close()
	}
	l.f = f
	return nil
}

// write appends one complete line (newline added) with a single write(2),
// so readers never see half a line from us.
func (l *logFile) write(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	onDisk, err := os.Stat(l.path)
	open, ferr := l.f.Stat()
	if err != nil || ferr != nil || !os.SameFile(onDisk, open) {
		if err := l.reopenLocked(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return
		}
	}
	l.f.WriteString(line + "\n")
}

// timePrefix is sing-box's "+0000 2026-11-29 14:03:11" line start.
func timePrefix(t time.Time) string { return t.Format("-0700 2006-01-02 15:04:05") }

// Info logs a plain INFO line.
func (l *logFile) Info(msg string) { l.write(timePrefix(l.now()) + " INFO " + msg) }

// Error logs an ERROR line about one connection or test, sing-box style:
//
//	+0000 2026-11-29 14:03:11 ERROR [1820334452 2.1s] outbound/urltest[Dallas via Tokyo]: <err>
func (l *logFile) Error(id uint32, elapsed time.Duration, msg string) {
	l.write(FormatError(l.now(), id, elapsed, msg))
}

// FormatError renders an ERROR line in the contract's format.
func FormatError(t time.Time, id uint32, elapsed time.Duration, msg string) string {
	return timePrefix(t) + " ERROR [" + strconv.FormatUint(uint64(id), 10) + " " +
		strconv.FormatFloat(elapsed.Seconds(), 'f', 1, 64) + "s] " + msg
}
