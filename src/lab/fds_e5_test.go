package lab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"surflare-watchdog/src/lab/fakes"
)

// E5: the real proxy inherits every descriptor its parent left open. The
// daemon is started the way a leaky parent would start it: with a planted
// file as fd 3, open and not close-on-exec (procd, a shell or a supervisor
// can leave such descriptors). Neither the `surflare` CLI nor the proxy it
// forks may end up with it, or with any other daemon descriptor above 2:
// after the first connect, after a reload that reconnects, and after a
// rotation. The fakes inherit descriptors as the real client does
// (inherit_fds=1); the CLI records what it was started with
// (fakes.CLICallsFile) and the proxy is compared with kcmp (SharedFDs).
func TestNoDaemonDescriptorReachesVendor(t *testing.T) {
	l := upFull(t, Options{Clients: 1, Vendor: []string{"inherit_fds=1"}})
	planted, err := os.Create(filepath.Join(t.TempDir(), "planted-by-the-parent"))
	if err != nil {
		t.Fatal(err)
	}
	defer planted.Close()
	var pst syscall.Stat_t
	if err := syscall.Fstat(int(planted.Fd()), &pst); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", tail(l.DaemonLog(), 60))
		}
		if l.DaemonRunning() {
			l.StopDaemon(context.Background())
		}
	})
	sets := append([]string(nil), e2eSets...)
	pid, err := l.startDaemon(ctx, nil, []*os.File{planted}, sets)
	if err != nil {
		t.Fatal(err)
	}
	// The planted file is really the daemon's fd 3: else the test proves nothing.
	if target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/3", pid)); err != nil || target != planted.Name() {
		t.Fatalf("daemon fd 3 = %q (%v), want the planted %s", target, err, planted.Name())
	}

	seenCalls := 0
	lastProxy := 0
	check := func(when string) {
		t.Helper()
		proxy, err := l.ProxyPID()
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if proxy == lastProxy {
			t.Fatalf("%s: still the proxy of before (pid %d): no new vendor process was checked", when, proxy)
		}
		lastProxy = proxy
		shared, err := SharedFDs(proxy, pid)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		for _, s := range shared {
			if s.HolderFD > 2 && s.SameFile {
				t.Errorf("%s: the proxy (pid %d) holds a daemon descriptor: %s", when, proxy, s)
			}
		}
		if held, _ := holdsInode(proxy, pst.Dev, pst.Ino); held >= 0 {
			t.Errorf("%s: the proxy (pid %d) holds the planted file as fd %d", when, proxy, held)
		}
		calls, err := fakes.LoadCLICalls(l.Dir)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if len(calls) <= seenCalls {
			t.Fatalf("%s: the vendor CLI was not called (%d calls in all)", when, len(calls))
		}
		connects := 0
		for _, c := range calls[seenCalls:] {
			if c.Cmd == "connect" {
				connects++
			}
			for _, fd := range c.Inherited {
				t.Errorf("%s: `surflare %s` (pid %d) was started holding fd %d = %s", when, c.Cmd, c.PID, fd.FD, fd.Target)
			}
		}
		if connects == 0 {
			t.Errorf("%s: no `surflare connect` among the %d calls checked", when, len(calls)-seenCalls)
		}
		t.Logf("%s: proxy pid %d, %d CLI calls checked (%d connects), none inherited a descriptor", when, proxy, len(calls)-seenCalls, connects)
		seenCalls = len(calls)
	}

	if _, err := l.WaitDaemon(ctx, 30*time.Second, func(s DaemonState) bool { return s.Healthy() && s.Node == "Dallas" }); err != nil {
		t.Fatal(err)
	}
	check("after the first connect")

	// A reload that changes the mode reconnects: a new CLI, a new proxy.
	if err := WriteDaemonConfig(l, append(sets, "surflare.main.mode=global")); err != nil {
		t.Fatal(err)
	}
	if err := l.SignalDaemon(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if _, err := l.WaitDaemon(ctx, 30*time.Second, func(s DaemonState) bool { return s.Healthy() && s.Mode == "global" && newProxy(l, lastProxy) }); err != nil {
		t.Fatal(err)
	}
	check("after a reload (SIGHUP, mode changed)")

	if code, out, errOut := watchdogCLI(ctx, l, "rotate", "Chicago"); code != 0 {
		t.Fatalf("rotate Chicago: exit %d\n%s%s", code, out, errOut)
	}
	if _, err := l.WaitDaemon(ctx, 30*time.Second, func(s DaemonState) bool { return s.Healthy() && s.Node == "Chicago" && newProxy(l, lastProxy) }); err != nil {
		t.Fatal(err)
	}
	check("after a rotation to Chicago")
}

// newProxy reports whether a proxy other than old is running.
func newProxy(l *Lab, old int) bool {
	p, err := l.ProxyPID()
	return err == nil && p != old
}

// holdsInode is the first descriptor of pid open on (dev, ino), -1 if none.
func holdsInode(pid int, dev, ino uint64) (int, error) {
	fds, err := procFDs(pid)
	if err != nil {
		return -1, err
	}
	for fd, path := range fds {
		if k, ok := fdInode(path); ok && k.dev == dev && k.ino == ino {
			return fd, nil
		}
	}
	return -1, nil
}
