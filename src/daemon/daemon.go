// Package daemon is the running watchdog: it builds the engine
// (package watchdog) and everything wired around it — the firewall's mode,
// the detectors, the health checker, the control socket, ubus and the web
// API — and runs it until its context ends. The command line
// (src/cmd/surflare-watchdog) parses flags and calls New and Run.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"surflare-watchdog/src/config"
	"surflare-watchdog/src/credentials"
	"surflare-watchdog/src/firewall"
	"surflare-watchdog/src/health"
	"surflare-watchdog/src/history"
	"surflare-watchdog/src/nodeprobe"
	"surflare-watchdog/src/route"
	"surflare-watchdog/src/runfiles"
	"surflare-watchdog/src/surflare"
	"surflare-watchdog/src/ubus"
	"surflare-watchdog/src/watchdog"
)

// Options are the `run` flags.
type Options struct {
	ConfigPath   string
	PasswordFile string // "" = credentials' default sources
	OpenOnExit   bool   // SIGTERM/SIGINT also remove the kill switch
}

// Daemon is one running `surflare-watchdog run`: the engine and everything
// wired around it. Its pieces live in the daemon_*.go files.
type Daemon struct {
	opts Options
	cfgs *config.Holder
	log  *slog.Logger
	role string // "router" or "laptop"

	fw *fwAdapter
	w  *watchdog.Watchdog
	// inbox carries the detectors' requests for a check to the engine;
	// made before both, so the detectors never need the engine.
	inbox *watchdog.Inbox
	// tunnel is the node and transit in use as the engine's events last
	// said (followEvents): what the detectors ask instead of the engine.
	tunnel atomic.Pointer[tunnelView]
	vendor *reloadableVendor // daemon_vendor.go
	prober *reloadableProber
	probe  *route.ProbeNS
	dets   *detectorSet
	fast   *fastDetectors // daemon_fast.go
	procs  nsProcs

	probeJobs nodeprobe.Jobs // the one background node probe (CLI, ubus)
	pre       preflightState // daemon_preflight.go
	hist      *history.Recorder

	nodeList    *surflare.NodeCache // `surflare nodes`, cached (daemon_rotate.go)
	nodeListCtx context.Context     // bounds its refreshes: the helpers' context

	ubus *ubus.Service // nil on a laptop
	logs logRing

	wanMu   sync.Mutex
	wanv    wanInfo
	webAddr string

	aux sync.WaitGroup // goroutines that end with the aux context
}

// New loads the config (an error names every FILE:LINE problem) and
// prepares a Daemon; nothing touches the kernel before Run.
func New(o Options) (*Daemon, error) {
	// A config other than the default one (a lab, a test) keeps its
	// password next to it unless told otherwise.
	if o.PasswordFile == "" && o.ConfigPath != config.DefaultPath {
		if p := filepath.Join(filepath.Dir(o.ConfigPath), "password"); regularFile(p) {
			o.PasswordFile = p
		}
	}
	h, err := config.NewHolder(o.ConfigPath)
	if err != nil {
		return nil, err
	}
	d := &Daemon{opts: o, cfgs: h, log: slog.Default().With("subsystem", "daemon"), procs: newNSProcs(), dets: &detectorSet{},
		inbox: watchdog.NewInbox(), hist: history.New(0)}
	for _, w := range h.Warnings() {
		d.log.Warn("config: " + w.String())
	}
	d.role = string(h.Get().Main.Role.Resolve(config.OpenWrtRelease))
	return d, nil
}

func (d *Daemon) wan() wanInfo {
	d.wanMu.Lock()
	defer d.wanMu.Unlock()
	return d.wanv
}

func (d *Daemon) setWAN(w wanInfo) {
	d.wanMu.Lock()
	d.wanv = w
	d.wanMu.Unlock()
}

func regularFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// credOpts says where the vendor password is.
func (d *Daemon) credOpts(c *config.Config) credentials.Options {
	return credentials.Options{Username: c.Main.Username, File: d.opts.PasswordFile, ConfigFile: d.cfgs.Path()}
}

// goAux runs fn until the aux context ends; run waits for it (bounded).
func (d *Daemon) goAux(ctx context.Context, name string, fn func(ctx context.Context) error) {
	d.aux.Add(1)
	go func() {
		defer d.aux.Done()
		if err := fn(ctx); err != nil && ctx.Err() == nil {
			d.log.Error(name+" stopped", "err", err)
		}
	}()
}

// logWriter turns the config→Spec conversion's warnings into log lines.
type logWriter struct{ log *slog.Logger }

func (l logWriter) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimSpace(string(p)), "\n") {
		if line != "" {
			l.log.Warn(strings.TrimPrefix(line, "warning: "))
		}
	}
	return len(p), nil
}

// vendorClient is the vendor CLI with the config's timeouts and patterns.
func (d *Daemon) vendorClient(c *config.Config) *surflare.Client {
	pat := surflare.DefaultPatterns()
	pat.AuthNeeded = c.Auth.AuthNeeded
	pat.SubscriptionInactive = c.Auth.SubscriptionInactive
	pat.FatalLogin = c.Auth.LoginFatal
	return surflare.New(surflare.Options{
		Bin: c.Paths.SurflareBin, Timeout: c.Vendor.StatusTimeout, ConnectTimeout: c.Vendor.ConnectTimeout,
		LoginTimeout: c.Auth.LoginTimeout, Patterns: &pat, LoginMode: surflare.LoginMode(c.Auth.LoginMode),
		Username: c.Main.Username, Password: credentials.Password(d.credOpts(c)),
	})
}

// reloadableProber is the engine's Prober; a reload swaps the checker
// (probe targets, WAN device) without touching the engine.
type reloadableProber struct {
	p atomic.Pointer[health.Checker]
}

func (r *reloadableProber) Local(ctx context.Context) health.Result { return r.p.Load().Local(ctx) }
func (r *reloadableProber) Check(ctx context.Context) health.Result { return r.p.Load().Check(ctx) }

// loadSettings is the engine's LoadSettings (SIGHUP, `reload`): reread the
// file; on error the last good config stays and every FILE:LINE problem is
// logged; on success the firewall Spec and the checker follow it.
func (d *Daemon) loadSettings() (watchdog.Settings, error) {
	_, warns, err := d.cfgs.Reload()
	d.pre.setReloadErr(err)
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			d.log.Error("config: " + line)
		}
		d.log.Error("Config reload failed; keeping the last good config", "file", d.cfgs.Path())
		return watchdog.Settings{}, err
	}
	for _, w := range warns {
		d.log.Warn("config: " + w.String())
	}
	c := d.cfgs.Get()
	if spec, err := SpecFromConfig(c, logWriter{d.log}); err != nil {
		d.log.Error("Reload: firewall spec from the new config failed; tables unchanged", "err", err)
	} else if err := d.fw.SetBase(context.Background(), d.keepLearned(d.fullSpec(spec))); err != nil {
		d.log.Error("Reload: applying the firewall failed", "err", err)
	}
	d.vendor.set(d.vendorClient(c))
	d.setWAN(detectWAN(context.Background(), c, d.log))
	d.refreshNodeList()
	d.prober.p.Store(newChecker(c, d.fw.fw, d.probe, d.wan(), d.procs, d.ispAddr))
	return d.settings(c), nil
}

// settings are the engine's settings for c, with the state file in the
// run dir.
func (d *Daemon) settings(c *config.Config) watchdog.Settings {
	return watchdog.SettingsFromConfig(c)
}

// ispAddr feeds the checker's domestic-exit test: the WAN device's
// address, the one the engine takes as the ISP's at startup
// (watchdog.Network).
func (d *Daemon) ispAddr() netip.Addr {
	return d.wan().Addr
}

// tunnelView is the tunnel in use, as an engine event named it.
type tunnelView struct {
	node, transit string
	since         time.Time // when node came into use (the first event naming it)
}

// nodeSince is when node came into use, as the engine's events said; now
// when it is not the node in use (nothing seen so far is its).
func (d *Daemon) nodeSince(node string) time.Time {
	if v := d.tunnel.Load(); v != nil && v.node == node {
		return v.since
	}
	return time.Now()
}

// currentTunnel is the node and transit in use as the engine's events last
// said ("" before the first).
func (d *Daemon) currentTunnel() (node, transit string) {
	if v := d.tunnel.Load(); v != nil {
		return v.node, v.transit
	}
	return "", ""
}

// fullSpec completes a Spec from the config with what only the running
// daemon knows: the LAN probe's address and the bypass devices' addresses
// (DHCP leases and the neighbour table, as `firewall apply` finds them).
func (d *Daemon) fullSpec(s firewall.Spec) firewall.Spec {
	if d.probe != nil {
		s.ProbeSrc = []netip.Addr{d.probe.Addr()}
	}
	if len(s.Bypass) == 0 {
		return s // no neighbour table to read
	}
	return firewall.ResolveBypassFrom(s, firewall.DHCPLeasesFile, route.HostNeighbours(context.Background()))
}

// keepLearned carries what the daemon learned at run time into a Spec
// rebuilt from the config on reload: the relays (package relays) are in
// no config, and the learner never learns an address twice, so dropping
// them would leave the moat and the loop guard's siblings without them
// until a restart.
func (d *Daemon) keepLearned(s firewall.Spec) firewall.Spec {
	for _, p := range d.fw.Base().Relays {
		if !slices.Contains(s.Relays, p) {
			s.Relays = append(s.Relays, p)
		}
	}
	return s
}

// Run is the daemon's life: lock, assemble, supervise, stop. It returns
// when the engine has stopped (ctx cancelled = SIGTERM/SIGINT).
func (d *Daemon) Run(ctx context.Context) error {
	surflare.CloseInheritedOnExec() // E5: nothing the daemon inherited reaches the vendor
	setMemoryLimit(d.log)
	if n, err := trimBinaryPages(); err != nil {
		d.log.Debug("Binary pages not trimmed", "err", err)
	} else {
		d.log.Debug("Binary pages trimmed", "bytes", n)
	}
	c := d.cfgs.Get()
	runDir := c.Paths.RunDir
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return fmt.Errorf("run dir: %w", err)
	}
	lock, err := runfiles.AcquireLock(runDir)
	if err != nil {
		return err
	}
	defer func() {
		if err := lock.Release(); err != nil {
			d.log.Warn("Releasing the instance lock failed", "err", err)
		}
	}()
	defer d.procs.listen.close()
	d.removeStaleHandover(runDir)
	d.log.Info("surflare-watchdog starting", "config", d.cfgs.Path(), "role", d.role, "mode", c.Main.Mode, "pid", os.Getpid())

	auxCtx, auxCancel := context.WithCancel(context.WithoutCancel(ctx))
	defer auxCancel()

	spec, err := SpecFromConfig(c, logWriter{d.log})
	if err != nil {
		return fmt.Errorf("firewall spec: %w", err)
	}
	d.setWAN(detectWAN(ctx, c, d.log))
	if d.role == string(config.RoleRouter) {
		lan := netip.Prefix{}
		for _, p := range c.Main.LANSubnets {
			if p.Addr().Is4() {
				lan = p
				break
			}
		}
		if d.probe, err = route.NewProbeNS(c.Main.LANInterface, lan); err != nil {
			d.log.Error("Probe 7 disabled: the LAN probe namespace could not be made; LAN-path faults will show only as client failures", "err", err)
		} else {
			d.log.Info("Probe 7 runs from a namespace on the LAN", "bridge", c.Main.LANInterface, "addr", d.probe.Addr().String())
			defer d.probe.Close()
		}
	}
	d.fw = newFWAdapter(auxCtx, firewall.New(), d.fullSpec(spec))
	d.vendor = newReloadableVendor(d.vendorClient(c))
	d.startNodeList(auxCtx)
	d.prober = &reloadableProber{}
	d.prober.p.Store(newChecker(c, d.fw.fw, d.probe, d.wan(), d.procs, d.ispAddr))

	d.startFast(auxCtx, c)
	if err := d.startDetectors(auxCtx, c); err != nil {
		return err
	}
	defer d.stopDetectors()

	// The stale-proxy step finds the proxy by name in our network
	// namespace only (d.procs.scan), so a lab's daemon never kills another
	// lab's proxy; a listener on the port is ours by construction
	// (/proc/net/tcp is per namespace).
	steps := watchdog.CrashCleanup(watchdog.CleanupHooks{
		Procs:            d.procs.scan,
		ProxyName:        c.Vendor.ProxyComm,
		ProxyPort:        int(c.Vendor.ProxyPort),
		RunDir:           runDir,
		OrphanedTrace:    func(ctx context.Context) error { return d.fw.fw.TraceStop(ctx) },
		FlushVendor:      d.fw.FlushVendor,
		StaleFwmarkRules: route.DedupeTunnel,
	})
	deps := watchdog.Deps{
		Vendor: d.vendor, Firewall: d.fw, Prober: d.prober,
		ConnKiller: &route.ConnKiller{LANIf: c.Main.LANInterface, Keep: d.procs.socketsOf(c.Vendor.ProxyComm), Log: d.log},
		Network:    network{wan: d.wan},
		Detectors:  d.dets,
		Inbox:      d.inbox,
		Cleanup:    steps,
		Preflight:  d.preflighter(),
		// A restart adopts a healthy tunnel the kernel holds whole.
		TunnelIntact: d.tunnelIntact,
		LoadSettings: func() (watchdog.Settings, error) {
			return d.loadSettings()
		},
	}
	if d.dets.lh != nil {
		deps.NodeHealth = d.dets.lh
	}
	if d.dets.storm503 != nil {
		deps.Override = d.dets.override503
	}
	deps.Corroborator = d.corroborator()
	deps.Nodes = d.nodeList
	if d.w, err = watchdog.New(d.settings(c), deps); err != nil {
		return err
	}

	d.goAux(auxCtx, "control socket", func(ctx context.Context) error {
		return serveControl(ctx, runDir, d)
	})
	d.startEvents(auxCtx)
	d.startHistory(auxCtx)
	d.startFrontends(auxCtx, c)
	d.startChnroute(auxCtx, c)
	d.startIdleProbe(auxCtx, c)
	d.startStorm503Probe(auxCtx, c) // before Run: the engine's Override reads it

	wctx, wcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer wcancel()
	go d.stopOnSignal(ctx, wcancel)
	go d.handoverOnQuit(auxCtx, wcancel)
	go d.forwardSignals(auxCtx)
	err = d.w.Run(wctx)

	auxCancel()
	done := make(chan struct{})
	go func() { d.aux.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Second):
		d.log.Warn("Stop: some helpers did not end within 1 s")
	}
	if err != nil {
		return err
	}
	d.log.Info("surflare-watchdog stopped")
	return nil
}

// errStopTimeout: the stop took longer than the 5 s promise allows; the
// kernel state (kill switch) is already in place, so exiting is safe.
var errStopTimeout = errors.New("stop did not finish in time")
