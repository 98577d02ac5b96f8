package surflare

import (
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// A descriptor the daemon was handed without close-on-exec (as procd or a
// shell may leave one) is close-on-exec after the startup step, so no
// vendor child can inherit it (E5); it stays open for the daemon.
func TestCloseInheritedOnExec(t *testing.T) {
	fd, err := syscall.Open(filepath.Join(t.TempDir(), "inherited"), syscall.O_CREAT|syscall.O_RDWR, 0o600) // no O_CLOEXEC
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if flags, _ := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); flags&unix.FD_CLOEXEC != 0 {
		t.Fatal("the test descriptor is close-on-exec already: the test would prove nothing")
	}
	CloseInheritedOnExec()
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	if err != nil {
		t.Fatalf("descriptor closed instead of marked: %v", err)
	}
	if flags&unix.FD_CLOEXEC == 0 {
		t.Error("the inherited descriptor is still passed to children")
	}
}
