package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// netnsDir is where named namespaces are bind-mounted, the same place
// `ip netns` uses, so `ip netns exec` and the lab see the same names.
const netnsDir = "/run/netns"

// inNS runs fn on a fresh OS thread that has joined ns. The thread is never
// unlocked, so the Go runtime throws it away when fn returns instead of
// reusing a thread that sits in a foreign namespace.
func inNS(ns netns.NsHandle, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread: the thread dies with this goroutine.
		if err := netns.Set(ns); err != nil {
			errc <- fmt.Errorf("entering namespace: %w", err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// createNamed makes the named network namespaces (in order) and returns
// handles to them. On error, the ones already made are removed.
func createNamed(names []string) ([]netns.NsHandle, error) {
	handles := make([]netns.NsHandle, 0, len(names))
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// netns.NewNamed unshares the calling thread; it is never unlocked,
		// so the runtime discards it afterwards.
		for _, n := range names {
			h, err := netns.NewNamed(n)
			if err != nil {
				errc <- fmt.Errorf("creating namespace %s: %w", n, err)
				return
			}
			handles = append(handles, h)
		}
		errc <- nil
	}()
	if err := <-errc; err != nil {
		for i, h := range handles {
			h.Close()
			_ = deleteNamed(names[i])
		}
		return nil, err
	}
	return handles, nil
}

// deleteNamed unmounts and removes a named namespace; missing is fine.
func deleteNamed(name string) error {
	p := filepath.Join(netnsDir, name)
	if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmounting %s: %w", p, err)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing %s: %w", p, err)
	}
	return nil
}

// listNamed returns the named namespaces whose name starts with prefix.
func listNamed(prefix string) []string {
	ents, _ := os.ReadDir(netnsDir)
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// nsInode identifies a namespace file (bind mount or /proc link) by inode.
func nsInode(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// killInNamespaces SIGKILLs every process whose network namespace is one of
// the given named namespaces. Vendor-style daemons detach into their own
// session, so killing our own process groups is not enough; and a process
// still inside a namespace keeps it alive. It waits (bounded) until they are
// gone so the namespaces can then be deleted.
func killInNamespaces(names []string) {
	inodes := map[uint64]bool{}
	for _, n := range names {
		if ino, err := nsInode(filepath.Join(netnsDir, n)); err == nil {
			inodes[ino] = true
		}
	}
	if len(inodes) == 0 {
		return
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		pids := pidsIn(inodes)
		if len(pids) == 0 || time.Now().After(deadline) {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pidsIn lists processes (not ourselves) whose netns inode is in inodes.
func pidsIn(inodes map[uint64]bool) []int {
	ents, _ := os.ReadDir("/proc")
	self := os.Getpid()
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		ino, err := nsInode("/proc/" + e.Name() + "/ns/net")
		if err != nil || !inodes[ino] {
			continue
		}
		out = append(out, pid)
	}
	return out
}

// sysctl writes a /proc/sys/net value inside ns (net sysctls are per
// namespace and resolved from the writing thread's namespace).
func sysctl(ns netns.NsHandle, kv map[string]string) error {
	return inNS(ns, func() error {
		for k, v := range kv {
			p := "/proc/sys/" + strings.ReplaceAll(k, ".", "/")
			if strings.HasPrefix(k, "net.bridge.") {
				// Only present when br_netfilter is; absent is what we want.
				if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
					continue
				}
			}
			if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
				return fmt.Errorf("sysctl %s=%s: %w", k, v, err)
			}
		}
		return nil
	})
}

// dialIn opens a TCP connection from inside ns. Only the socket's creation
// and connect need the namespace; the returned conn is used from anywhere.
func dialIn(ctx context.Context, ns netns.NsHandle, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := inNS(ns, func() error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// listenIn opens a TCP listener inside ns.
func listenIn(ns netns.NsHandle, network, addr string) (net.Listener, error) {
	var l net.Listener
	err := inNS(ns, func() error {
		var err error
		l, err = net.Listen(network, addr)
		return err
	})
	return l, err
}
