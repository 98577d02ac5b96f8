package owrtbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// BindIn makes the host directory hostDir visible inside the running box
// at boxDir (created if missing), as a bind mount in the box's mount
// namespace. The box cannot see host paths after its pivot_root, and the
// classic mount(2) refuses a source from another mount namespace, so the
// tree is cloned detached on the host (open_tree) and attached from a
// thread that has joined the box's namespace (move_mount). The mount ends
// with the box.
func (b *Box) BindIn(hostDir, boxDir string) error {
	tree, err := unix.OpenTree(unix.AT_FDCWD, hostDir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("binding %s into the box: open_tree: %w", hostDir, err)
	}
	defer unix.Close(tree)
	ns, err := unix.Open(filepath.Join("/proc", strconv.Itoa(b.PID), "ns", "mnt"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("binding %s into the box: %w", hostDir, err)
	}
	defer unix.Close(ns)
	errc := make(chan error, 1)
	go func() {
		// The thread leaves the host's mount namespace: never unlock it,
		// so the runtime discards it instead of reusing it.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			errc <- fmt.Errorf("unshare(CLONE_FS): %w", err)
			return
		}
		if err := unix.Setns(ns, unix.CLONE_NEWNS); err != nil {
			errc <- fmt.Errorf("entering the box's mount namespace: %w", err)
			return
		}
		if err := os.MkdirAll(boxDir, 0o755); err != nil {
			errc <- err
			return
		}
		if err := unix.MoveMount(tree, "", unix.AT_FDCWD, boxDir, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			errc <- fmt.Errorf("move_mount: %w", err)
			return
		}
		errc <- nil
	}()
	if err := <-errc; err != nil {
		return fmt.Errorf("binding %s into the box at %s: %w", hostDir, boxDir, err)
	}
	return nil
}

// UnpackRoot unpacks the box's shipped root file system under dir and
// returns its path, for Options.Root: a box booted from it keeps its
// packages and configuration across Reboot, as a router's overlay does.
// The caller removes dir.
func UnpackRoot(ctx context.Context, boxDir, dir string) (string, error) {
	if _, err := os.Stat(filepath.Join(boxDir, "root", "sbin", "init")); err == nil {
		out, err := exec.CommandContext(ctx, "cp", "-a", filepath.Join(boxDir, "root"), dir).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("copying the box's root: %w: %s", err, strings.TrimSpace(string(out)))
		}
		return filepath.Join(dir, "root"), nil
	}
	out, err := exec.CommandContext(ctx, "tar", "--numeric-owner", "-xpzf", filepath.Join(boxDir, "root.tar.gz"), "-C", dir).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("unpacking the box's root: %w: %s", err, strings.TrimSpace(string(out)))
	}
	root := filepath.Join(dir, "root")
	if _, err := os.Stat(filepath.Join(root, "sbin", "init")); err != nil {
		return "", fmt.Errorf("unpacking the box's root: no root/sbin/init in root.tar.gz: %w", err)
	}
	return root, nil
}
