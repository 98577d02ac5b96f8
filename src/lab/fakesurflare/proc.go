package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"surflare-watchdog/src/lab"
	"surflare-watchdog/src/lab/fakes"
)

// proxyStartTimeout bounds how long connect waits for the proxy to listen.
const proxyStartTimeout = 5 * time.Second

// proxyAlive reports whether pid is our surflare-proxy: its comm is exactly
// "surflare-proxy" and its executable is the one in our bin/ directory (the
// pid namespace is shared by every lab, so comm alone is not enough).
func proxyAlive(binDir string, pid int) bool {
	if pid <= 0 {
		return false
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil || strings.TrimSpace(string(comm)) != fakes.ProxyName {
		return false
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return false
	}
	exe = strings.TrimSuffix(exe, " (deleted)")
	want, _ := filepath.EvalSymlinks(filepath.Join(binDir, fakes.ProxyName))
	return exe == filepath.Join(binDir, fakes.ProxyName) || exe == want
}

// startProxy launches bin/surflare-proxy: stdin from /dev/null,
// stdout/stderr appended to the proxy log. Detached (own session) for
// connect --daemon; for the long-lived foreground CLI (E7) it stays in our
// session and dies with us (PR_SET_PDEATHSIG), as a child of a killed
// TUI does. What else it inherits follows the inherit_fds knob (E5): the
// real proxy inherits every descriptor its parent left open; the old fake
// marked them close-on-exec first. It returns once the proxy listens on
// 127.0.0.1:10800, or at once when the proxy_delay knob makes it late (E6).
func startProxy(ctx context.Context, binDir string, li fakes.LabInfo, foreground bool) (int, error) {
	logPath := li.ProxyLog
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return 0, fmt.Errorf("creating log dir: %w", err)
	}
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return 0, fmt.Errorf("opening proxy log: %w", err)
	}
	defer logf.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		return 0, err
	}
	defer null.Close()
	if !li.Vendor.InheritFDs {
		closeInheritedFDs()
	}
	cmd := exec.Command(filepath.Join(binDir, fakes.ProxyName))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = null, logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if foreground {
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		// The death signal follows the thread that forked: keep it.
		runtime.LockOSThread()
	}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("starting %s: %w", fakes.ProxyName, err)
	}
	pid := cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	if li.Vendor.ProxyDelayMS > 0 {
		// E6: the real `connect --daemon` can return before the tunnel
		// is up; the proxy itself waits before it listens.
		return pid, nil
	}
	deadline := time.NewTimer(proxyStartTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if listening(lab.ProxyPort) {
			return pid, nil
		}
		select {
		case err := <-exited:
			return 0, fmt.Errorf("%s exited at start-up (%v); see %s", fakes.ProxyName, err, logPath)
		case <-deadline.C:
			unix.Kill(pid, unix.SIGKILL)
			return 0, fmt.Errorf("%s did not listen on :%d within %v", fakes.ProxyName, lab.ProxyPort, proxyStartTimeout)
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-tick.C:
		}
	}
}

// foreground is `surflare connect` without --daemon (knob foreground, E7):
// the CLI itself holds the tunnel until SIGINT/SIGTERM, then tears it
// down. Killed (SIGKILL), it cleans nothing: the proxy dies with it and the
// table, rule(s) and table-100 route are orphaned.
func (e *env) foreground(st fakes.State) int {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	pid, err := startProxy(ctx, e.binDir, e.info, true)
	cancel()
	if err != nil {
		return e.fail("%v", err)
	}
	st.Connected, st.ProxyPID = true, pid
	if err := fakes.SaveState(e.info, st); err != nil {
		return e.fail("%v", err)
	}
	fmt.Fprintf(e.stdout, "✔ Connected: %s via %s (mode %s) — press Ctrl-C to disconnect\n", st.Node, st.Transit, st.Mode)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for proxyAlive(e.binDir, pid) {
		select {
		case <-sigs:
			stopProxy(e.binDir, pid)
			st.Connected, st.ProxyPID = false, 0
			err := errors.Join(fakes.SaveState(e.info, st), removeKernelState())
			if err != nil {
				return e.fail("%v", err)
			}
			fmt.Fprintln(e.stdout, "✔ Disconnected")
			return exitOK
		case <-tick.C:
		}
	}
	return e.fail("%s exited; see %s", fakes.ProxyName, e.info.ProxyLog)
}

// closeInheritedFDs marks every descriptor above stderr close-on-exec, so
// the detached proxy never holds a pipe or lock of the caller's.
func closeInheritedFDs() {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
}

// listening reports whether something listens on 127.0.0.1:port in this
// network namespace (from /proc/net/tcp: local 0100007F:PORT, state 0A).
func listening(port int) bool {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return false
	}
	defer f.Close()
	want := fmt.Sprintf("0100007F:%04X", port)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) > 3 && fs[1] == want && fs[3] == "0A" {
			return true
		}
	}
	return false
}

// stopProxy ends our proxy: SIGTERM, then SIGKILL after a grace period.
func stopProxy(binDir string, pid int) error {
	if !proxyAlive(binDir, pid) {
		return nil
	}
	if err := unix.Kill(pid, unix.SIGTERM); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("stopping %s (pid %d): %w", fakes.ProxyName, pid, err)
	}
	for i := 0; i < 100; i++ {
		if !proxyAlive(binDir, pid) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	unix.Kill(pid, unix.SIGKILL)
	return nil
}
