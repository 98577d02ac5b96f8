package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"surflare-watchdog/src/keepalive"
)

// The daemon in the lab: surflare-watchdog run, started from <labdir>/bin in
// the router namespace with the lab's config, its output in
// <labdir>/log/surflare-watchdog.log. Tests and the scenario runner start,
// stop and query it through these helpers, exactly as a user would: the
// binary, its control socket and `status --json`.

// DaemonName is the lab process name (and log file base) of the daemon.
const DaemonName = "surflare-watchdog"

// DaemonStopGrace is how long StopDaemon waits after SIGTERM before it
// kills the daemon: the daemon promises to end within 5 s at any point.
const DaemonStopGrace = 5 * time.Second

// DaemonState is the part of the daemon's `status --json` answer tests look
// at; Raw holds the whole answer for anything else.
type DaemonState struct {
	State   string `json:"state"`
	Node    string `json:"node"`
	Transit string `json:"transit"`
	Mode    string `json:"mode"`
	Exit    struct {
		IP      string `json:"ip"`
		Country string `json:"country"`
	} `json:"exit"`
	Counters struct {
		Checks           int `json:"checks"`
		FailedChecks     int `json:"failed_checks"`
		ConnectAttempts  int `json:"connect_attempts"`
		FailedReconnects int `json:"failed_reconnects"`
		Rotations        int `json:"rotations"`
		Storms           int `json:"storms"`
	} `json:"counters"`
	Candidates []struct {
		Node      string `json:"node"`
		Current   bool   `json:"current"`
		Failed    bool   `json:"failed"`
		Dead      bool   `json:"dead"`
		LogErrors int    `json:"log_errors"`
	} `json:"candidates"`
	Transitions []struct {
		At     time.Time `json:"at"`
		From   string    `json:"from"`
		To     string    `json:"to"`
		Reason string    `json:"reason"`
	} `json:"last_transitions"`
	// LastCheck is the last health check's verdict, with how the exit was
	// judged in the daemon's mode (health.Result.ExitCheck).
	LastCheck *struct {
		Outcome   string `json:"outcome"`
		Reason    string `json:"reason"`
		ExitCheck string `json:"exit_check"`
	} `json:"last_check"`
	// PID is the daemon's process id as it reports it.
	PID int `json:"pid"`

	Raw json.RawMessage `json:"-"`
}

// Healthy reports whether the daemon says the tunnel is healthy.
func (s DaemonState) Healthy() bool { return s.State == "healthy" }

// DaemonBinary is the daemon binary the lab runs.
func (l *Lab) DaemonBinary() string { return l.Path(dirBin, DaemonName) }

// StartDaemon starts `surflare-watchdog run` in the router namespace and
// waits until its control socket answers with a state past "starting" —
// by then the kill switch is armed — or ctx ends, or the daemon exits. With sets, the lab config is first rewritten from the lab's
// defaults plus these overrides (they replace the overrides given to Up);
// without, the config file is used as it is. It returns the daemon's pid.
func (l *Lab) StartDaemon(ctx context.Context, sets ...string) (int, error) {
	return l.StartDaemonArgs(ctx, nil, sets...)
}

// StartDaemonArgs is StartDaemon with extra `run` flags (e.g.
// --open-on-exit).
func (l *Lab) StartDaemonArgs(ctx context.Context, args []string, sets ...string) (int, error) {
	return l.startDaemon(ctx, args, nil, sets)
}

// startDaemon is StartDaemonArgs; files are handed to the daemon as
// descriptors 3, 4, … (exec.Cmd.ExtraFiles), as a parent that leaks
// descriptors would (fds_e5_test.go).
func (l *Lab) startDaemon(ctx context.Context, args []string, files []*os.File, sets []string) (int, error) {
	if l.box != nil {
		if len(args) > 0 || len(files) > 0 {
			return 0, fmt.Errorf("lab %s: the OpenWrt router's daemon runs as procd starts it (no extra flags: %v)", l.Prefix, args)
		}
		return l.startBoxDaemon(ctx, sets)
	}
	if len(sets) > 0 {
		if err := WriteDaemonConfig(l, sets); err != nil {
			return 0, err
		}
	}
	if p := l.daemonProc(); p != nil {
		select {
		case <-p.done:
			l.Stop(DaemonName) // forget the exited one
		default:
			return 0, fmt.Errorf("lab %s: the daemon is already running (pid %d)", l.Prefix, p.cmd.Process.Pid)
		}
	}
	argv := append([]string{"run", "--config", l.DaemonConfigPath()}, args...)
	cmd := l.daemonCommand(argv...)
	cmd.ExtraFiles = files
	pid, err := l.startLogged(DaemonName, cmd, l.startInRouterNet)
	if err != nil {
		return 0, err
	}
	p := l.daemonProc()
	for {
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := l.DaemonStatus(qctx)
		cancel()
		if err == nil && st.State != "starting" {
			return pid, nil
		}
		if err == nil {
			err = fmt.Errorf("still starting")
		}
		select {
		case <-ctx.Done():
			return pid, fmt.Errorf("lab %s: daemon (pid %d) did not answer on its control socket: %w (last: %v; log: %s)", l.Prefix, pid, ctx.Err(), err, l.LogPath(DaemonName))
		case <-p.done:
			return 0, fmt.Errorf("lab %s: daemon exited at startup (%v); log %s:\n%s", l.Prefix, p.cmd.ProcessState, l.LogPath(DaemonName), l.daemonLogTail(20))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// daemonCommand is the daemon's command line. Unlike Command (`ip netns
// exec`, which gives the program a mount namespace with a fresh /sys) it is
// meant to be started by startInRouterNet, in the router's network
// namespace only: the daemon keeps the host's mounts, the cgroup2 mount
// among them, so its keepalive clamp works as on a router.
func (l *Lab) daemonCommand(args ...string) *exec.Cmd {
	cmd := exec.Command(l.DaemonBinary(), args...)
	// SSL_CERT_FILE: the daemon trusts the lab CA (and nothing else: the
	// lab has no real host), so an https:// probe URL at the lab's search
	// host verifies as a real one would (labtls.go).
	cmd.Env = append(os.Environ(), "PATH="+l.Path(dirBin)+":"+os.Getenv("PATH"), "SSL_CERT_FILE="+l.CAPath())
	// Its own process group, so a stop reaches the daemon's children too.
	// No Pdeathsig: it would fire when the forking thread (discarded by
	// inNS) exits.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// startInRouterNet forks cmd from a thread that has joined the router's
// network namespace (and nothing else), so the child starts there.
func (l *Lab) startInRouterNet(name string, cmd *exec.Cmd) (*proc, error) {
	ns, err := l.NS(RoleRouter)
	if err != nil {
		return nil, err
	}
	var p *proc
	err = inNS(ns, func() error {
		var err error
		p, err = startProc(name, cmd)
		return err
	})
	return p, err
}

// DaemonCgroup is the cgroup2 group the lab's daemon puts the proxy in for
// its keepalive clamp (keepalive.InstanceCgroup of the lab's run dir); ""
// when no cgroup2 mount is visible.
func (l *Lab) DaemonCgroup() string { return daemonCgroup(l.Dir) }

func daemonCgroup(labDir string) string {
	cg, err := keepalive.InstanceCgroup(filepath.Join(labDir, dirRun))
	if err != nil {
		return ""
	}
	return cg
}

// removeDaemonCgroup removes the group a daemon that did not stop cleanly
// (SIGKILL, a crashed test) left behind; its processes are gone by then.
func removeDaemonCgroup(labDir string) error {
	cg := daemonCgroup(labDir)
	if cg == "" {
		return nil
	}
	return keepalive.CleanupStale(cg)
}

// daemonProc is the daemon's lab process, nil if it was never started (or
// was stopped).
func (l *Lab) daemonProc() *proc {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.procs {
		if p.name == DaemonName {
			return p
		}
	}
	return nil
}

// DaemonRunning reports whether the daemon started by StartDaemon is alive.
func (l *Lab) DaemonRunning() bool {
	p := l.daemonProc()
	if p == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// StopDaemon sends SIGTERM to the daemon and waits for it to exit. It
// returns how long the exit took; an error if the daemon was not running,
// or did not exit within DaemonStopGrace (it is then killed) or exited with
// a failure code.
func (l *Lab) StopDaemon(ctx context.Context) (time.Duration, error) {
	if l.box != nil {
		return l.stopBoxDaemon(ctx)
	}
	return l.signalDaemon(ctx, syscall.SIGTERM)
}

// KillDaemon kills the daemon with SIGKILL (a crash: nothing is cleaned up)
// and waits until it is gone.
func (l *Lab) KillDaemon(ctx context.Context) error {
	_, err := l.signalDaemon(ctx, syscall.SIGKILL)
	return err
}

// SignalDaemon sends sig (SIGHUP, SIGUSR1, SIGUSR2) to the running daemon.
func (l *Lab) SignalDaemon(sig syscall.Signal) error {
	p := l.daemonProc()
	if p == nil || !l.DaemonRunning() {
		return fmt.Errorf("lab %s: the daemon is not running", l.Prefix)
	}
	return syscall.Kill(p.cmd.Process.Pid, sig)
}

func (l *Lab) signalDaemon(ctx context.Context, sig syscall.Signal) (time.Duration, error) {
	p := l.daemonProc()
	if p == nil {
		return 0, fmt.Errorf("lab %s: the daemon was not started", l.Prefix)
	}
	defer l.forgetProc(p)
	start := time.Now()
	if err := syscall.Kill(p.cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return 0, fmt.Errorf("signalling the daemon: %w", err)
	}
	select {
	case <-p.done:
	case <-time.After(DaemonStopGrace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		return time.Since(start), fmt.Errorf("lab %s: daemon did not exit within %s of %v: killed", l.Prefix, DaemonStopGrace, sig)
	case <-ctx.Done():
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		return time.Since(start), ctx.Err()
	}
	took := time.Since(start)
	if (sig == syscall.SIGTERM || sig == syscall.SIGQUIT) && !p.cmd.ProcessState.Success() {
		return took, fmt.Errorf("lab %s: daemon exited with %v after SIGTERM; log tail:\n%s", l.Prefix, p.cmd.ProcessState, l.daemonLogTail(20))
	}
	return took, nil
}

// forgetProc drops p from the lab's process list.
func (l *Lab) forgetProc(p *proc) {
	l.mu.Lock()
	defer l.mu.Unlock()
	rest := l.procs[:0]
	for _, q := range l.procs {
		if q != p {
			rest = append(rest, q)
		}
	}
	l.procs = rest
}

// DaemonStatus asks the daemon for its state with `surflare-watchdog status
// --json`, run in the router namespace as a user would.
func (l *Lab) DaemonStatus(ctx context.Context) (DaemonState, error) {
	var out []byte
	var err error
	if l.box != nil {
		out, err = l.boxDaemonStatus(ctx)
	} else {
		out, err = l.CommandContext(ctx, RoleRouter, l.DaemonBinary(), "status", "--json", "--run-dir", l.Path(dirRun)).Output()
	}
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return DaemonState{}, fmt.Errorf("surflare-watchdog status: %w: %s", err, strings.TrimSpace(string(ee.Stderr)))
		}
		return DaemonState{}, fmt.Errorf("surflare-watchdog status: %w", err)
	}
	var s DaemonState
	if err := json.Unmarshal(out, &s); err != nil {
		return DaemonState{}, fmt.Errorf("surflare-watchdog status --json: %w: %.200s", err, out)
	}
	s.Raw = json.RawMessage(out)
	return s, nil
}

// WaitDaemon polls DaemonStatus every interval until cond holds, and
// returns that state; on timeout or ctx end it returns the last state seen
// with an error.
func (l *Lab) WaitDaemon(ctx context.Context, timeout time.Duration, cond func(DaemonState) bool) (DaemonState, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last DaemonState
	var lastErr error
	for {
		qctx, qcancel := context.WithTimeout(ctx, 2*time.Second)
		s, err := l.DaemonStatus(qctx)
		qcancel()
		if err == nil {
			last, lastErr = s, nil
			if cond(s) {
				return s, nil
			}
		} else {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			if lastErr != nil {
				return last, fmt.Errorf("waiting for the daemon: %w (last error: %v)", ctx.Err(), lastErr)
			}
			return last, fmt.Errorf("waiting for the daemon: %w (last state %q node %q)", ctx.Err(), last.State, last.Node)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// daemonLogTail is the last n lines of the daemon's log.
func (l *Lab) daemonLogTail(n int) string {
	b, err := os.ReadFile(l.LogPath(DaemonName))
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// DaemonLog returns the daemon's whole log (for test failure messages and
// assertions on its vocabulary).
func (l *Lab) DaemonLog() string {
	b, _ := os.ReadFile(l.LogPath(DaemonName))
	return string(b)
}
