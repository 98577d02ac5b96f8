package lab

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"surflare-watchdog/src/owrtbox"
)

// Chaos on the OpenWrt router (ChaosOptions.OpenWrt): the same schedule,
// traffic, invariants and report, but the daemon runs as the router runs
// it. The package is installed with the box's opkg, so procd starts the
// daemon with the init script's respawn 3600 5 5 and restarts it by its
// own rules; the run only watches (procdWatch). The firewall is fw4, the
// WAN is netifd's, the log is logd's:
//
//   - nft-flush is `nft flush ruleset`, ended by `/etc/init.d/firewall
//     restart`; table-wipe deletes every table and runs `fw4 restart`;
//     fw4-reload and firewall-restart (only drawn here) are the reloads a
//     router does on every LuCI apply and hotplug event.
//   - wan-down is `ifdown wan` / `ifup wan`; wan-addr a new address
//     through uci and reload_config, as a new lease reconfigures netifd.
//   - reload-broken writes /etc/config/surflare and reloads the service
//     (`/etc/init.d/surflare-watchdog reload`, what uci commit and LuCI
//     trigger); the reload phase is the same reload with the good config.
//   - run-full fills /tmp to its limit: on OpenWrt /run is /var/run is
//     /tmp/run, one RAM-backed tmpfs with everything else's state (fw4's,
//     ubusd's socket), sized by the router's memory. The box's /tmp is
//     remounted at boxTmpSize, a small router's, before the install.
//   - clock-step is not drawn: procd execs the daemon itself, so no time
//     namespace of its own can be put under one instance (the box as a
//     whole has one; stepping it would step procd too).
//   - panics are looked for in logread (procd forwards the daemon's
//     stderr to logd); the lines are copied to the daemon's lab log.

// Chaos fault names only the OpenWrt router's catalogue has.
const (
	ChaosFW4Reload       = "fw4-reload"       // `fw4 reload`
	ChaosFirewallRestart = "firewall-restart" // `/etc/init.d/firewall restart`
)

// boxOnlyKinds are the faults only the OpenWrt router has.
var boxOnlyKinds = []chaosKind{
	{name: ChaosFW4Reload, weight: 3, oneShot: true},
	{name: ChaosFirewallRestart, weight: 3, oneShot: true},
}

// boxCatalogue is the lab's catalogue without clock-step, plus fw4's
// reloads.
var boxCatalogue = func() []chaosKind {
	var out []chaosKind
	for _, k := range chaosCatalogue {
		if k.name != ChaosClockStep {
			out = append(out, k)
		}
	}
	return append(out, boxOnlyKinds...)
}()

// boxRunDir is where the daemon's run directory (/run, BoxDaemonSets)
// leads in the box: /run -> /var/run, /var -> /tmp. The host reads it by
// this path: an absolute symlink under /proc/PID/root resolves against the
// reader's root, not the box's.
const boxRunDir = "/tmp/run"

// boxTmpSize is the box's /tmp during a chaos run: a 64 MB router's
// (OpenWrt's /tmp is half the RAM), with room for the packages' install.
const boxTmpSize = "32m"

// boxConfig is the daemon's config file in the box.
const boxConfig = "/etc/config/surflare"

// boxDaemonComm is the daemon's /proc comm (15 characters at most).
var boxDaemonComm = DaemonName[:min(len(DaemonName), 15)]

// boxChaosIPKs are the packages the run installs.
func boxChaosIPKs(o ChaosOptions) ([]string, error) {
	if len(o.OpenWrt.IPKs) > 0 {
		return o.OpenWrt.IPKs, nil
	}
	root := o.RepoRoot
	if root == "" {
		wd, _ := os.Getwd()
		r, err := FindRepoRoot(wd)
		if err != nil {
			return nil, err
		}
		root = r
	}
	return NewestIPKs(filepath.Join(root, "build", "ipk"))
}

// setupBoxChaos makes the booted (not yet installed) OpenWrt router ready
// for the run: the small /tmp, the log follower, the packages (whose
// postinst has procd start the daemon). It returns the run dir as the
// host sees it and the good config.
func (c *chaosRun) setupBoxChaos(ctx context.Context, ipks []string) (runDir string, good []byte, err error) {
	b := c.l.Box()
	if _, err := b.Exec(ctx, "mount -o remount,size="+boxTmpSize+" /tmp"); err != nil {
		return "", nil, err
	}
	if err := c.followBoxLog(); err != nil {
		return "", nil, err
	}
	if _, err := b.Install(ctx, "install", ipks...); err != nil {
		return "", nil, err
	}
	if _, err := c.l.WaitDaemon(ctx, 60*time.Second, func(s DaemonState) bool { return s.State != "starting" }); err != nil {
		return "", nil, err
	}
	good, err = b.ReadFile(boxConfig)
	return b.Path(boxRunDir), good, err
}

// followBoxLog copies the daemon's lines from `logread -f` into its lab
// log (without logd's "date facility.level ident[pid]: " prefix), where
// the watcher and the violation excerpts read them.
func (c *chaosRun) followBoxLog() error {
	b := c.l.Box()
	out, err := os.OpenFile(c.l.LogPath(DaemonName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(b.Dir, "enter.sh"), b.NetNS, "exec logread -f -e "+DaemonName)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		out.Close()
		return err
	}
	if err := cmd.Start(); err != nil {
		out.Close()
		return err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer out.Close()
		sc := bufio.NewScanner(pipe)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			// "Tue Dec  1 11:20:36 2026 daemon.err surflare-watchdog[1234]: text"
			if i := strings.Index(line, " "+DaemonName+"["); i >= 0 {
				if j := strings.Index(line[i:], "]: "); j >= 0 {
					line = line[i+j+3:]
				}
			}
			fmt.Fprintln(out, line)
		}
		_, _ = io.Copy(io.Discard, pipe)
	}()
	c.stopLog = func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		_ = cmd.Wait()
	}
	return nil
}

// boxSh runs script in the box; a failure is an error with its output.
func (c *chaosRun) boxSh(ctx context.Context, script string) error {
	_, err := c.l.Box().Exec(ctx, script)
	return err
}

// onBox applies the faults the OpenWrt router makes its own way; handled
// is false for the rest (the lab's Fault, kill-9).
func (c *chaosRun) onBox(ctx context.Context, f chaosFault) (detail string, handled bool, err error) {
	b := c.l.Box()
	switch f.Name {
	case ChaosNFTFlush:
		return "nft flush ruleset", true, c.boxSh(ctx, "nft flush ruleset")
	case FaultTableWipe:
		names, err := wipeTables(c.l.ns[RoleRouter])
		if err != nil {
			return "", true, err
		}
		return "deleted " + strings.Join(names, ", ") + "; fw4 restart", true, c.boxSh(ctx, "fw4 -q restart")
	case ChaosFW4Reload:
		return "fw4 reload", true, c.boxSh(ctx, "fw4 -q reload")
	case ChaosFirewallRestart:
		return "/etc/init.d/firewall restart", true, c.boxSh(ctx, "/etc/init.d/firewall restart")
	case FaultWANDown:
		return "ifdown wan", true, c.boxSh(ctx, "ifdown wan")
	case ChaosWANAddr:
		return "uci network.wan.ipaddr=" + f.Args[0] + "; reload_config", true,
			c.boxSh(ctx, "uci set network.wan.ipaddr="+owrtbox.Quote(f.Args[0])+" && uci commit network && reload_config")
	case ChaosReloadBroken:
		if err := b.WriteFile(boxConfig, append(slices.Clone(c.goodConfig), brokenConfigTail...), 0o600); err != nil {
			return "", true, err
		}
		return "broken " + boxConfig + ", service reload", true, c.hup()
	case ChaosRunFull:
		n, err := fillDir(c.l.Box().Path("/tmp"))
		return fmt.Sprintf("filled /tmp (/run) with %d kB", n>>10), true, err
	}
	return "", false, nil
}

// offBox ends what onBox started.
func (c *chaosRun) offBox(ctx context.Context, f chaosFault) (detail string, handled bool, err error) {
	switch f.Name {
	case ChaosNFTFlush:
		return "/etc/init.d/firewall restart", true, c.boxSh(ctx, "/etc/init.d/firewall restart")
	case FaultWANDown:
		return "ifup wan", true, c.boxSh(ctx, "ifup wan")
	case ChaosReloadBroken:
		if err := c.l.Box().WriteFile(boxConfig, c.goodConfig, 0o600); err != nil {
			return "", true, err
		}
		return "good " + boxConfig + ", service reload", true, c.hup()
	case ChaosRunFull:
		return "freed", true, os.Remove(filepath.Join(c.l.Box().Path("/tmp"), chaosFillName))
	}
	return "", false, nil
}

// procdWatch follows the daemon procd runs in the box: it finds the
// instance's process (a host pid, by its comm and `run` argument, in the
// router's network namespace), records every exit and start, and judges
// the exits with procd's rule (procdPolicy) as the lab's supervisor does.
// procd itself does the respawning.
type procdWatch struct {
	l      *Lab
	policy procdPolicy

	mu          sync.Mutex
	pid         int
	startedAt   time.Time
	downSince   time.Time
	expectPID   int
	exits       []daemonExit
	starts      int
	maxCount    int
	halted      bool
	stopping    bool
	startErrors []string
	done        chan struct{}
}

func newProcdWatch(l *Lab) *procdWatch {
	return &procdWatch{l: l, done: make(chan struct{}),
		policy: procdPolicy{Threshold: ProcdRespawnThreshold, Timeout: ProcdRespawnTimeout, Retry: ProcdRespawnRetry}}
}

// findDaemon is the host pid of procd's instance, `surflare-watchdog
// run` whose parent is the box's PID 1 (0 if none). The parent matters:
// `status --json` shares the comm, and every child the daemon forks has
// its comm and command line until it execs (a vfork child that sorts
// first once host pids wrap would pass for a new instance).
func (p *procdWatch) findDaemon() int {
	init := p.l.Box().PID
	for _, pid := range p.l.ProcsByComm(RoleRouter, boxDaemonComm) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 1 && args[1] == "run" && parentPID(pid) == init {
			return pid
		}
	}
	return 0
}

// parentPID is /proc/PID/status's PPid (0 if unreadable).
func parentPID(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// procdInstance is procd's view of the instance (`ubus call service
// list`): whether it runs, and the last exit code.
func (p *procdWatch) procdInstance(ctx context.Context) (running bool, exitCode *int, err error) {
	out, err := p.l.Box().Exec(ctx, `ubus -t 5 call service list '{"name":"`+DaemonName+`"}'`)
	if err != nil {
		return false, nil, err
	}
	var m map[string]struct {
		Instances map[string]struct {
			Running  bool `json:"running"`
			ExitCode *int `json:"exit_code"`
		} `json:"instances"`
	}
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		return false, nil, fmt.Errorf("ubus call service list: %w: %.200s", err, out)
	}
	in := m[DaemonName].Instances["main"]
	return in.Running, in.ExitCode, nil
}

func (p *procdWatch) run(ctx context.Context) {
	defer close(p.done)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		p.poll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (p *procdWatch) poll(ctx context.Context) {
	cur := p.findDaemon()
	now := time.Now()
	p.mu.Lock()
	prev, start := p.pid, p.startedAt
	if cur == prev {
		down := p.pid == 0 && !p.downSince.IsZero() && now.Sub(p.downSince) > p.policy.Timeout+30*time.Second && !p.halted
		p.mu.Unlock()
		if down {
			// Down longer than procd's respawn timeout allows: has procd
			// given up (a crash loop) or failed to start it?
			qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			running, _, err := p.procdInstance(qctx)
			cancel()
			p.mu.Lock()
			if err != nil {
				p.startErrors = append(p.startErrors, err.Error())
			} else if !running {
				p.halted = true
			}
			p.downSince = now
			p.mu.Unlock()
		}
		return
	}
	if prev != 0 {
		ex := daemonExit{PID: prev, Start: start, End: now, Status: "exited", Expected: p.expectPID == prev || p.stopping}
		respawn := p.policy.exited(now.Sub(start))
		ex.Count = p.policy.count
		p.maxCount = max(p.maxCount, p.policy.count)
		ex.Halted = !respawn
		if !respawn {
			p.halted = true
		}
		p.exits = append(p.exits, ex)
		i := len(p.exits) - 1
		p.mu.Unlock()
		// procd knows how it ended.
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, code, err := p.procdInstance(qctx)
		cancel()
		p.mu.Lock()
		if err == nil && code != nil {
			p.exits[i].Status = fmt.Sprintf("exited, procd exit_code %d", *code)
		}
	}
	p.pid = cur
	if cur != 0 {
		p.startedAt = now
		p.starts++
		p.downSince = time.Time{}
	} else {
		p.downSince = now
	}
	p.mu.Unlock()
}

// stop ends the watch and stops the service as an owner does
// (`/etc/init.d/surflare-watchdog stop`: procd's SIGTERM, SIGKILL after
// term_timeout); the exit is the expected last one.
func (p *procdWatch) stop(cancel context.CancelFunc) {
	cancel()
	<-p.done
	p.mu.Lock()
	p.stopping = true
	pid, start := p.pid, p.startedAt
	p.mu.Unlock()
	if pid == 0 {
		return
	}
	ctx, c := context.WithTimeout(context.Background(), 30*time.Second)
	defer c()
	took, err := p.l.StopDaemon(ctx)
	status := fmt.Sprintf("stopped by procd in %s", took.Round(time.Millisecond))
	if err != nil {
		status = "stop: " + err.Error()
	}
	p.mu.Lock()
	p.exits = append(p.exits, daemonExit{PID: pid, Start: start, End: time.Now(), Status: status, Expected: err == nil})
	p.pid = 0
	p.mu.Unlock()
}

func (p *procdWatch) kill(offset string) int {
	p.mu.Lock()
	pid := p.pid
	if pid != 0 {
		p.expectPID = pid
	}
	p.mu.Unlock()
	if pid != 0 {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return pid
}

// signal: SIGHUP is the service's reload, as uci commit and LuCI's apply
// make it (the init script calls `ubus call surflare reload`, SIGHUP
// through procd if ubus does not answer); other signals go to the pid.
func (p *procdWatch) signal(sig syscall.Signal) error {
	pid := p.running()
	if pid == 0 {
		return fmt.Errorf("the daemon is not running (procd respawn pending)")
	}
	if sig == syscall.SIGHUP {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, err := p.l.Box().Exec(ctx, "/etc/init.d/"+DaemonName+" reload")
		return err
	}
	return syscall.Kill(pid, sig)
}

func (p *procdWatch) running() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pid
}

func (p *procdWatch) instance() (int, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pid, p.startedAt
}

func (p *procdWatch) report() (exits []daemonExit, starts, maxCount int, halted bool, startErrs []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.exits), p.starts, p.maxCount, p.halted, slices.Clone(p.startErrors)
}
