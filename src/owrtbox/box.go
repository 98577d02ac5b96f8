// Package owrtbox boots the OpenWrt 24.10 userland kept beside the checkout
// (../shared/owrt: procd as PID 1, ubusd, rpcd, netifd, fw4, opkg, LuCI) in
// a network namespace, and drives it the way a router owner would: commands
// in its shell, files copied in, packages installed with its own opkg.
//
// The box's scripts do the booting (boot.sh, enter.sh, shutdown.sh); this
// package only calls them, so what the tests run is what the box's
// maintainers document. The box has its own mount and PID namespaces: its
// files are reached from the host through /proc/<box pid>/root, and a host
// directory is made visible inside it with BindIn.
package owrtbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ErrAbsent reports that the box is not checked out beside the repository.
var ErrAbsent = errors.New("the OpenWrt box is not checked out beside the repository")

// RelDir is where the box lives, relative to the repository root: a
// sibling of the checkout, never inside it (its files are OpenWrt's, not
// ours).
const RelDir = "../shared/owrt"

// bootWait bounds boot.sh's wait for procd's "- init complete -". A box
// boots in about 6 s on an idle machine; a loaded CI runner takes longer.
const bootWait = 90

// shutdownTimeout is what shutdown.sh gives procd's poweroff before SIGKILL.
const shutdownTimeout = 20

// Locate returns the box directory beside repoRoot, or ErrAbsent.
func Locate(repoRoot string) (string, error) {
	dir := filepath.Clean(filepath.Join(repoRoot, RelDir))
	if _, err := os.Stat(filepath.Join(dir, "boot.sh")); err != nil {
		return "", fmt.Errorf("%w (looked for %s/boot.sh)", ErrAbsent, dir)
	}
	return dir, nil
}

// Options shape a boot.
type Options struct {
	// Root boots this root file system read-write (boot.sh --persist with
	// OWRTBOX_ROOT), so what the box writes survives a Reboot. Empty boots
	// the shipped root under a fresh RAM overlay: a factory-fresh first
	// boot every time. See CopyRoot.
	Root string
	// OnStart, if set, runs at every boot (Boot, Reboot, Start) as soon as
	// the box's PID 1 has mounted its /tmp, seconds before the rc.d
	// scripts start services: the moment to bind host directories in that
	// a service started at boot needs (BindIn; a bind dies with the box).
	OnStart func(*Box) error
}

// Box is a running box in a named network namespace.
type Box struct {
	Dir   string // the box's scripts (Locate)
	NetNS string // the network namespace it runs in
	PID   int    // its PID 1, as a host PID
	opts  Options
	saved string // syslog kept by the last Shutdown
}

// Boot starts the box in netns (which must exist) and waits until procd
// reports "- init complete -".
func Boot(ctx context.Context, dir, netns string, o Options) (*Box, error) {
	b := &Box{Dir: dir, NetNS: netns, opts: o}
	if err := b.boot(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

func (b *Box) boot(ctx context.Context) error {
	// boot.sh without its own wait, so OnStart runs before the services;
	// the wait for "- init complete -" is then ours.
	cmd := exec.CommandContext(ctx, filepath.Join(b.Dir, "boot.sh"), b.NetNS, "--wait", "0")
	cmd.Env = os.Environ()
	if b.opts.Root != "" {
		cmd.Args = append(cmd.Args, "--persist")
		cmd.Env = append(cmd.Env, "OWRTBOX_ROOT="+b.opts.Root)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		// boot.sh may have got as far as starting PID 1: stop it.
		_ = b.shutdown(context.Background())
		return fmt.Errorf("booting the box in %s: %w: %s", b.NetNS, err, strings.TrimSpace(stderr.String()))
	}
	fields := strings.Fields(string(out))
	if len(fields) == 0 {
		_ = b.shutdown(context.Background())
		return fmt.Errorf("booting the box in %s: boot.sh printed no PID: %s", b.NetNS, strings.TrimSpace(stderr.String()))
	}
	pid, err := strconv.Atoi(fields[len(fields)-1])
	if err != nil {
		_ = b.shutdown(context.Background())
		return fmt.Errorf("booting the box in %s: boot.sh printed %q, not a PID", b.NetNS, out)
	}
	b.PID = pid
	fail := func(err error) error {
		_ = b.shutdown(context.Background())
		b.PID = 0
		return fmt.Errorf("booting the box in %s: %w", b.NetNS, err)
	}
	if b.opts.OnStart != nil {
		if err := b.waitTmp(ctx); err != nil {
			return fail(err)
		}
		if err := b.opts.OnStart(b); err != nil {
			return fail(err)
		}
	}
	if _, err := b.WaitFor(ctx, bootWait*time.Second, `logread -e "init complete" | grep -q "init complete"`); err != nil {
		return fail(err)
	}
	return nil
}

// waitTmp waits until the box's PID 1 has mounted /tmp (procd does it
// first thing).
func (b *Box) waitTmp(ctx context.Context) error {
	deadline := time.Now().Add(bootWait * time.Second)
	for time.Now().Before(deadline) {
		data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(b.PID), "mountinfo"))
		if err != nil {
			return fmt.Errorf("the box's PID 1 is gone: %w", err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) > 4 && f[4] == "/tmp" {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return errors.New("the box never mounted /tmp")
}

// Shutdown stops the box cleanly (procd's poweroff: the K* scripts run).
// The network namespace and what the box left in it (tables, rules,
// addresses) stay: they belong to the namespace, not to the box.
func (b *Box) Shutdown(ctx context.Context) error {
	if err := b.shutdown(ctx); err != nil {
		return err
	}
	b.PID = 0
	// shutdown.sh keeps the syslog and console log beside the box's run
	// directory; keep them here instead, so nothing is left behind.
	base := filepath.Join("/run/owrtbox", b.NetNS)
	if data, err := os.ReadFile(base + ".log"); err == nil {
		b.saved = string(data)
	}
	_ = os.Remove(base + ".log")
	_ = os.Remove(base + ".console.log")
	return nil
}

func (b *Box) shutdown(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, filepath.Join(b.Dir, "shutdown.sh"), b.NetNS, strconv.Itoa(shutdownTimeout)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("shutting the box in %s down: %w: %s", b.NetNS, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Reboot shuts the box down and boots it again from the same root. Only a
// box booted with Options.Root keeps what was written to it.
func (b *Box) Reboot(ctx context.Context) error {
	if err := b.Shutdown(ctx); err != nil {
		return err
	}
	return b.Start(ctx)
}

// Start boots a box that was shut down again, from the same root (a power
// cycle in two steps: what happens in between is the caller's).
func (b *Box) Start(ctx context.Context) error {
	if b.PID != 0 {
		return fmt.Errorf("the box in %s is running (pid %d)", b.NetNS, b.PID)
	}
	return b.boot(ctx)
}

// SavedLog is the box's syslog as it was when the last Shutdown began
// (logd's buffer dies with the box).
func (b *Box) SavedLog() string { return b.saved }

// Result is what one command in the box did.
type Result struct {
	Out  string // stdout and stderr, interleaved
	Code int    // exit status
}

// Run runs script with the box's /bin/ash (enter.sh: every box namespace,
// its root, a clean OpenWrt environment) and returns its output and exit
// status. err is set only when the command could not be run at all or ctx
// ended; a non-zero exit is in Result.Code.
func (b *Box) Run(ctx context.Context, script string) (Result, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(b.Dir, "enter.sh"), b.NetNS, script)
	cmd.WaitDelay = 2 * time.Second
	out, err := cmd.CombinedOutput()
	r := Result{Out: string(out)}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee) && ctx.Err() == nil:
		r.Code = ee.ExitCode()
	case err != nil:
		return r, fmt.Errorf("in the box (%s): %q: %w: %s", b.NetNS, script, err, strings.TrimSpace(r.Out))
	}
	return r, nil
}

// Exec is Run where a non-zero exit is an error carrying the output.
func (b *Box) Exec(ctx context.Context, script string) (string, error) {
	r, err := b.Run(ctx, script)
	if err != nil {
		return r.Out, err
	}
	if r.Code != 0 {
		return r.Out, fmt.Errorf("in the box (%s): %q exited %d: %s", b.NetNS, script, r.Code, strings.TrimSpace(r.Out))
	}
	return r.Out, nil
}

// Path is where a path inside the box is seen from the host.
func (b *Box) Path(p string) string {
	return filepath.Join("/proc", strconv.Itoa(b.PID), "root", p)
}

// WriteFile writes a file inside the box, making its directory.
func (b *Box) WriteFile(p string, data []byte, mode os.FileMode) error {
	host := b.Path(p)
	if err := os.MkdirAll(filepath.Dir(host), 0o755); err != nil {
		return fmt.Errorf("writing %s in the box: %w", p, err)
	}
	if err := os.WriteFile(host, data, mode); err != nil {
		return fmt.Errorf("writing %s in the box: %w", p, err)
	}
	// WriteFile keeps the mode of a file that existed.
	if err := os.Chmod(host, mode); err != nil {
		return fmt.Errorf("writing %s in the box: %w", p, err)
	}
	return nil
}

// ReadFile reads a file inside the box.
func (b *Box) ReadFile(p string) ([]byte, error) {
	data, err := os.ReadFile(b.Path(p))
	if err != nil {
		return nil, fmt.Errorf("reading %s in the box: %w", p, err)
	}
	return data, nil
}

// CopyIn copies a host file into the box at p, keeping its mode.
func (b *Box) CopyIn(src, p string) error {
	st, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("copying into the box: %w", err)
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("copying into the box: %w", err)
	}
	return b.WriteFile(p, data, st.Mode().Perm())
}

// WaitFor runs script every interval until it exits 0, and returns its
// output; on timeout the error carries the last output.
func (b *Box) WaitFor(ctx context.Context, timeout time.Duration, script string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last Result
	for {
		r, err := b.Run(ctx, script)
		if err == nil && r.Code == 0 {
			return r.Out, nil
		}
		if err == nil {
			last = r
		}
		select {
		case <-ctx.Done():
			return last.Out, fmt.Errorf("in the box (%s): %q did not succeed within %s (last exit %d: %s)", b.NetNS, script, timeout, last.Code, strings.TrimSpace(last.Out))
		case <-time.After(250 * time.Millisecond):
		}
	}
}
