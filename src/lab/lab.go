package lab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vishvananda/netns"

	"surflare-watchdog/src/owrtbox"
)

// NamePrefix starts every lab's prefix, so Sweep can recognise lab
// namespaces and directories left by crashed runs.
const NamePrefix = "swl"

// Options shape a lab. The zero value is a working two-client lab with a
// random prefix, binaries built from the enclosing module.
type Options struct {
	// Prefix names the namespaces (<Prefix>-router, …); it must start with
	// NamePrefix. Empty means NamePrefix + 5 random hex digits.
	Prefix string
	// Clients is the number of LAN clients (1..len(LANClient)); 0 means 2.
	Clients int
	// BinDir holds prebuilt binaries (see Build) to link into Dir/bin;
	// empty means build them from RepoRoot.
	BinDir string
	// RepoRoot is the module root to build from; empty means found by
	// walking up from the working directory to go.mod.
	RepoRoot string
	// NoServers skips building the binaries and starting the internet-side
	// servers: topology, lab tables and kernel faults only.
	NoServers bool
	// Set holds surflare.SECTION.OPTION=VALUE overrides for the daemon's
	// lab config (see WriteDaemonConfig).
	Set []string
	// DNS starts the router's real resolvers (dnsmasq on :53 forwarding to
	// SmartDNS on :6053, the shipped configuration; see StartResolvers).
	// Off by default: most tests do not need them and they cost ~100 ms.
	DNS bool
	// OpenWrt makes the router namespace host the real OpenWrt userland
	// (the box beside the checkout) instead of the lab's own router
	// processes; nil keeps the lab's router. See openwrt.go.
	OpenWrt *OpenWrt
	// Vendor holds KEY=VALUE knobs for the fake vendor binaries and the
	// account API (fakes.Knobs; surflare-lab up --vendor KEY=VALUE).
	Vendor []string
	// Log receives progress; nil means slog.Default.
	Log *slog.Logger
}

// Lab is a running lab. Close removes everything it made.
type Lab struct {
	Prefix string
	Dir    string
	// UpTime is how long Up took to build the namespaces and start the
	// internet servers, excluding the build of the binaries.
	UpTime time.Duration
	// BuildTime is how long preparing the binaries took.
	BuildTime time.Duration

	log     *slog.Logger
	ns      map[string]netns.NsHandle
	clients []Client
	owned   bool         // this process created the lab (Close tears it down)
	openwrt bool         // the router is OpenWrt: netifd and fw4 configure it
	box     *owrtbox.Box // the OpenWrt router (Options.OpenWrt), or nil
	sets    []string     // Options.Set, for the OpenWrt router's config

	stopReaper context.CancelFunc // ends reapAdopted (owned labs)

	mu        sync.Mutex
	procs     []*proc
	closed    bool
	faultMu   sync.Mutex // serialises fault changes (faults.json, nft)
	lossPct   int
	blackhole map[string]bool
}

// Up builds a lab: directory, binaries, namespaces, links, addresses, lab
// firewall tables, lab.json/faults.json and the internet servers. On error
// everything already made is removed.
func Up(ctx context.Context, o Options) (*Lab, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the lab needs root (network namespaces)")
	}
	Sweep(o.Log)
	if err := BecomeSubreaper(); err != nil {
		return nil, fmt.Errorf("becoming subreaper: %w", err)
	}
	l, err := newLab(o)
	if err != nil {
		return nil, err
	}
	// A random prefix can meet one in use (another run's lab, or one a
	// crashed run left that Sweep spared): take another rather than fail,
	// and never let Close remove what another lab owns.
	for try := 0; o.Prefix == "" && l.prefixTaken() && try < 8; try++ {
		if l, err = newLab(o); err != nil {
			return nil, err
		}
	}
	if l.prefixTaken() {
		return nil, fmt.Errorf("lab prefix %s is in use (its directory or namespaces exist)", l.Prefix)
	}
	l.owned = true
	var reapCtx context.Context
	reapCtx, l.stopReaper = context.WithCancel(context.Background())
	go reapAdopted(reapCtx)
	if err := l.up(ctx, o); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

func newLab(o Options) (*Lab, error) {
	if o.Prefix == "" {
		var b [3]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("random prefix: %w", err)
		}
		o.Prefix = NamePrefix + hex.EncodeToString(b[:])[:5]
	}
	if !strings.HasPrefix(o.Prefix, NamePrefix) || strings.Contains(o.Prefix, "-") || len(o.Prefix) > 10 {
		return nil, fmt.Errorf("lab prefix %q: must start with %q, have no '-', be at most 10 characters", o.Prefix, NamePrefix)
	}
	if o.Clients == 0 {
		o.Clients = 2
	}
	if o.Clients < 1 || o.Clients > len(LANClient) {
		return nil, fmt.Errorf("lab clients %d: must be 1..%d", o.Clients, len(LANClient))
	}
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	l := &Lab{
		Prefix:    o.Prefix,
		Dir:       DefaultDir(o.Prefix),
		log:       log.With("subsystem", "lab", "lab", o.Prefix),
		ns:        map[string]netns.NsHandle{},
		blackhole: map[string]bool{},
		openwrt:   o.OpenWrt != nil,
	}
	for i := range o.Clients {
		mac, _ := net.ParseMAC(ClientMAC(i))
		l.clients = append(l.clients, Client{Role: clientRole(i), Addr: LANClient[i], Addr6: ClientAddr6(i), MAC: mac})
	}
	return l, nil
}

// DefaultDir is the lab directory of a prefix: $TMPDIR/surflare-lab-PREFIX
// (fixed, so Sweep and Attach find every lab from its prefix alone).
func DefaultDir(prefix string) string {
	return filepath.Join(os.TempDir(), "surflare-lab-"+prefix)
}

func (l *Lab) up(ctx context.Context, o Options) error {
	if err := l.makeDir(); err != nil {
		return err
	}
	t0 := time.Now()
	if !o.NoServers {
		if err := l.installBinaries(ctx, o); err != nil {
			return err
		}
	}
	l.BuildTime = time.Since(t0)

	t0 = time.Now()
	roles := l.roles()
	names := make([]string, len(roles))
	for i, r := range roles {
		names[i] = l.NSName(r)
	}
	hs, err := createNamed(names)
	if err != nil {
		return err
	}
	for i, r := range roles {
		l.ns[r] = hs[i]
	}
	l.sets = o.Set
	if err := l.buildTopology(); err != nil {
		return fmt.Errorf("building topology: %w", err)
	}
	if err := l.installFirewall(); err != nil {
		return err
	}
	if err := l.writeLabFiles(o.Vendor); err != nil {
		return err
	}
	if err := WriteDaemonConfig(l, o.Set); err != nil {
		return err
	}
	if !o.NoServers {
		if err := l.startServers(ctx); err != nil {
			return err
		}
	}
	if o.OpenWrt != nil {
		if err := l.bootOpenWrt(ctx, o); err != nil {
			return err
		}
	}
	if o.DNS {
		if err := l.StartResolvers(ctx, DNSOptions{RepoRoot: o.RepoRoot}); err != nil {
			return err
		}
	}
	l.UpTime = time.Since(t0)
	l.log.Info("lab up", "dir", l.Dir, "clients", len(l.clients), "up", l.UpTime.Round(time.Millisecond), "build", l.BuildTime.Round(time.Millisecond))
	return nil
}

// roles lists every namespace role of this lab: clients, router, internet.
func (l *Lab) roles() []string {
	var r []string
	for _, c := range l.clients {
		r = append(r, c.Role)
	}
	if l.openwrt {
		r = append(r, RoleSwitch)
	}
	return append(r, RoleRouter, RoleInternet)
}

// NSName is the real (named) namespace of a role, e.g. "swl3a1f2-router".
func (l *Lab) NSName(role string) string { return l.Prefix + "-" + role }

// Clients describes the LAN clients (index = client number).
func (l *Lab) Clients() []Client { return append([]Client(nil), l.clients...) }

// NS returns the namespace handle of a role (owned by the lab: do not close).
func (l *Lab) NS(role string) (netns.NsHandle, error) {
	h, ok := l.ns[role]
	if !ok {
		return netns.None(), fmt.Errorf("lab %s has no namespace role %q", l.Prefix, role)
	}
	return h, nil
}

// Path returns a path inside the lab directory.
func (l *Lab) Path(elem ...string) string { return filepath.Join(append([]string{l.Dir}, elem...)...) }

// Command prepares argv to run inside a role's namespace (via `ip netns
// exec`), with the lab's bin/ first on PATH so `surflare` is the fake.
func (l *Lab) Command(role string, argv ...string) *exec.Cmd {
	return l.CommandContext(context.Background(), role, argv...)
}

// CommandContext is Command bound to ctx.
func (l *Lab) CommandContext(ctx context.Context, role string, argv ...string) *exec.Cmd {
	args := append([]string{"netns", "exec", l.NSName(role)}, argv...)
	cmd := exec.CommandContext(ctx, "ip", args...)
	cmd.Env = append(os.Environ(), "PATH="+l.Path("bin")+":"+os.Getenv("PATH"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	return cmd
}

// Exec runs argv in a role's namespace and returns its combined output; a
// non-zero exit is an error that carries the output.
func (l *Lab) Exec(ctx context.Context, role string, argv ...string) (string, error) {
	out, err := l.CommandContext(ctx, role, argv...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s in %s: %w: %s", strings.Join(argv, " "), role, err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// Close stops every lab process (also detached ones inside the lab's
// namespaces), deletes the namespaces (and with them every veth) and removes
// the lab directory. Safe to call more than once.
func (l *Lab) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	procs := l.procs
	l.mu.Unlock()
	if !l.owned {
		l.closeHandles()
		return nil
	}

	for _, p := range procs {
		p.stop(time.Second)
	}
	boxErr := l.closeBox()
	err := errors.Join(boxErr, teardown(l.Prefix, l.Dir))
	l.closeHandles()
	if l.stopReaper != nil {
		l.stopReaper()
	}
	if err == nil {
		l.log.Info("lab down")
	}
	return err
}

func (l *Lab) closeHandles() {
	for r, h := range l.ns {
		h.Close()
		delete(l.ns, r)
	}
}

// Down tears down a running lab by prefix: it asks the owner process to
// close it (SIGTERM) and, if the owner is gone or does not finish within
// a few seconds, removes everything itself.
func Down(prefix string) error {
	dir := DefaultDir(prefix)
	if ownerAlive(dir) {
		b, _ := os.ReadFile(filepath.Join(dir, ownerFile))
		var pid int
		fmt.Sscan(string(b), &pid)
		if pid > 0 && pid != os.Getpid() {
			_ = syscall.Kill(pid, syscall.SIGTERM)
			for range 100 {
				if !ownerAlive(dir) && len(listNamed(prefix+"-")) == 0 {
					return nil
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	return teardown(prefix, dir)
}

func nsFromName(name string) (netns.NsHandle, error) {
	return netns.GetFromPath(filepath.Join(netnsDir, name))
}

// teardown kills every process in the prefix's namespaces, deletes the
// namespaces and removes dir.
func teardown(prefix, dir string) error {
	names := listNamed(prefix + "-")
	killInNamespaces(names)
	var errs []error
	if dir != "" {
		if err := removeDaemonCgroup(dir); err != nil {
			errs = append(errs, err)
		}
	}
	for _, n := range names {
		if err := deleteNamed(n); err != nil {
			errs = append(errs, err)
		}
	}
	if dir != "" {
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("removing %s: %w", dir, err))
		}
	}
	return errors.Join(errs...)
}

// proc is a long-running lab process started in its own process group.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed when it has exited
}

// startProc starts cmd (already set up with Setpgid) and reaps it.
func startProc(name string, cmd *exec.Cmd) (*proc, error) {
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// stop sends SIGTERM to the process group and SIGKILL after grace.
func (p *proc) stop(grace time.Duration) {
	pid := p.cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-p.done
	}
}
