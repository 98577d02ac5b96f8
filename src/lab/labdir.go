package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Binaries installed into <labdir>/bin, by package directory (relative to
// the module root). The fakes find the lab directory as the parent of bin/.
var Binaries = map[string]string{
	"surflare":          "src/lab/fakesurflare",
	"surflare-proxy":    "src/lab/fakeproxy",
	"surflare-lab":      "src/cmd/surflare-lab",
	"surflare-watchdog": "src/cmd/surflare-watchdog",
}

// ownerFile records "PID STARTTIME" of the process that owns the lab, so
// Sweep removes only labs whose owner is gone (PID reuse is caught by the
// start time).
const ownerFile = "owner"

// Lab directory layout.
const (
	dirBin    = "bin"
	dirLog    = "log"
	dirState  = "state"
	dirRun    = "run"
	dirConfig = "config"
)

// makeDir creates the lab directory with its owner file already inside
// (built under a temporary name, then renamed), so Sweep never sees a lab
// directory without an owner.
func (l *Lab) makeDir() error {
	tmp, err := os.MkdirTemp(filepath.Dir(l.Dir), ".creating-"+l.Prefix+"-")
	if err != nil {
		return fmt.Errorf("lab dir: %w", err)
	}
	for _, d := range []string{dirBin, dirLog, dirState, dirRun, dirConfig} {
		if err := os.Mkdir(filepath.Join(tmp, d), 0o755); err != nil {
			os.RemoveAll(tmp)
			return fmt.Errorf("lab dir: %w", err)
		}
	}
	if err := writeOwner(tmp, os.Getpid()); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("lab dir: %w", err)
	}
	if err := os.Rename(tmp, l.Dir); err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("lab dir %s: %w", l.Dir, err)
	}
	return nil
}

// prefixTaken reports whether a lab with l's prefix exists: its directory
// or any of its namespaces.
func (l *Lab) prefixTaken() bool {
	if _, err := os.Lstat(l.Dir); err == nil {
		return true
	}
	return len(listNamed(l.Prefix+"-")) > 0
}

// writeOwner records pid as the owner of the lab in dir.
func writeOwner(dir string, pid int) error {
	st, err := procStart(pid)
	if err != nil {
		return fmt.Errorf("lab owner: %w", err)
	}
	return writeFileAtomic(filepath.Join(dir, ownerFile), fmt.Appendf(nil, "%d %s\n", pid, st), 0o644)
}

// ownerAlive reports whether the owner recorded in dir is still running.
func ownerAlive(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, ownerFile))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return false
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil {
		return false
	}
	st, err := procStart(pid)
	return err == nil && st == f[1]
}

// procStart is field 22 of /proc/PID/stat (start time in clock ticks); a
// zombie (exited, not yet reaped — PID 1 in a container may never reap it)
// counts as gone.
func procStart(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", fmt.Errorf("parsing /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return "", fmt.Errorf("parsing /proc/%d/stat", pid)
	}
	if f[0] == "Z" || f[0] == "X" {
		return "", fmt.Errorf("process %d has exited", pid)
	}
	return f[19], nil
}

// Owner returns the pid recorded as the lab's owner (0 if unknown).
func (l *Lab) Owner() int {
	b, err := os.ReadFile(l.Path(ownerFile))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.Fields(string(b) + " ")[0])
	return pid
}

// writeFileAtomic writes via a temp file and rename, so readers polling the
// file never see it half written.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// FindRepoRoot walks up from dir to the directory holding go.mod.
func FindRepoRoot(dir string) (string, error) {
	d, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("no go.mod above %s: run from inside the surflare-watchdog checkout", dir)
		}
		d = parent
	}
}

// buildMu serialises builds: parallel labs in one test binary would otherwise
// run four `go build`s each on a two-core machine.
var buildMu sync.Mutex

// Build compiles the lab's binaries (Binaries) from the module at root into
// outDir. The Go build cache makes a rebuild of unchanged code take about a
// second.
func Build(ctx context.Context, root, outDir string) error {
	buildMu.Lock()
	defer buildMu.Unlock()
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return fmt.Errorf("build dir: %w", err)
	}
	args := []string{"build", "-o", outDir + "/"}
	for _, pkg := range Binaries {
		if _, err := os.Stat(filepath.Join(root, pkg)); err != nil {
			return fmt.Errorf("building lab binaries: package %s missing: %w", pkg, err)
		}
		args = append(args, "./"+pkg)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build of lab binaries: %w\n%s", err, out)
	}
	// go build names each binary after its package directory; rename to
	// the vendor's names.
	for name, pkg := range Binaries {
		built := filepath.Join(outDir, filepath.Base(pkg))
		if built == filepath.Join(outDir, name) {
			continue
		}
		if err := os.Rename(built, filepath.Join(outDir, name)); err != nil {
			return fmt.Errorf("installing %s: %w", name, err)
		}
	}
	return nil
}

func (l *Lab) installBinaries(ctx context.Context, o Options) error {
	bin := l.Path(dirBin)
	if o.BinDir == "" {
		root := o.RepoRoot
		if root == "" {
			wd, _ := os.Getwd()
			r, err := FindRepoRoot(wd)
			if err != nil {
				return err
			}
			root = r
		}
		return Build(ctx, root, bin)
	}
	for name := range Binaries {
		if err := linkOrCopy(filepath.Join(o.BinDir, name), filepath.Join(bin, name)); err != nil {
			return fmt.Errorf("installing %s: %w", name, err)
		}
	}
	return nil
}

// linkOrCopy hard-links src to dst (same file system) or copies it. A hard
// link keeps os.Executable pointing into the lab dir, which the fakes need.
func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// startServers runs the internet side (`surflare-lab internet-serve`) in
// the internet namespace and waits until its services accept connections.
func (l *Lab) startServers(ctx context.Context) error {
	logf, err := os.OpenFile(l.Path(dirLog, "internet.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("internet log: %w", err)
	}
	defer logf.Close()
	cmd := l.Command(RoleInternet, l.Path(dirBin, "surflare-lab"), "internet-serve", "--lab-dir", l.Dir)
	cmd.Stdout, cmd.Stderr = logf, logf
	p, err := startProc("internet-serve", cmd)
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.procs = append(l.procs, p)
	l.mu.Unlock()
	ready := []netip.AddrPort{
		netip.AddrPortFrom(AccountAPI, 80),
		netip.AddrPortFrom(IPEcho[0], 80),
		netip.AddrPortFrom(Search, 443), // bound after the lab CA is written
		netip.AddrPortFrom(Relays[0].Addr, RelayPort),
		netip.AddrPortFrom(Nodes[len(Nodes)-1].Addr, ExitPort),
	}
	return l.waitListening(ctx, p, ready, 10*time.Second)
}

// waitListening polls (from inside the internet namespace, so nothing
// crosses the WAN link or the leak counters) until every address accepts.
func (l *Lab) waitListening(ctx context.Context, p *proc, addrs []netip.AddrPort, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for _, a := range addrs {
		for {
			dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			c, err := dialIn(dctx, l.ns[RoleInternet], "tcp", a.String())
			cancel()
			if err == nil {
				c.Close()
				break
			}
			select {
			case <-p.done:
				return fmt.Errorf("internet servers exited during start (see %s)", l.Path(dirLog, "internet.log"))
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(5 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("internet service %s not answering after %s: %w (see %s)", a, limit, err, l.Path(dirLog, "internet.log"))
			}
		}
	}
	return nil
}

// errNotRunning is returned by Attach when no lab with that prefix exists.
var errNotRunning = errors.New("no such lab running")
