package keepalive

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Defaults, as files/etc/config/surflare gives them: a probe
// after 30 s of silence keeps every CGNAT we know of (the shortest idle
// timeouts seen are about 60 s for TCP), and 3 unanswered probes 10 s apart
// declare the path dead within a minute.
const (
	DefaultIdle     = 30 * time.Second
	DefaultInterval = 10 * time.Second
	DefaultCount    = 3
)

// DefaultCgroupName is the group the proxy is moved into, directly under
// the cgroup2 mount, when Config.CgroupPath is empty.
const DefaultCgroupName = "surflare-proxy"

// Kernel bounds for the options (include/net/tcp.h MAX_TCP_KEEPIDLE,
// MAX_TCP_KEEPINTVL, MAX_TCP_KEEPCNT): setsockopt rejects anything outside.
const (
	maxKeepSeconds = 32767
	maxKeepCount   = 127
)

// ErrUnavailable is wrapped by every error New returns: the clamp is off,
// and the rest of the watchdog carries on without it.
var ErrUnavailable = errors.New("keepalive clamp unavailable")

// Config says what keepalive the proxy's connections get, and where the
// proxy's cgroup lives.
type Config struct {
	Idle     time.Duration // TCP_KEEPIDLE, whole seconds; 0 means DefaultIdle
	Interval time.Duration // TCP_KEEPINTVL, whole seconds; 0 means DefaultInterval
	Count    int           // TCP_KEEPCNT; 0 means DefaultCount
	// CgroupPath is the cgroup2 group created for the proxy, e.g.
	// /sys/fs/cgroup/surflare-proxy; empty means DefaultCgroupName under
	// the cgroup2 mount (which is /sys/fs/cgroup/unified on hybrid hosts).
	CgroupPath string
	// Log receives the one line saying whether the clamp is on; nil means
	// slog.Default() with subsystem=keepalive.
	Log *slog.Logger
}

// withDefaults fills zero fields and checks the rest.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Idle == 0 {
		cfg.Idle = DefaultIdle
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Count == 0 {
		cfg.Count = DefaultCount
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"idle", cfg.Idle}, {"interval", cfg.Interval}} {
		if d.v < time.Second || d.v > maxKeepSeconds*time.Second || d.v%time.Second != 0 {
			return cfg, fmt.Errorf("keepalive %s %v: want whole seconds from 1s to %ds", d.name, d.v, maxKeepSeconds)
		}
	}
	if cfg.Count < 1 || cfg.Count > maxKeepCount {
		return cfg, fmt.Errorf("keepalive count %d: want 1 to %d", cfg.Count, maxKeepCount)
	}
	if cfg.CgroupPath == "" {
		mnt, err := cgroup2Mount(mountinfoPath)
		if err != nil {
			return cfg, err
		}
		cfg.CgroupPath = filepath.Join(mnt, DefaultCgroupName)
	}
	cfg.CgroupPath = filepath.Clean(cfg.CgroupPath)
	return cfg, nil
}

// Clamp is the attached keepalive clamp for the proxy's cgroup. A Clamp
// whose New failed is inactive: Status says why, AddPID and Close do
// nothing. All methods are safe on a nil *Clamp and from any goroutine.
type Clamp struct {
	log *slog.Logger

	mu       sync.Mutex
	cfg      Config
	status   Status // Active, Capped, Reason; counters are read live
	counters int    // the counters map's fd; -1 when there is none
	progs    []int  // the loaded programs' fds
	attached []*attachment
}

// New creates the proxy's cgroup and attaches the programs to it. On error
// (which wraps ErrUnavailable and reads "keepalive clamp unavailable: …")
// the returned Clamp is still usable: inactive, with the reason in Status.
// The outcome is logged once, here.
func New(cfg Config) (*Clamp, error) {
	log := cfg.Log
	if log == nil {
		log = slog.Default().With("subsystem", "keepalive")
	}
	c := &Clamp{log: log, counters: -1}
	full, err := cfg.withDefaults()
	c.cfg = full
	if err == nil {
		err = c.attach()
	}
	if err != nil {
		c.releaseLocked()
		c.status = Status{Reason: err.Error()}
		err = fmt.Errorf("%w: %w", ErrUnavailable, err)
		log.Warn("Keepalive clamp unavailable, continuing without it", "reason", c.status.Reason)
		return c, err
	}
	c.status.Active = true
	log.Info("Keepalive clamp active", "idle", full.Idle, "interval", full.Interval,
		"count", full.Count, "cgroup", full.CgroupPath, "capped", c.status.Capped)
	return c, nil
}

// attach loads the programs before it creates the group, so a kernel that
// cannot load them leaves nothing behind.
func (c *Clamp) attach() error {
	cfg := c.cfg
	if err := checkCgroupParent(cfg.CgroupPath); err != nil {
		return err
	}
	// Kernels before 5.11 charge BPF memory to RLIMIT_MEMLOCK; the loader
	// raises it when such a kernel refuses (withMemlock).
	m, err := createCounters()
	if err != nil {
		return fmt.Errorf("creating counters map: %w", explainBPF(err))
	}
	c.counters = m
	ops, err := loadProgram(opsProgram(cfg, m))
	if err != nil {
		return fmt.Errorf("loading sock_ops program: %w", explainBPF(err))
	}
	c.progs = append(c.progs, ops)
	// The cap is a refinement: without it (kernels before 5.3) the clamp
	// still works for sockets whose owner leaves keepalive alone.
	capProg, capErr := loadProgram(capProgram(cfg))
	if capErr == nil {
		c.progs = append(c.progs, capProg)
	}

	switch err := os.Mkdir(cfg.CgroupPath, 0o755); {
	case errors.Is(err, os.ErrExist):
		// Left by an earlier run: take it over, without its programs.
		if err := detachStale(cfg.CgroupPath); err != nil {
			return err
		}
	case err != nil:
		return fmt.Errorf("creating cgroup: %w", err)
	}
	a, err := attachCgroup(cfg.CgroupPath, ops, unix.BPF_CGROUP_SOCK_OPS)
	if err != nil {
		_ = removeCgroup(cfg.CgroupPath)
		return fmt.Errorf("attaching sock_ops program to %s: %w", cfg.CgroupPath, explainBPF(err))
	}
	c.attached = append(c.attached, a)
	if capErr == nil {
		a, capErr = attachCgroup(cfg.CgroupPath, capProg, unix.BPF_CGROUP_SETSOCKOPT)
		if capErr == nil {
			c.attached = append(c.attached, a)
		}
	}
	if capErr != nil {
		c.status.Reason = fmt.Sprintf("values the proxy sets itself are not capped: %v", explainBPF(capErr))
	}
	c.status.Capped = capErr == nil
	return nil
}

// AddPID moves a process (the proxy, after each connect) into the group, so
// the connections it opens from now on are clamped.
func (c *Clamp) AddPID(pid int) error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.status.Active {
		return nil
	}
	if pid <= 0 {
		return fmt.Errorf("keepalive clamp: invalid pid %d", pid)
	}
	if err := movePID(c.cfg.CgroupPath, pid); err != nil {
		return fmt.Errorf("keepalive clamp: %w", err)
	}
	c.log.Debug("Moved process into keepalive cgroup", "pid", pid, "cgroup", c.cfg.CgroupPath)
	return nil
}

// Status reports the clamp's state for `status`: active with its values and
// how many connections it clamped, or inactive with the reason.
func (c *Clamp) Status() Status {
	if c == nil {
		return Status{Reason: "keepalive clamp not started"}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.status
	st.Idle, st.Interval, st.Count, st.Cgroup = c.cfg.Idle, c.cfg.Interval, c.cfg.Count, c.cfg.CgroupPath
	if st.Active {
		clamped, failed, err := readCounters(c.counters)
		if err == nil {
			st.Sockets, st.Failures = clamped, failed
		}
	}
	return st
}

// Close detaches the programs and removes the group, moving any process
// still in it back to the watchdog's own cgroup first. Safe to call twice.
func (c *Clamp) Close() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.status.Active {
		return nil
	}
	err := errors.Join(c.releaseLocked(), removeCgroup(c.cfg.CgroupPath))
	c.status = Status{Reason: "stopped"}
	if err != nil {
		return fmt.Errorf("stopping keepalive clamp: %w", err)
	}
	c.log.Info("Keepalive clamp stopped", "cgroup", c.cfg.CgroupPath)
	return nil
}

// releaseLocked detaches the programs and frees them and the map.
func (c *Clamp) releaseLocked() error {
	var errs []error
	for _, a := range c.attached {
		if err := a.close(); err != nil {
			errs = append(errs, fmt.Errorf("detaching program: %w", err))
		}
	}
	for _, p := range c.progs {
		closeFD(p)
	}
	closeFD(c.counters)
	c.attached, c.progs, c.counters = nil, nil, -1
	return errors.Join(errs...)
}

// CleanupStale removes what a crashed watchdog left at cgroupPath (empty:
// the default group): programs of ours still attached the legacy way, and
// the group itself, after moving its processes back to the caller's cgroup.
// Nothing there is success. Call it once at startup, before New.
func CleanupStale(cgroupPath string) error {
	if cgroupPath == "" {
		mnt, err := cgroup2Mount(mountinfoPath)
		if err != nil {
			return nil // no cgroup2, so nothing of ours can be there
		}
		cgroupPath = filepath.Join(mnt, DefaultCgroupName)
	}
	if _, err := os.Stat(cgroupPath); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if ok, err := isCgroup2(cgroupPath); err != nil || !ok {
		return fmt.Errorf("cleaning up keepalive cgroup: %s is not a cgroup2 group", cgroupPath)
	}
	if err := errors.Join(detachStale(cgroupPath), removeCgroup(cgroupPath)); err != nil {
		return fmt.Errorf("cleaning up keepalive cgroup: %w", err)
	}
	return nil
}

// detachStale detaches the programs named like ours from the group at
// path. Programs attached through a bpf_link by a live process are left to
// it: they are not stale.
func detachStale(path string) error {
	cg, err := openCgroup(path)
	if err != nil {
		return err
	}
	defer unix.Close(cg)
	var errs []error
	for _, at := range []uint32{unix.BPF_CGROUP_SOCK_OPS, unix.BPF_CGROUP_SETSOCKOPT} {
		progs, err := queryCgroup(cg, at)
		if err != nil {
			errs = append(errs, fmt.Errorf("listing programs on %s: %w", path, explainBPF(err)))
			continue
		}
		for _, ap := range progs {
			if ap.linkID != 0 {
				continue
			}
			prog, err := progFDByID(ap.id)
			if err != nil {
				continue // gone meanwhile
			}
			info, err := progInfoOf(prog)
			if name := cString(info.Name[:]); err == nil && (name == opsProgName || name == capProgName) {
				// ENOENT: attached through a link after all (kernels that
				// do not say so in the query), or detached meanwhile.
				err = detachProgram(cg, prog, at)
				if err != nil && !errors.Is(err, unix.ENOENT) {
					errs = append(errs, fmt.Errorf("detaching stale %s: %w", name, err))
				}
			}
			unix.Close(prog)
		}
	}
	return errors.Join(errs...)
}

// explainBPF turns the errors a kernel without the needed pieces returns
// into what is missing.
func explainBPF(err error) error {
	switch {
	case errors.Is(err, unix.ENOSYS):
		return fmt.Errorf("kernel built without the bpf() system call (CONFIG_BPF_SYSCALL): %w", err)
	case errors.Is(err, unix.EPERM):
		return fmt.Errorf("bpf() not permitted (needs root, or CAP_BPF and CAP_NET_ADMIN): %w", err)
	case errors.Is(err, errNotSupported):
		return fmt.Errorf("kernel too old or built without cgroup BPF (CONFIG_CGROUP_BPF): %w", err)
	case errors.Is(err, errnoENOTSUPP):
		// A load refused after the verifier passed it: the JIT cannot
		// compile the program and there is no interpreter to fall back on.
		return fmt.Errorf("kernel cannot run the program: its BPF JIT cannot compile it and the interpreter is off (CONFIG_BPF_JIT_ALWAYS_ON): %w", err)
	}
	return err
}
