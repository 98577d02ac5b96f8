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
		// so the runtime discards it afterwards. Each namespace is made
		// from the scratch one: made from the one before, it would get
		// that one's child table size, the host's.
		scratch := routerSizedTCPHash()
		defer scratch.Close()
		for _, n := range names {
			if scratch.IsOpen() {
				if err := netns.Set(scratch); err != nil {
					errc <- fmt.Errorf("creating namespace %s: back to the scratch namespace: %w", n, err)
					return
				}
			}
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

// RouterTCPHashEntries is the size of the TCP socket hash table each lab
// namespace gets: what a 128 MB router boots with ("TCP established hash
// table entries: 1024"). Without it every namespace shares the host's
// table (262144 buckets on this VM), and each socket dump the daemon does
// (the early detector's, every 3 s) walks all of it: 2.58 ms per dump
// against 0.041 ms with 1024 buckets, a cost no router pays, and most of the
// idle daemon's CPU in the bench.
const RouterTCPHashEntries = 1024

// routerSizedTCPHash moves the calling (locked) thread into a scratch
// namespace whose tcp_child_ehash_entries is RouterTCPHashEntries, so the
// namespaces made from it get tables of their own of that size, and
// returns a handle to it (closed: none could be made). The sysctl is per
// namespace (Linux 5.19+); on an older kernel, or if it fails, the
// namespaces share the host's table as before.
func routerSizedTCPHash() netns.NsHandle {
	h, err := netns.New()
	if err != nil {
		return netns.None()
	}
	_ = os.WriteFile("/proc/sys/net/ipv4/tcp_child_ehash_entries", []byte(fmt.Sprint(RouterTCPHashEntries)), 0o644)
	return h
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
			killReap(pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// BecomeSubreaper makes this process the reaper of its orphaned
// descendants (prctl PR_SET_CHILD_SUBREAPER). Vendor-style daemons detach
// from their parent; without this they are reparented to PID 1, which in a
// container may never reap them, leaving zombies after the lab kills them.
func BecomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// killReap SIGKILLs pid and, if it is our child (directly or as subreaper),
// reaps it so no zombie is left. Non-children are left to their parent.
func killReap(pid int) {
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for range 50 {
		wpid, err := unix.Wait4(pid, nil, unix.WNOHANG, nil)
		if wpid == pid || err != nil { // reaped, or not our child (ECHILD)
			return
		}
		time.Sleep(2 * time.Millisecond)
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

// reapAdopted reaps, until ctx ends, zombie children that detached into a
// session of their own (the fake proxy, started by `surflare connect
// --daemon`) and were adopted by this subreaper when their parent exited.
// Children we started ourselves stay in our session and are left to their
// exec.Cmd's Wait.
func reapAdopted(ctx context.Context) {
	self := os.Getpid()
	ownSID, _ := unix.Getsid(0)
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
			if err != nil {
				continue
			}
			s := string(b)
			i := strings.LastIndexByte(s, ')')
			if i < 0 {
				continue
			}
			f := strings.Fields(s[i+1:]) // state ppid pgrp session …
			if len(f) < 4 || f[0] != "Z" || f[1] != strconv.Itoa(self) || f[3] == strconv.Itoa(ownSID) {
				continue
			}
			_, _ = unix.Wait4(pid, nil, unix.WNOHANG, nil)
		}
	}
}
