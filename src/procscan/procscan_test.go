package procscan

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

// startNamed runs a copy of sleep under the given executable name, the way
// the vendor proxy appears in /proc.
func startNamed(t *testing.T, name string) *exec.Cmd {
	t.Helper()
	return startNamedIn(t, name, 0)
}

// startNamedIn is startNamed in new namespaces (clone flags, e.g.
// CLONE_NEWNET).
func startNamedIn(t *testing.T, name string, cloneflags uintptr) *exec.Cmd {
	t.Helper()
	src, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("needs sleep(1)")
	}
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: cloneflags}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// testName is a process name unique to this test run: the machine may run
// real (lab) surflare-proxy processes that a test must neither find nor kill.
var testName = fmt.Sprintf("sfp-%d", os.Getpid()%1000000)

func pids(ps []Process) []int {
	var out []int
	for _, p := range ps {
		out = append(out, p.PID)
	}
	return out
}

func TestByNameFindsProxyAndIgnoresLookalikes(t *testing.T) {
	proxy := startNamed(t, testName)
	// A process that merely mentions the name in its arguments, like
	// `pgrep -f` would match, must not count.
	decoy := exec.Command("sh", "-c", "sleep 60; echo "+testName)
	if err := decoy.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { decoy.Process.Kill(); decoy.Wait() })

	ps, err := Scanner{}.ByName(testName)
	if err != nil {
		t.Fatal(err)
	}
	if got := pids(ps); !slices.Equal(got, []int{proxy.Process.Pid}) {
		t.Fatalf("ByName = %v, want only the proxy %d", got, proxy.Process.Pid)
	}
	if alive, _ := (Scanner{}).Alive(testName[:len(testName)-1]); alive {
		t.Error("a prefix of the name matched")
	}
}

func TestZombieIsNotAlive(t *testing.T) {
	proxy := startNamed(t, testName)
	proxy.Process.Signal(syscall.SIGKILL)
	// Not reaped yet: the kernel keeps a zombie with the same comm.
	deadline := time.Now().Add(5 * time.Second)
	for {
		p, err := Scanner{}.Get(proxy.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		if p.Zombie() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("process never became a zombie: state %s", p.State)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if alive, err := (Scanner{}).Alive(testName); err != nil || alive {
		t.Errorf("Alive = %v, %v; a zombie proxy must not count as alive", alive, err)
	}
}

func TestSelfNeverMatches(t *testing.T) {
	me, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if alive, _ := (Scanner{}).Alive(filepath.Base(me)); alive {
		t.Error("the scanner matched its own process")
	}
}

func TestFDsOfOwnProcess(t *testing.T) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	u, err := Scanner{}.FDs(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if u.Open < 3 || (u.Limit != int(lim.Cur) && !(u.Limit == -1 && lim.Cur == ^uint64(0))) {
		t.Errorf("FDs = %+v, want open >= 3 and limit %d", u, lim.Cur)
	}
}

func TestListenerPIDs(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	got, err := Scanner{Self: -1}.ListenerPIDs(port)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []int{os.Getpid()}) {
		t.Errorf("ListenerPIDs(%d) = %v, want [%d]", port, got, os.Getpid())
	}
	ln.Close()
	if got, _ := (Scanner{Self: -1}).ListenerPIDs(port); len(got) != 0 {
		t.Errorf("closed listener still found: %v", got)
	}
}

// E6: a port with a listener is up, the same port closed is not.
func TestListening(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if up, err := (Scanner{}).Listening(port); err != nil || !up {
		t.Errorf("Listening(%d) = %v, %v with a listener", port, up, err)
	}
	ln.Close()
	if up, err := (Scanner{}).Listening(port); err != nil || up {
		t.Errorf("Listening(%d) = %v, %v after close", port, up, err)
	}
}

// fakeProc builds a minimal procfs tree for parsing edge cases.
func fakeProc(t *testing.T, pid, stat, comm, limits string) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, pid)
	os.MkdirAll(filepath.Join(dir, "fd"), 0o755)
	os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644)
	os.WriteFile(filepath.Join(dir, "comm"), []byte(comm), 0o644)
	os.WriteFile(filepath.Join(dir, "limits"), []byte(limits), 0o644)
	os.WriteFile(filepath.Join(dir, "fd", "0"), nil, 0o644)
	return root
}

func TestParseOddCommAndLimits(t *testing.T) {
	root := fakeProc(t, "42", "42 (a) b) S 7 42 42 0\n", "a) b\n",
		"Limit                     Soft Limit           Hard Limit           Units\nMax open files            1024                 4096                 files\n")
	p, err := Scanner{Root: root}.Get(42)
	if err != nil {
		t.Fatal(err)
	}
	if p.Comm != "a) b" || p.State != "S" || p.PPID != 7 {
		t.Errorf("Get = %+v", p)
	}
	u, err := Scanner{Root: root}.FDs(42)
	if err != nil || u != (FDUsage{Open: 1, Limit: 1024}) {
		t.Errorf("FDs = %+v, %v", u, err)
	}
	bad := fakeProc(t, "43", "43 (x) S 1\n", "x\n", "Max open files  lots lots files\n")
	if _, err := (Scanner{Root: bad}).FDs(43); err == nil {
		t.Error("garbled limits accepted")
	}
	broken := fakeProc(t, "44", "garbage", "x\n", "")
	if _, err := (Scanner{Root: broken}).Get(44); err == nil {
		t.Error("garbled stat accepted")
	}
}

func TestKillStaleProxy(t *testing.T) {
	proxy := startNamed(t, testName)
	ps, _ := Scanner{}.ByName(testName)
	killed, err := Scanner{}.Kill(pids(ps)...)
	if err != nil || !slices.Equal(killed, []int{proxy.Process.Pid}) {
		t.Fatalf("Kill = %v, %v", killed, err)
	}
	err = proxy.Wait()
	if ws, ok := proxy.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Errorf("proxy ended with %v, want SIGKILL", err)
	}
	if got, _ := (Scanner{}).Kill(os.Getpid()); len(got) != 0 {
		t.Error("Kill signalled our own pid")
	}
}

// Two processes by the same name, one in a network namespace of its own
// (another lab's router): the unfiltered scan sees both, InOwnNetNS only
// the one beside us.
func TestInOwnNetNSSkipsOtherNamespaces(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: starts a process in a new network namespace")
	}
	ours := startNamed(t, testName)
	theirs := startNamedIn(t, testName, syscall.CLONE_NEWNET)
	all, err := Scanner{}.ByName(testName)
	if err != nil {
		t.Fatal(err)
	}
	want := []int{ours.Process.Pid, theirs.Process.Pid}
	slices.Sort(want)
	if got := pids(all); !slices.Equal(got, want) {
		t.Fatalf("unfiltered ByName = %v, want both %v", got, want)
	}
	s := Scanner{}.InOwnNetNS()
	if s.NetNS == "" {
		t.Fatal("InOwnNetNS found no namespace in /proc/self/ns/net")
	}
	mine, err := s.ByName(testName)
	if err != nil {
		t.Fatal(err)
	}
	if got := pids(mine); !slices.Equal(got, []int{ours.Process.Pid}) {
		t.Errorf("InOwnNetNS ByName = %v, want only %d", got, ours.Process.Pid)
	}
	theirs.Process.Kill()
	theirs.Wait()
	if alive, _ := s.Alive(testName); !alive {
		t.Error("our own process is not alive to the filtered scanner")
	}
}
