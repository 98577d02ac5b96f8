package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// OpenWrtDir returns ../shared/owrt beside the repository root (the
// OpenWrt userland the real uci, ubusd and rpcd come from), or "" when it
// or its root.tar.gz is absent.
func OpenWrtDir() string {
	root := Root()
	if root == "" {
		return ""
	}
	dir := filepath.Join(root, "..", "shared", "owrt")
	if _, err := os.Stat(filepath.Join(dir, "root.tar.gz")); err != nil {
		return ""
	}
	return dir
}

// OpenWrtRoot unpacks the OpenWrt root filesystem into a temporary
// directory of the test and returns it, for running the real tools with
// chroot (`chroot ROOT /sbin/uci ...`). Each test gets its own copy, so a
// tool may write into it (its /tmp, /etc/config) without touching another
// test's; it goes when the test ends. It skips, saying why, when the
// userland is not beside the repository or the test is not root (chroot
// needs it).
func OpenWrtRoot(t testing.TB) string {
	t.Helper()
	dir := OpenWrtDir()
	if dir == "" {
		t.Skip("OpenWrt userland not found (want ../shared/owrt/root.tar.gz beside the repository root)")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: the OpenWrt tools run through chroot")
	}
	tmp := t.TempDir()
	// The archive holds one top directory, root/.
	out, err := exec.Command("tar", "-xzf", filepath.Join(dir, "root.tar.gz"), "-C", tmp).CombinedOutput()
	if err != nil {
		t.Fatalf("unpacking the OpenWrt root: %v\n%s", err, out)
	}
	root := filepath.Join(tmp, "root")
	if _, err := os.Stat(filepath.Join(root, "sbin", "uci")); err != nil {
		t.Fatalf("unpacked OpenWrt root has no /sbin/uci: %v", err)
	}
	// The archive's /dev is empty (the box mounts its own); ubusd reads
	// /dev/urandom at start, and shell tools want /dev/null.
	for _, d := range []struct {
		name         string
		major, minor uint32
	}{{"null", 1, 3}, {"zero", 1, 5}, {"random", 1, 8}, {"urandom", 1, 9}} {
		path := filepath.Join(root, "dev", d.name)
		if err := syscall.Mknod(path, syscall.S_IFCHR|0o666, int(unix.Mkdev(d.major, d.minor))); err != nil && !os.IsExist(err) {
			t.Fatalf("making %s in the OpenWrt root: %v", path, err)
		}
	}
	return root
}
