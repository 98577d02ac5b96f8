package lab

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"surflare-watchdog/src/lab/fakes"
)

// SharedFD is a descriptor of one process (the holder, e.g. the vendor's
// proxy) that refers to a file another process (the owner, e.g. the
// daemon) has open: E5 says the real proxy inherits every descriptor its
// parent left open, so a daemon fd that shows up here was leaked to it.
type SharedFD struct {
	HolderFD int    // descriptor number in the holder
	OwnerFD  int    // descriptor number in the owner
	Target   string // what /proc/<holder>/fd/N links to (socket:[…], a path)
	// SameFile: the kernel says both descriptors are one open file
	// (kcmp KCMP_FILE): inherited or passed, not merely the same inode
	// opened twice (a log the daemon reads and the proxy writes).
	SameFile bool
}

func (s SharedFD) String() string {
	how := "same inode"
	if s.SameFile {
		how = "same open file"
	}
	return fmt.Sprintf("fd %d = owner fd %d (%s, %s)", s.HolderFD, s.OwnerFD, s.Target, how)
}

// SharedFDs lists holder's descriptors whose file (device and inode, from
// /proc/<pid>/fd) the owner also has open, each with whether it is the
// very same open file. Anonymous inodes (epoll, eventfd, …) share one
// inode kernel-wide and are left out. A test asserting "no daemon
// descriptor but 0-2 reaches the proxy" keeps the entries with HolderFD > 2
// and SameFile.
func SharedFDs(holder, owner int) ([]SharedFD, error) {
	type key struct{ dev, ino uint64 }
	ownerFDs, err := procFDs(owner)
	if err != nil {
		return nil, err
	}
	byInode := map[key][]int{}
	for fd, path := range ownerFDs {
		if k, ok := fdInode(path); ok {
			byInode[key(k)] = append(byInode[key(k)], fd)
		}
	}
	holderFDs, err := procFDs(holder)
	if err != nil {
		return nil, err
	}
	var out []SharedFD
	for fd, path := range holderFDs {
		target, err := os.Readlink(path)
		if err != nil || strings.HasPrefix(target, "anon_inode:") {
			continue
		}
		k, ok := fdInode(path)
		if !ok {
			continue
		}
		for _, ofd := range byInode[key(k)] {
			out = append(out, SharedFD{HolderFD: fd, OwnerFD: ofd, Target: target, SameFile: sameOpenFile(holder, fd, owner, ofd)})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].HolderFD != out[j].HolderFD {
			return out[i].HolderFD < out[j].HolderFD
		}
		return out[i].OwnerFD < out[j].OwnerFD
	})
	return out, nil
}

// procFDs maps pid's descriptor numbers to their /proc paths.
func procFDs(pid int) (map[int]string, error) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("listing descriptors of pid %d: %w", pid, err)
	}
	out := map[int]string{}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil {
			out[fd] = filepath.Join(dir, e.Name())
		}
	}
	return out, nil
}

// fdInode is the device and inode a /proc/<pid>/fd/N entry refers to.
func fdInode(path string) (struct{ dev, ino uint64 }, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return struct{ dev, ino uint64 }{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return struct{ dev, ino uint64 }{}, false
	}
	return struct{ dev, ino uint64 }{uint64(st.Dev), st.Ino}, true
}

// kcmpFile is KCMP_FILE (linux/kcmp.h).
const kcmpFile = 0

// sameOpenFile asks the kernel whether pid1's fd1 and pid2's fd2 are one
// open file description.
func sameOpenFile(pid1, fd1, pid2, fd2 int) bool {
	r, _, e := unix.Syscall6(unix.SYS_KCMP, uintptr(pid1), uintptr(pid2), kcmpFile, uintptr(fd1), uintptr(fd2), 0)
	return e == 0 && r == 0
}

// ProxyPID is the pid of the fake proxy the vendor CLI last started, if
// it is still running.
func (l *Lab) ProxyPID() (int, error) {
	li, err := fakes.LoadLabInfo(l.Dir)
	if err != nil {
		return 0, err
	}
	st, err := fakes.LoadState(li)
	if err != nil {
		return 0, err
	}
	if st.ProxyPID <= 0 {
		return 0, errors.New("the vendor CLI has started no proxy")
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", st.ProxyPID))
	if err != nil || strings.TrimSpace(string(comm)) != fakes.ProxyName {
		return 0, fmt.Errorf("proxy pid %d is not running", st.ProxyPID)
	}
	return st.ProxyPID, nil
}

// ProxyHoldsFDsOf lists the descriptors of process owner (the daemon) that
// the running proxy holds (see SharedFDs).
func (l *Lab) ProxyHoldsFDsOf(owner int) ([]SharedFD, error) {
	pid, err := l.ProxyPID()
	if err != nil {
		return nil, err
	}
	return SharedFDs(pid, owner)
}
