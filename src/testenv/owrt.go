package testenv

import (
	"crypto/rand"
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
// chroot (`chroot ROOT /sbin/uci ...`, the real apk, opkg and ubusd). Each test gets its own copy, so a
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
	// Owners and modes as packed: apk and opkg check them.
	out, err := exec.Command("tar", "--numeric-owner", "-xpzf", filepath.Join(dir, "root.tar.gz"), "-C", tmp).CombinedOutput()
	if err != nil {
		t.Fatalf("unpacking the OpenWrt root: %v\n%s", err, out)
	}
	root := filepath.Join(tmp, "root")
	for _, p := range []string{"bin/sh", "sbin/uci"} {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Fatalf("unpacked OpenWrt root has no /%s: %v", p, err)
		}
	}
	// The archive's /dev is empty (the box mounts its own); ubusd reads
	// its object ids from /dev/urandom, and shell tools want /dev/null.
	// Where device nodes cannot be made (no CAP_MKNOD), plain files stand
	// in: reading a megabyte of random bytes serves a test's few ids.
	for _, d := range []struct {
		name         string
		major, minor uint32
		fill         func([]byte)
	}{{"null", 1, 3, nil}, {"zero", 1, 5, func([]byte) {}}, {"random", 1, 8, randFill}, {"urandom", 1, 9, randFill}} {
		path := filepath.Join(root, "dev", d.name)
		err := syscall.Mknod(path, syscall.S_IFCHR|0o666, int(unix.Mkdev(d.major, d.minor)))
		if err == nil || os.IsExist(err) {
			continue
		}
		var data []byte
		if d.fill != nil {
			data = make([]byte, 1<<20)
			d.fill(data)
		}
		if werr := os.WriteFile(path, data, 0o666); werr != nil {
			t.Fatalf("making %s in the OpenWrt root: %v (and as a file: %v)", path, err, werr)
		}
	}
	return root
}

func randFill(b []byte) {
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
}

// Chroot runs name with args inside root, as the OpenWrt tools are run
// from the host, with env added to a minimal environment; it returns the
// combined output and the exit status (-1 when it could not run).
func Chroot(root string, env []string, name string, args ...string) (string, int) {
	cmd := exec.Command("chroot", append([]string{root, name}, args...)...)
	cmd.Env = append([]string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		}
		return string(out) + err.Error(), -1
	}
	return string(out), 0
}
