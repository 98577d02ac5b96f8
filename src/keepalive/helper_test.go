package keepalive

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The root tests need processes of their own: a cgroup holds processes, not
// goroutines. The test binary re-executes itself with helperEnv set and runs
// one of the helper modes below instead of the tests.
const (
	helperEnv       = "KEEPALIVE_TEST_HELPER"
	helperCgroupEnv = "KEEPALIVE_TEST_CGROUP" // crash mode: where to attach
	helperPIDEnv    = "KEEPALIVE_TEST_PID"    // crash mode: what to move there
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		if err := runHelper(mode); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runHelper(mode string) error {
	switch mode {
	case "sockets":
		return helperSockets()
	case "sleep": // stand-in for the proxy: wait until stdin closes
		_, err := io.Copy(io.Discard, os.Stdin)
		return err
	case "crash": // a watchdog that attaches the clamp, then gets SIGKILLed
		c, err := New(Config{Idle: 41 * time.Second, CgroupPath: os.Getenv(helperCgroupEnv)})
		if err != nil {
			return err
		}
		pid, _ := strconv.Atoi(os.Getenv(helperPIDEnv))
		if err := c.AddPID(pid); err != nil {
			return err
		}
		fmt.Println("ready")
		_, err = io.Copy(io.Discard, os.Stdin) // until killed
		return err
	}
	return fmt.Errorf("unknown mode %q", mode)
}

// keepOpts is what getsockopt reads back from one socket.
type keepOpts struct {
	KeepAlive, Idle, Interval, Count int
}

// socketsReport is what the sockets helper prints: per connection end.
type socketsReport struct {
	Netns string              // the helper's network namespace
	Opts  map[string]keepOpts // "v4 active", "v6 passive", "go dialer", ...
}

// helperSockets runs in a fresh network namespace (CLONE_NEWNET). It waits
// for a line on stdin, so the test can move it into the cgroup before it
// creates any socket, then opens loopback connections and reports.
func helperSockets() error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return err
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return err
	}
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return fmt.Errorf("waiting for go: %w", err)
	}
	rep := socketsReport{Opts: map[string]keepOpts{}}
	rep.Netns, _ = os.Readlink("/proc/self/ns/net")
	for _, fam := range []struct {
		name string
		sa   unix.Sockaddr
		af   int
	}{
		{"v4", &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}, unix.AF_INET},
		{"v6", &unix.SockaddrInet6{Addr: [16]byte{15: 1}}, unix.AF_INET6},
	} {
		active, passive, err := rawPair(fam.af, fam.sa)
		if err != nil {
			return fmt.Errorf("%s: %w", fam.name, err)
		}
		rep.Opts[fam.name+" active"], rep.Opts[fam.name+" passive"] = active, passive
	}
	goOpts, err := goDialerOpts()
	if err != nil {
		return fmt.Errorf("go dialer: %w", err)
	}
	rep.Opts["go dialer"] = goOpts
	return json.NewEncoder(os.Stdout).Encode(rep)
}

// rawPair connects to a listener on loopback with plain system calls, as a
// non-Go proxy (or one that disables Go's keepalive) does, and reads the
// options of both ends.
func rawPair(af int, addr unix.Sockaddr) (active, passive keepOpts, err error) {
	ln, err := unix.Socket(af, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return active, passive, err
	}
	defer unix.Close(ln)
	if err := unix.Bind(ln, addr); err != nil {
		return active, passive, fmt.Errorf("bind: %w", err)
	}
	if err := unix.Listen(ln, 1); err != nil {
		return active, passive, err
	}
	bound, err := unix.Getsockname(ln)
	if err != nil {
		return active, passive, err
	}
	cl, err := unix.Socket(af, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return active, passive, err
	}
	defer unix.Close(cl)
	if err := unix.Connect(cl, bound); err != nil {
		return active, passive, fmt.Errorf("connect: %w", err)
	}
	acc, _, err := unix.Accept4(ln, unix.SOCK_CLOEXEC)
	if err != nil {
		return active, passive, fmt.Errorf("accept: %w", err)
	}
	defer unix.Close(acc)
	if active, err = readKeepOpts(cl); err != nil {
		return active, passive, err
	}
	passive, err = readKeepOpts(acc)
	return active, passive, err
}

// goDialerOpts dials with Go's default net.Dialer, which turns keepalive on
// and sets 15 s / 15 s / 9 right after connect.
func goDialerOpts() (keepOpts, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return keepOpts{}, err
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			defer c.Close()
			io.Copy(io.Discard, c)
		}
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return keepOpts{}, err
	}
	defer conn.Close()
	rc, err := conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		return keepOpts{}, err
	}
	var opts keepOpts
	var optErr error
	if err := rc.Control(func(fd uintptr) { opts, optErr = readKeepOpts(int(fd)) }); err != nil {
		return opts, err
	}
	return opts, optErr
}

func readKeepOpts(fd int) (keepOpts, error) {
	var o keepOpts
	for _, q := range []struct {
		level, name int
		dst         *int
	}{
		{unix.SOL_SOCKET, unix.SO_KEEPALIVE, &o.KeepAlive},
		{unix.SOL_TCP, unix.TCP_KEEPIDLE, &o.Idle},
		{unix.SOL_TCP, unix.TCP_KEEPINTVL, &o.Interval},
		{unix.SOL_TCP, unix.TCP_KEEPCNT, &o.Count},
	} {
		v, err := unix.GetsockoptInt(fd, q.level, q.name)
		if err != nil {
			return o, fmt.Errorf("getsockopt %d/%d: %w", q.level, q.name, err)
		}
		*q.dst = v
	}
	return o, nil
}

// helper is a running helper process.
type helper struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

// startHelper re-executes the test binary in mode; with newNetns it gets a
// network namespace of its own, which vanishes with it. It is killed when
// the test ends, also on failure.
func startHelper(t *testing.T, mode string, newNetns bool, env ...string) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), helperEnv+"="+mode), env...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if newNetns {
		cmd.SysProcAttr.Cloneflags = unix.CLONE_NEWNET
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s helper: %v", mode, err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	return &helper{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
}

func (h *helper) pid() int { return h.cmd.Process.Pid }

// sockets lets a sockets helper go and returns its report.
func (h *helper) sockets(t *testing.T) socketsReport {
	t.Helper()
	if _, err := io.WriteString(h.stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	var rep socketsReport
	if err := json.NewDecoder(h.out).Decode(&rep); err != nil {
		t.Fatalf("reading helper report: %v", err)
	}
	return rep
}

// line reads one line the helper prints.
func (h *helper) line(t *testing.T) string {
	t.Helper()
	s, err := h.out.ReadString('\n')
	if err != nil {
		t.Fatalf("reading from helper: %v", err)
	}
	return strings.TrimSpace(s)
}

// cgroupOf returns the cgroup2 path of pid relative to the mount ("/x").
func cgroupOf(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rel, ok := strings.CutPrefix(l, "0::"); ok {
			return rel
		}
	}
	t.Fatalf("pid %d: no cgroup2 entry in %q", pid, b)
	return ""
}
