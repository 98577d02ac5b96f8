// Package runfiles writes the daemon's state and IPC files under the run
// directory (/run on the router) and holds the single-instance lock.
//
// Every file is written atomically (temporary file in the same directory,
// fsync, rename) with mode 0600, so a reader such as LuCI or the CLI never sees
// a half-written JSON document and no other local user can read node health
// or account state. The instance lock is an flock on a file opened with
// O_CLOEXEC: the vendor daemon started by `surflare connect --daemon` outlives
// us and must never inherit the lock descriptor, or a restarted watchdog would
// find its own lock held by the VPN proxy.
package runfiles

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// FileMode is the permission of every file this package writes: state files
// carry account and network details that only root should read.
const FileMode fs.FileMode = 0o600

// File names under the run directory, from SURFLARE-CONTRACT.md.
const (
	PIDFile          = "surflare_watchdog.pid"
	LockFile         = "surflare_watchdog.lock"
	StateFile        = "surflare_watchdog_state.json"
	NodeHealthFile   = "surflare_node_health.json"
	ProbeResultsFile = "surflare_probe_results.json"
	Storm503File     = "surflare_503_state"
	// HandoverFile asks the daemon's next SIGTERM to leave the tunnel to
	// the next instance (a restart, not a stop); init scripts write it.
	HandoverFile = "surflare_watchdog.handover"
)

// IPCFiles are the files a crashed daemon may leave behind that describe a
// world that no longer exists; crash cleanup removes them before startup.
var IPCFiles = []string{StateFile, ProbeResultsFile, Storm503File}

// WriteFile replaces path atomically with data, mode 0600. The directory must
// exist. On any error the previous content of path is left untouched.
func WriteFile(path string, data []byte) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmpName := tmp.Name()
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmpName)
		}
	}()
	if err := tmp.Chmod(FileMode); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmpName, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	ok = true
	return nil
}

// WriteJSON marshals v (indented, trailing newline) and writes it atomically.
func WriteJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding %s: %w", path, err)
	}
	return WriteFile(path, append(data, '\n'))
}

// RemoveStale deletes the named files under dir; missing files are fine.
// It returns the names it actually removed, for the crash-cleanup log.
func RemoveStale(dir string, names ...string) ([]string, error) {
	var removed []string
	var errs []error
	for _, n := range names {
		err := os.Remove(filepath.Join(dir, n))
		switch {
		case err == nil:
			removed = append(removed, n)
		case errors.Is(err, fs.ErrNotExist):
		default:
			errs = append(errs, err)
		}
	}
	return removed, errors.Join(errs...)
}

// ErrLocked reports that another live daemon holds the instance lock.
var ErrLocked = errors.New("another surflare-watchdog is running")

// Lock is the held single-instance lock.
type Lock struct {
	f       *os.File
	pidPath string
}

// AcquireLock takes an exclusive, non-blocking flock on dir/LockFile and
// writes our pid to dir/PIDFile. A lock file left by a crashed daemon is not
// a problem: the kernel drops an flock when its holder dies, so only a live
// holder makes this fail, with an error wrapping ErrLocked that names its pid.
func AcquireLock(dir string) (*Lock, error) {
	lockPath := filepath.Join(dir, LockFile)
	// O_CLOEXEC: the descriptor must not survive exec into the vendor CLI and
	// from there into the long-lived proxy daemon.
	fd, err := unix.Open(lockPath, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, uint32(FileMode))
	if err != nil {
		return nil, fmt.Errorf("opening instance lock %s: %w", lockPath, err)
	}
	f := os.NewFile(uintptr(fd), lockPath)
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			pid, _ := ReadPID(filepath.Join(dir, PIDFile))
			if pid > 0 {
				return nil, fmt.Errorf("%w (pid %d holds %s)", ErrLocked, pid, lockPath)
			}
			return nil, fmt.Errorf("%w (%s is held)", ErrLocked, lockPath)
		}
		return nil, fmt.Errorf("locking %s: %w", lockPath, err)
	}
	l := &Lock{f: f, pidPath: filepath.Join(dir, PIDFile)}
	if err := WriteFile(l.pidPath, []byte(strconv.Itoa(os.Getpid())+"\n")); err != nil {
		f.Close()
		return nil, fmt.Errorf("writing pid file: %w", err)
	}
	return l, nil
}

// Fd is the lock's descriptor, exposed so tests can prove it is close-on-exec.
func (l *Lock) Fd() uintptr { return l.f.Fd() }

// Release removes the pid file and drops the lock. It is the last step of a
// clean stop.
func (l *Lock) Release() error {
	err := os.Remove(l.pidPath)
	if errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	return errors.Join(err, l.f.Close())
}

// ReadPID reads a pid file; 0 and an error when it is missing or garbled.
func ReadPID(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("pid file %s: %q is not a pid", path, strings.TrimSpace(string(data)))
	}
	return pid, nil
}
