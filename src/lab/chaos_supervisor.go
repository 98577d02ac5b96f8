package lab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// procd's respawn, as openwrt/procd service/instance.c implements it and
// the package's init script asks for it (`procd_set_param respawn 3600 5
// 5`, procd's own defaults too): when an instance exits, its runtime is
// the time since that instance started; a runtime under respawn_threshold
// increments respawn_count, a longer one resets it to 0; when respawn_count
// exceeds respawn_retry (retry > 0) the instance is halted for good
// ("in a crash loop", instance.fail); otherwise it is started again after
// respawn_timeout. The count is never decremented by time alone: only an
// instance that lived a whole threshold resets it.
const (
	ProcdRespawnThreshold = 3600 * time.Second
	ProcdRespawnTimeout   = 5 * time.Second
	ProcdRespawnRetry     = 5
)

// procdPolicy is the respawn decision, kept pure for its test.
type procdPolicy struct {
	Threshold time.Duration
	Timeout   time.Duration
	Retry     int
	count     int
}

// exited records an exit after runtime and says whether the instance is
// respawned (after Timeout) or halted.
func (p *procdPolicy) exited(runtime time.Duration) (respawn bool) {
	// instance.c compares whole seconds: tv_sec differences.
	if runtime.Truncate(time.Second) < p.Threshold {
		p.count++
	} else {
		p.count = 0
	}
	return !(p.count > p.Retry && p.Retry > 0)
}

// daemonExit is one end of a daemon instance.
type daemonExit struct {
	PID      int       `json:"pid"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
	Status   string    `json:"status"`
	Expected bool      `json:"expected"` // the chaos kill (kill-9, clock-step) or the final stop
	Count    int       `json:"respawn_count"`
	Halted   bool      `json:"halted,omitempty"`
}

// chaosDaemon is what a chaos run needs of whoever keeps the daemon
// running: the lab's supervisor (procd's rules, modelled) or, on the
// OpenWrt router, real procd watched from outside (chaos_box.go). Pids
// are host pids: the watcher reads /proc with them.
type chaosDaemon interface {
	run(ctx context.Context)
	stop(cancel context.CancelFunc)
	// kill is the chaos kill (SIGKILL); offset, if set, steps the next
	// instance's clocks. It returns the pid killed, 0 if none ran.
	kill(offset string) int
	signal(sig syscall.Signal) error
	running() int
	instance() (pid int, start time.Time)
	report() (exits []daemonExit, starts, maxCount int, halted bool, startErrs []string)
}

// supervisor runs the daemon as procd would.
type supervisor struct {
	l      *Lab
	argv   []string
	policy procdPolicy

	mu          sync.Mutex
	pid         int
	startedAt   time.Time
	expectPID   int    // the pid the chaos is about to kill
	nextOffset  string // time namespace offset for the next start ("+N"/"-N" s), once
	exits       []daemonExit
	starts      int
	maxCount    int
	halted      bool
	stopping    bool
	done        chan struct{}
	startErrors []string
}

func newSupervisor(l *Lab, argv []string) *supervisor {
	return &supervisor{l: l, argv: argv, done: make(chan struct{}),
		policy: procdPolicy{Threshold: ProcdRespawnThreshold, Timeout: ProcdRespawnTimeout, Retry: ProcdRespawnRetry}}
}

// run starts the daemon and keeps respawning it until ctx ends or the
// policy halts it.
func (s *supervisor) run(ctx context.Context) {
	defer close(s.done)
	for ctx.Err() == nil {
		p, err := s.start()
		if err != nil {
			s.mu.Lock()
			s.startErrors = append(s.startErrors, err.Error())
			s.mu.Unlock()
			// procd: fork failure just returns; the instance stays down
			// until the next trigger. Retry after the respawn timeout.
			if !sleepCtx(ctx, s.policy.Timeout) {
				return
			}
			continue
		}
		select {
		case <-p.done:
		case <-ctx.Done():
			return // stop() takes it down
		}
		end := time.Now()
		s.mu.Lock()
		s.l.forgetProc(p)
		ex := daemonExit{PID: p.cmd.Process.Pid, Start: s.startedAt, End: end, Status: p.cmd.ProcessState.String(),
			Expected: s.expectPID == p.cmd.Process.Pid || s.stopping}
		respawn := s.policy.exited(end.Sub(s.startedAt))
		ex.Count = s.policy.count
		s.maxCount = max(s.maxCount, s.policy.count)
		ex.Halted = !respawn
		s.halted = !respawn
		s.exits = append(s.exits, ex)
		s.pid = 0
		s.mu.Unlock()
		if !respawn || !sleepCtx(ctx, s.policy.Timeout) {
			return
		}
	}
}

// start launches one instance in the router's network namespace (and, if
// a clock step is pending, in a new time namespace).
func (s *supervisor) start() (*proc, error) {
	s.mu.Lock()
	off := s.nextOffset
	s.nextOffset = ""
	s.mu.Unlock()
	bin := s.l.DaemonBinary()
	args := s.argv
	if off != "" {
		// unshare(1) without --fork: the kernel moves a process into its
		// time_for_children namespace on execve, so the daemon keeps
		// unshare's pid (the supervisor's signals reach it directly).
		args = append([]string{"--time", "--monotonic", off, "--boottime", off, "--", bin}, args...)
		bin = "unshare"
	}
	cmd := exec.Command(bin, args...)
	// The lab CA, as daemonCommand: an https:// probe URL in the chaos
	// sets verifies.
	cmd.Env = append(os.Environ(), "PATH="+s.l.Path(dirBin)+":"+os.Getenv("PATH"), "SSL_CERT_FILE="+s.l.CAPath())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pid, err := s.l.startLogged(DaemonName, cmd, s.l.startInRouterNet)
	if err != nil {
		return nil, err
	}
	p := s.l.daemonProc()
	s.mu.Lock()
	s.pid, s.startedAt = pid, time.Now()
	s.starts++
	s.mu.Unlock()
	if p == nil {
		return nil, fmt.Errorf("daemon pid %d not in the lab's process list", pid)
	}
	return p, nil
}

// kill sends SIGKILL to the running instance as the chaos kill; with
// offset, the next instance starts with its clocks stepped. It returns the
// pid killed (0 if none was running).
func (s *supervisor) kill(offset string) int {
	s.mu.Lock()
	pid := s.pid
	if pid != 0 {
		s.expectPID = pid
		if offset != "" {
			s.nextOffset = boundOffset(offset)
		}
	}
	s.mu.Unlock()
	if pid != 0 {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return pid
}

// boundOffset keeps a backward step above zero: CLOCK_MONOTONIC and
// CLOCK_BOOTTIME in the namespace must stay positive (the host's uptime
// minus a minute at most).
func boundOffset(off string) string {
	n, err := strconv.Atoi(off)
	if err != nil || n >= 0 {
		return off
	}
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return "+0"
	}
	up, _ := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	limit := int(up) - 60
	if limit < 0 {
		return "+0"
	}
	return strconv.Itoa(max(n, -limit))
}

// signal sends sig to the running instance.
func (s *supervisor) signal(sig syscall.Signal) error {
	s.mu.Lock()
	pid := s.pid
	s.mu.Unlock()
	if pid == 0 {
		return fmt.Errorf("the daemon is not running (respawn pending)")
	}
	return syscall.Kill(pid, sig)
}

// instance is the running instance's pid and start (0 while down).
func (s *supervisor) instance() (int, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pid, s.startedAt
}

// running is the current pid (0 while down).
func (s *supervisor) running() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pid
}

// stop ends supervision and stops the daemon as procd's stop does
// (SIGTERM, SIGKILL after term_timeout).
func (s *supervisor) stop(cancel context.CancelFunc) {
	s.mu.Lock()
	s.stopping = true
	s.mu.Unlock()
	cancel()
	<-s.done
	if p := s.l.daemonProc(); p != nil {
		start := time.Now()
		p.stop(DaemonStopGrace)
		s.mu.Lock()
		s.exits = append(s.exits, daemonExit{PID: p.cmd.Process.Pid, Start: s.startedAt, End: start,
			Status: p.cmd.ProcessState.String(), Expected: true})
		s.mu.Unlock()
		s.l.forgetProc(p)
	}
}

// report copies the supervisor's record.
func (s *supervisor) report() (exits []daemonExit, starts, maxCount int, halted bool, startErrs []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]daemonExit(nil), s.exits...), s.starts, s.maxCount, s.halted, append([]string(nil), s.startErrors...)
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
