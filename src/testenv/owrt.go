package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// OpenWrtDir returns ../shared/owrt beside the repository root (the
// bootable OpenWrt userland: root.tar.gz, boot.sh, enter.sh, shutdown.sh),
// or "" when it is absent.
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

// OpenWrtRoot unpacks the OpenWrt root filesystem into a fresh temporary
// directory that the test may change at will (a chroot into it runs the
// real apk, opkg and uci), and returns its path; the directory goes when
// the test ends. It skips the test, saying why, when the userland is not
// beside the repository or the test is not root (chroot and the root's
// ownership need it).
func OpenWrtRoot(t testing.TB) string {
	t.Helper()
	dir := OpenWrtDir()
	if dir == "" {
		t.Skip("OpenWrt userland not found (want ../shared/owrt/root.tar.gz beside the repository root)")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: chroot into the OpenWrt root")
	}
	tmp := t.TempDir()
	out, err := exec.Command("tar", "--numeric-owner", "-xpzf", filepath.Join(dir, "root.tar.gz"), "-C", tmp).CombinedOutput()
	if err != nil {
		t.Fatalf("unpacking the OpenWrt root: %v\n%s", err, out)
	}
	root := filepath.Join(tmp, "root")
	if _, err := os.Stat(filepath.Join(root, "bin", "sh")); err != nil {
		t.Fatalf("unpacked OpenWrt root has no /bin/sh: %v", err)
	}
	return root
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
