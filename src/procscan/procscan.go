// Package procscan finds processes by reading /proc directly.
//
// The watchdog must know whether the vendor proxy is alive, which process holds
// the proxy port after a crash, and how close the proxy is to its descriptor
// limit. The shell original used `pgrep -x`, which busybox implements wrongly
// and which can match the watchdog's own command line; forking is also too
// slow for a check that runs every few seconds. Here a process matches a name
// only by its comm or the base name of its executable, never by arguments, and
// the caller's own pid never matches. Zombies never count as alive.
package procscan

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// DefaultRoot is where the kernel mounts procfs.
const DefaultRoot = "/proc"

// Process is one entry of the process table.
type Process struct {
	PID   int    `json:"pid"`
	PPID  int    `json:"ppid"`
	Comm  string `json:"comm"`
	Exe   string `json:"exe,omitempty"` // empty when unreadable (kernel thread, exited, no permission)
	State string `json:"state"`         // one letter from /proc/PID/stat: R, S, D, Z, ...
}

// Zombie reports whether the process has exited and waits to be reaped.
func (p Process) Zombie() bool { return p.State == "Z" || p.State == "X" }

// Scanner reads a procfs tree. The zero value reads /proc.
type Scanner struct {
	// Root is the procfs mount point; tests point it at a fake tree.
	Root string
	// Self is the pid that never matches; 0 means os.Getpid().
	Self int
	// NetNS, when set, limits ByName and Alive to processes in that network
	// namespace, named as /proc/PID/ns/net reads ("net:[4026531840]"). A
	// host running several labs has many routers (each a network namespace
	// with its own proxy) in one pid namespace; a daemon must see only its
	// own. InOwnNetNS sets it to the caller's.
	NetNS string
}

// InOwnNetNS is s limited to the caller's network namespace. If that cannot
// be read (no procfs) s is returned unchanged: on a router every process is
// in it anyway.
func (s Scanner) InOwnNetNS() Scanner {
	if ns, err := os.Readlink(filepath.Join(s.root(), "self", "ns", "net")); err == nil {
		s.NetNS = ns
	}
	return s
}

// inNetNS reports whether pid is in s.NetNS (always, when it is unset).
func (s Scanner) inNetNS(pid int) bool {
	if s.NetNS == "" {
		return true
	}
	ns, err := os.Readlink(filepath.Join(s.root(), strconv.Itoa(pid), "ns", "net"))
	return err == nil && ns == s.NetNS
}

func (s Scanner) root() string {
	if s.Root == "" {
		return DefaultRoot
	}
	return s.Root
}

// netFile is the path of a /proc/net table (net/tcp, net/tcp6) as the
// calling thread's network namespace sees it. Not /proc/net, which is
// /proc/self/net: the namespace of the process's first thread, and a
// goroutine that locks its thread and enters another namespace (the probe
// namespace, route.ProbeNS) may have run there and left it in that
// namespace for good; the daemon would then look for the proxy's listener
// in the wrong namespace. An unlocked goroutine never runs on such a
// thread, so thread-self is the daemon's own namespace.
func (s Scanner) netFile(f string) string {
	if s.Root == "" || s.Root == DefaultRoot {
		return filepath.Join(DefaultRoot, "thread-self", f)
	}
	return filepath.Join(s.root(), f)
}

func (s Scanner) self() int {
	if s.Self == 0 {
		return os.Getpid()
	}
	return s.Self
}

// ByName returns the live (non-zombie) processes whose comm is name or whose
// executable's base name is name (in NetNS, when set). The kernel truncates
// comm to 15 bytes, so a longer name is matched on its prefix and confirmed
// by the executable.
func (s Scanner) ByName(name string) ([]Process, error) {
	all, err := s.All()
	if err != nil {
		return nil, err
	}
	var out []Process
	for _, p := range all {
		if p.PID == s.self() || p.Zombie() {
			continue
		}
		if matches(p, name) && s.inNetNS(p.PID) {
			out = append(out, p)
		}
	}
	return out, nil
}

func matches(p Process, name string) bool {
	const commLen = 15 // TASK_COMM_LEN - 1
	if p.Exe != "" && filepath.Base(strings.TrimSuffix(p.Exe, " (deleted)")) == name {
		return true
	}
	if len(name) <= commLen {
		return p.Comm == name
	}
	return false
}

// Alive reports whether at least one live process is called name.
func (s Scanner) Alive(name string) (bool, error) {
	ps, err := s.ByName(name)
	return len(ps) > 0, err
}

// All lists every process that could be read; processes that exit during the
// scan are skipped silently.
func (s Scanner) All() ([]Process, error) {
	ents, err := os.ReadDir(s.root())
	if err != nil {
		return nil, fmt.Errorf("scanning processes: %w", err)
	}
	var out []Process
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		p, err := s.Get(pid)
		if err != nil {
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

// Get reads one process.
func (s Scanner) Get(pid int) (Process, error) {
	dir := filepath.Join(s.root(), strconv.Itoa(pid))
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return Process{}, fmt.Errorf("reading process %d: %w", pid, err)
	}
	p, err := parseStat(stat)
	if err != nil {
		return Process{}, fmt.Errorf("process %d: %w", pid, err)
	}
	// comm from stat is authoritative even when it contains spaces or ')'.
	if c, err := os.ReadFile(filepath.Join(dir, "comm")); err == nil {
		p.Comm = strings.TrimSuffix(string(c), "\n")
	}
	p.Exe, _ = os.Readlink(filepath.Join(dir, "exe"))
	return p, nil
}

// parseStat reads pid, comm, state and ppid from /proc/PID/stat. comm is in
// parentheses and may itself contain ") ", so the last ')' ends it.
func parseStat(b []byte) (Process, error) {
	open := bytes.IndexByte(b, '(')
	closing := bytes.LastIndexByte(b, ')')
	if open < 0 || closing < open {
		return Process{}, errors.New("malformed stat line")
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:open])))
	if err != nil {
		return Process{}, fmt.Errorf("malformed stat pid: %w", err)
	}
	rest := strings.Fields(string(b[closing+1:]))
	if len(rest) < 2 {
		return Process{}, errors.New("malformed stat line: missing state/ppid")
	}
	ppid, err := strconv.Atoi(rest[1])
	if err != nil {
		return Process{}, fmt.Errorf("malformed stat ppid: %w", err)
	}
	return Process{PID: pid, Comm: string(b[open+1 : closing]), State: rest[0], PPID: ppid}, nil
}

// FDUsage is how many descriptors a process has open against its soft limit.
// A proxy caught in a connection loop exhausts its descriptors long before it
// crashes; the loop guard compares these two numbers.
type FDUsage struct {
	Open  int `json:"open"`
	Limit int `json:"limit"` // soft "Max open files"; -1 means unlimited
}

// FDs counts /proc/PID/fd and reads the soft RLIMIT_NOFILE from
// /proc/PID/limits.
func (s Scanner) FDs(pid int) (FDUsage, error) {
	dir := filepath.Join(s.root(), strconv.Itoa(pid))
	ents, err := os.ReadDir(filepath.Join(dir, "fd"))
	if err != nil {
		return FDUsage{}, fmt.Errorf("counting descriptors of %d: %w", pid, err)
	}
	lim, err := readNoFile(filepath.Join(dir, "limits"))
	if err != nil {
		return FDUsage{}, fmt.Errorf("descriptor limit of %d: %w", pid, err)
	}
	return FDUsage{Open: len(ents), Limit: lim}, nil
}

// SocketInodes adds the inodes of pid's socket descriptors to into: how a
// socket seen through sock_diag is told to be this process's. A process
// that exits meanwhile just contributes nothing.
func (s Scanner) SocketInodes(pid int, into map[uint32]bool) {
	fdDir := filepath.Join(s.root(), strconv.Itoa(pid), "fd")
	ents, err := os.ReadDir(fdDir)
	if err != nil {
		return
	}
	for _, e := range ents {
		l, err := os.Readlink(filepath.Join(fdDir, e.Name()))
		if err != nil || !strings.HasPrefix(l, "socket:[") {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]"), 10, 32)
		if err == nil {
			into[uint32(n)] = true
		}
	}
}

func readNoFile(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "Max open files") {
			continue
		}
		fields := strings.Fields(strings.TrimPrefix(line, "Max open files"))
		if len(fields) < 1 {
			break
		}
		if fields[0] == "unlimited" {
			return -1, nil
		}
		n, err := strconv.Atoi(fields[0])
		if err != nil {
			return 0, fmt.Errorf("%s: bad soft limit %q", path, fields[0])
		}
		return n, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s: no \"Max open files\" line", path)
}

// Listening reports whether any TCP socket (IPv4 or IPv6) of this network
// namespace listens on port: the vendor's proxy may run well before it
// listens (E6), and traffic sent to it meanwhile hits a closed port.
func (s Scanner) Listening(port int) (bool, error) {
	for _, f := range []string{"net/tcp", "net/tcp6"} {
		data, err := os.ReadFile(s.netFile(f))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("reading %s: %w", f, err)
		}
		if len(listeningInodes(data, port)) > 0 {
			return true, nil
		}
	}
	return false, nil
}

// ListenerPIDs returns the pids holding a TCP socket listening on port (any
// address, IPv4 or IPv6). Crash cleanup uses it to find a stale proxy still
// bound to the tproxy port, whatever its name.
func (s Scanner) ListenerPIDs(port int) ([]int, error) {
	inodes := map[string]bool{}
	for _, f := range []string{"net/tcp", "net/tcp6"} {
		data, err := os.ReadFile(s.netFile(f))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", f, err)
		}
		for ino := range listeningInodes(data, port) {
			inodes[ino] = true
		}
	}
	if len(inodes) == 0 {
		return nil, nil
	}
	ents, err := os.ReadDir(s.root())
	if err != nil {
		return nil, fmt.Errorf("scanning processes: %w", err)
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == s.self() {
			continue
		}
		fdDir := filepath.Join(s.root(), e.Name(), "fd")
		fds, err := os.ReadDir(fdDir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			l, err := os.Readlink(filepath.Join(fdDir, fd.Name()))
			if err == nil && strings.HasPrefix(l, "socket:[") && inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids, nil
}

// tcpListen is the kernel's TCP_LISTEN state number in /proc/net/tcp.
const tcpListen = "0A"

// listeningInodes yields the socket inodes of listeners on port in a
// /proc/net/tcp{,6} table.
func listeningInodes(data []byte, port int) map[string]bool {
	want := fmt.Sprintf("%04X", port)
	out := map[string]bool{}
	lines := strings.Split(string(data), "\n")
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		if len(f) < 10 || f[3] != tcpListen {
			continue
		}
		local := f[1]
		i := strings.LastIndexByte(local, ':')
		if i < 0 || local[i+1:] != want {
			continue
		}
		out[f[9]] = true
	}
	return out
}

// Kill sends SIGKILL to each pid except our own and returns the pids it
// signalled. Crash cleanup uses it on a stale proxy: a proxy left by a
// crashed watchdog serves a configuration nobody manages, so it gets no grace.
func (s Scanner) Kill(pids ...int) ([]int, error) {
	var done []int
	var errs []error
	for _, pid := range pids {
		if pid <= 0 || pid == s.self() {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("killing %d: %w", pid, err))
			continue
		}
		done = append(done, pid)
	}
	return done, errors.Join(errs...)
}
