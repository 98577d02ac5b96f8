package keepalive

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// mountinfoPath is where the kernel lists this process's mounts.
const mountinfoPath = "/proc/self/mountinfo"

// procsFile moves a whole process (all its threads) when its PID is written
// there, and lists the processes a cgroup holds.
const procsFile = "cgroup.procs"

// cgroup2Mount returns where the cgroup2 hierarchy is mounted, reading a
// mountinfo file: /sys/fs/cgroup on OpenWrt and unified-hierarchy systems,
// /sys/fs/cgroup/unified on hybrid ones (Debian with systemd's hybrid mode).
func cgroup2Mount(mountinfo string) (string, error) {
	f, err := os.Open(mountinfo)
	if err != nil {
		return "", fmt.Errorf("listing mounts: %w", err)
	}
	defer f.Close()
	return parseCgroup2Mount(f)
}

// parseCgroup2Mount finds the first cgroup2 mount point in mountinfo text:
// "36 25 0:31 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw".
func parseCgroup2Mount(r io.Reader) (string, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		fields, fs := strings.Fields(pre), strings.Fields(post)
		if len(fields) >= 5 && len(fs) >= 1 && fs[0] == "cgroup2" {
			return unescapeMountPath(fields[4]), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("listing mounts: %w", err)
	}
	return "", errors.New("cgroup2 is not mounted (mount -t cgroup2 none /sys/fs/cgroup)")
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// isCgroup2 reports whether dir is on a cgroup2 file system.
func isCgroup2(dir string) (bool, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return false, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return st.Type == unix.CGROUP2_SUPER_MAGIC, nil
}

// checkCgroupParent makes sure path would be a cgroup2 group before anything
// is created there: a mkdir on an ordinary directory would succeed and
// leave a stray directory behind.
func checkCgroupParent(path string) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("cgroup path %q is not absolute", path)
	}
	parent := filepath.Dir(filepath.Clean(path))
	ok, err := isCgroup2(parent)
	if err != nil {
		return err
	}
	if ok {
		return nil
	}
	hint := ""
	if mnt, err := cgroup2Mount(mountinfoPath); err == nil {
		hint = fmt.Sprintf(" (cgroup2 is mounted at %s)", mnt)
	} else {
		hint = " (" + err.Error() + ")"
	}
	return fmt.Errorf("%s is not on a cgroup2 mount%s", parent, hint)
}

// cgroupProcs lists the PIDs in a cgroup.
func cgroupProcs(path string) ([]int, error) {
	b, err := os.ReadFile(filepath.Join(path, procsFile))
	if err != nil {
		return nil, fmt.Errorf("listing processes of %s: %w", path, err)
	}
	var pids []int
	for _, s := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(s); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// movePID writes pid into the cgroup at path.
func movePID(path string, pid int) error {
	// The error wraps unix.ESRCH when the process is gone.
	if err := os.WriteFile(filepath.Join(path, procsFile), []byte(strconv.Itoa(pid)), 0); err != nil {
		return fmt.Errorf("moving pid %d into %s: %w", pid, path, err)
	}
	return nil
}

// ownCgroup returns the cgroup2 directory this process runs in: where the
// proxy came from (the watchdog launched it), so where it goes back to when
// the clamp's group is removed.
func ownCgroup() (string, error) {
	mnt, err := cgroup2Mount(mountinfoPath)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", fmt.Errorf("reading own cgroup: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rel, ok := strings.CutPrefix(line, "0::"); ok {
			return filepath.Join(mnt, rel), nil
		}
	}
	return "", errors.New("reading own cgroup: no cgroup2 entry in /proc/self/cgroup")
}

// removeCgroup empties the cgroup at path, moving what it still holds back
// to this process's own cgroup, and removes it. A missing group is success.
func removeCgroup(path string) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	pids, err := cgroupProcs(path)
	if err != nil {
		return err
	}
	if len(pids) > 0 {
		home, err := ownCgroup()
		if err != nil {
			return fmt.Errorf("emptying %s: %w", path, err)
		}
		if filepath.Clean(home) == filepath.Clean(path) {
			return fmt.Errorf("emptying %s: the watchdog itself runs in it", path)
		}
		for _, pid := range pids {
			if err := movePID(home, pid); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("emptying %s: %w", path, err)
			}
		}
	}
	if err := unix.Rmdir(path); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("removing cgroup %s: %w", path, err)
	}
	return nil
}

// InstanceCgroup is the proxy's group for one of several watchdog instances
// on a host (labs, tests): DefaultCgroupName-<digest of instance> under the
// cgroup2 mount this process sees, where instance is the instance's run
// dir. Instances never share or remove each other's group, and whoever
// made an instance (the lab) finds its group again from the same name. It
// fails when no cgroup2 mount is visible.
func InstanceCgroup(instance string) (string, error) {
	mnt, err := cgroup2Mount(mountinfoPath)
	if err != nil {
		return "", err
	}
	return filepath.Join(mnt, DefaultCgroupName+"-"+shortDigest(instance)), nil
}

// shortDigest is a short, stable, path-safe digest of s (32-bit FNV-1a).
func shortDigest(s string) string {
	var h uint32 = 2166136261
	for i := 0; i < len(s); i++ {
		h = (h ^ uint32(s[i])) * 16777619
	}
	return fmt.Sprintf("%08x", h)
}
