package runfiles

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestWriteFileIsPrivateAndReplaces(t *testing.T) {
	old := syscall.Umask(0) // a permissive umask must not widen the mode
	defer syscall.Umask(old)
	dir := t.TempDir()
	p := filepath.Join(dir, StateFile)
	if err := WriteFile(p, []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(p, map[string]int{"n": 2}); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v, want 0600", st.Mode().Perm())
	}
	data, _ := os.ReadFile(p)
	if got := string(data); got != "{\n  \"n\": 2\n}\n" {
		t.Errorf("content = %q", got)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("temporary files left behind: %v", ents)
	}
}

func TestWriteFileMissingDirKeepsNothing(t *testing.T) {
	err := WriteFile(filepath.Join(t.TempDir(), "nope", "x.json"), []byte("x"))
	if err == nil || !strings.Contains(err.Error(), "x.json") {
		t.Fatalf("err = %v, want an error naming the file", err)
	}
}

func TestRemoveStale(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, StateFile), nil, 0o600)
	removed, err := RemoveStale(dir, IPCFiles...)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != StateFile {
		t.Errorf("removed = %v", removed)
	}
}

func TestLockIsExclusiveAndCloseOnExec(t *testing.T) {
	dir := t.TempDir()
	l, err := AcquireLock(dir)
	if err != nil {
		t.Fatal(err)
	}
	flags, err := unix.FcntlInt(l.Fd(), unix.F_GETFD, 0)
	if err != nil {
		t.Fatal(err)
	}
	if flags&unix.FD_CLOEXEC == 0 {
		t.Error("instance lock fd is not close-on-exec")
	}
	pid, err := ReadPID(filepath.Join(dir, PIDFile))
	if err != nil || pid != os.Getpid() {
		t.Errorf("pid file = %d, %v; want %d", pid, err, os.Getpid())
	}

	// A child (standing in for `surflare connect --daemon`) must not hold it.
	out, err := exec.Command("sh", "-c", `for f in /proc/$$/fd/*; do readlink "$f"; done; true`).Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), LockFile) {
		t.Errorf("child inherited the lock fd:\n%s", out)
	}

	_, err = AcquireLock(dir)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second lock err = %v, want ErrLocked naming our pid", err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, PIDFile)); !os.IsNotExist(err) {
		t.Error("pid file survives Release")
	}
	l2, err := AcquireLock(dir) // a leftover lock file with no holder is not "running"
	if err != nil {
		t.Fatalf("relock after release: %v", err)
	}
	l2.Release()
}

func TestReadPIDGarbled(t *testing.T) {
	p := filepath.Join(t.TempDir(), PIDFile)
	os.WriteFile(p, []byte("abc\n"), 0o600)
	if _, err := ReadPID(p); err == nil || !strings.Contains(err.Error(), `"abc"`) {
		t.Errorf("err = %v", err)
	}
}
