package lab

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"surflare-watchdog/src/lab/fakes"
	"surflare-watchdog/src/owrtbox"
)

// The lab with real OpenWrt as its router (Options.OpenWrt): the box
// (src/owrtbox) boots in the lab's router namespace, so the lab's LAN
// clients, its WAN link and its internet surround real procd, netifd, fw4
// and opkg. What changes against the lab's own router:
//
//   - The router's addresses and default routes are netifd's: the lab only
//     makes the links (br-lan with its client ports, pppoe-wan) and writes
//     /etc/config/network naming them. br-lan stays the lab's plain bridge,
//     named as an existing device: netifd cannot create bridges here (the
//     box's kernel rejects bridge VLAN filtering, see the box's README).
//   - fw4 is the real one (its wan zone masquerades); the lab's fw4
//     stand-in table is not made.
//   - The lab directory is bound into the box at its own path, so the fakes
//     (linked as /usr/bin/surflare and /usr/bin/surflare-proxy) find lab.json
//     and faults.json there, and faults injected from the host reach them.
//   - The daemon is the one the package installs, run by procd with
//     /etc/config/surflare (the lab config with the box's own paths).

// OpenWrt selects and shapes the OpenWrt router.
type OpenWrt struct {
	// BoxDir holds the box's scripts; empty means owrtbox.Locate(RepoRoot).
	BoxDir string
	// IPKs are installed with the box's opkg once the router is up; empty
	// means the newest surflare-watchdog and luci-app-surflare packages
	// in RepoRoot/build/ipk (`make ipk`).
	IPKs []string
	// NoInstall boots and configures the router without installing the
	// packages (tests that install them as their first step).
	NoInstall bool
	// Root boots this root read-write (owrtbox.Options.Root), so that the
	// package and its config survive a reboot.
	Root string
}

// Box is the OpenWrt router of a lab made with Options.OpenWrt, nil for a
// lab with its own router.
func (l *Lab) Box() *owrtbox.Box { return l.box }

// BoxNetworkConfig is /etc/config/network for the lab's router: lan on the
// lab's br-lan, wan (IPv4 and IPv6, static) on pppoe-wan.
func BoxNetworkConfig() string {
	mask := func(p netip.Prefix) string {
		m := ^uint32(0) << (32 - p.Bits())
		return fmt.Sprintf("%d.%d.%d.%d", byte(m>>24), byte(m>>16), byte(m>>8), byte(m))
	}
	var f uciFile
	f.section("interface", "loopback").opt("device", "lo").opt("proto", "static").
		opt("ipaddr", "127.0.0.1").opt("netmask", "255.0.0.0")
	f.section("globals", "globals").opt("packet_steering", "0")
	f.section("interface", "lan").opt("device", IfLAN).opt("proto", "static").
		opt("ipaddr", LANRouter.String()).opt("netmask", mask(LANNet)).
		opt("ip6addr", pfx(LANRouter6, LANNet6).String())
	f.section("interface", "wan").opt("device", IfWAN).opt("proto", "static").
		opt("ipaddr", WANRouter.String()).opt("netmask", mask(WANNet)).
		opt("gateway", WANGateway.String()).
		opt("ip6addr", pfx(WANRouter6, WANNet6).String()).opt("ip6gw", WANGw6.String())
	return "# The lab's router network (src/lab/openwrt.go): lan and wan on the lab's links.\n" +
		strings.SplitN(f.String(), "\n", 3)[2]
}

// BoxDaemonSets are the overrides that turn the lab config into the box's
// /etc/config/surflare: the vendor client where a router has it (the fake,
// linked there), the daemon's run directory and ubus socket where procd
// and ubusd have them.
var BoxDaemonSets = []string{
	"surflare.paths.surflare_bin=/usr/bin/" + fakes.CLIName,
	"surflare.paths.run_dir=/run",
	"surflare.paths.ubus_socket=/var/run/ubus/ubus.sock",
}

// BoxDaemonConfig is /etc/config/surflare for the lab's OpenWrt router,
// with the overrides sets applied after BoxDaemonSets.
func (l *Lab) BoxDaemonConfig(sets ...string) (string, error) {
	f := labConfig(l)
	for _, s := range append(append([]string(nil), BoxDaemonSets...), sets...) {
		if err := f.set(s); err != nil {
			return "", err
		}
	}
	return strings.Replace(f.String(), "surflare-lab up --set", "uci set", 1), nil
}

// NewestIPKs returns the newest surflare-watchdog (x86_64) and
// luci-app-surflare packages in dir, as `make ipk` leaves them.
func NewestIPKs(dir string) ([]string, error) {
	var out []string
	for _, pat := range []string{"surflare-watchdog_*_x86_64.ipk", "luci-app-surflare_*_all.ipk"} {
		m, _ := filepath.Glob(filepath.Join(dir, pat))
		if len(m) == 0 {
			return nil, fmt.Errorf("no %s in %s: run make ipk", pat, dir)
		}
		sort.Slice(m, func(i, j int) bool {
			a, _ := os.Stat(m[i])
			b, _ := os.Stat(m[j])
			return a.ModTime().Before(b.ModTime())
		})
		out = append(out, m[len(m)-1])
	}
	return out, nil
}

// bootOpenWrt boots the box in the router namespace and makes it the lab's
// router: network config, lab directory, vendor fakes, daemon config, and
// (unless NoInstall) the packages.
func (l *Lab) bootOpenWrt(ctx context.Context, o Options) error {
	ow := o.OpenWrt
	root := o.RepoRoot
	if root == "" {
		wd, _ := os.Getwd()
		r, err := FindRepoRoot(wd)
		if err != nil {
			return err
		}
		root = r
	}
	dir := ow.BoxDir
	if dir == "" {
		d, err := owrtbox.Locate(root)
		if err != nil {
			return err
		}
		dir = d
	}
	ipks := ow.IPKs
	if len(ipks) == 0 && !ow.NoInstall {
		m, err := NewestIPKs(filepath.Join(root, "build", "ipk"))
		if err != nil {
			return err
		}
		ipks = m
	}
	t0 := time.Now()
	// The lab directory is bound in at every boot, before the services
	// start: the daemon started at boot (S21) runs the fakes from it.
	bind := func(b *owrtbox.Box) error { return b.BindIn(l.Dir, l.Dir) }
	b, err := owrtbox.Boot(ctx, dir, l.NSName(RoleRouter), owrtbox.Options{Root: ow.Root, OnStart: bind})
	if err != nil {
		return err
	}
	l.box = b
	l.log.Info("OpenWrt router booted", "pid", b.PID, "took", time.Since(t0).Round(time.Millisecond))
	if err := l.setupBox(ctx); err != nil {
		return err
	}
	if ow.NoInstall {
		return nil
	}
	if _, err := b.Install(ctx, "install", ipks...); err != nil {
		return err
	}
	_, err = l.WaitDaemon(ctx, 60*time.Second, func(s DaemonState) bool { return s.State != "starting" })
	return err
}

// setupBox makes a freshly booted box the lab's router: the network config
// applied through reload_config (as a user's edit is) with lan and wan up,
// the fakes in place of the vendor client, the daemon's config and the
// account password.
func (l *Lab) setupBox(ctx context.Context) error {
	b := l.box
	if err := b.WriteFile("/etc/config/network", []byte(BoxNetworkConfig()), 0o644); err != nil {
		return err
	}
	// netifd fails to claim a second device that existed before it
	// started, before it ever claimed it (DEVICE_CLAIM_FAILED on the wan,
	// with lan up; through reload and restart alike). A link that appears
	// while it runs, as a USB modem's does, is claimed: plug the WAN in
	// now.
	if err := l.replugWAN(); err != nil {
		return err
	}
	if _, err := b.Exec(ctx, "reload_config"); err != nil {
		return err
	}
	if err := l.WaitBoxInterfaces(ctx, 60*time.Second, "lan", "wan"); err != nil {
		return err
	}
	for _, name := range []string{fakes.CLIName, fakes.ProxyName} {
		if _, err := b.Exec(ctx, "ln -sf "+owrtbox.Quote(l.Path(dirBin, name))+" /usr/bin/"+name); err != nil {
			return err
		}
	}
	cfg, err := l.BoxDaemonConfig(l.sets...)
	if err != nil {
		return err
	}
	if err := b.WriteFile("/etc/config/surflare", []byte(cfg), 0o600); err != nil {
		return err
	}
	return b.WriteFile("/etc/surflare/credentials", []byte("password="+fakes.LabPassword+"\n"), 0o600)
}

// WaitBoxInterfaces waits until netifd reports every named interface up.
func (l *Lab) WaitBoxInterfaces(ctx context.Context, timeout time.Duration, ifaces ...string) error {
	for _, i := range ifaces {
		script := fmt.Sprintf(`ubus call network.interface.%s status | jsonfilter -e '@.up' | grep -qx true`, i)
		if _, err := l.box.WaitFor(ctx, timeout, script); err != nil {
			out, _ := l.box.Run(ctx, "ifstatus "+i+"; logread | tail -20")
			return fmt.Errorf("netifd interface %s not up: %w\n%s", i, err, out.Out)
		}
	}
	return nil
}

// boxDaemonStatus is DaemonStatus on the OpenWrt router: the installed
// binary's `status --json`, run in the box.
func (l *Lab) boxDaemonStatus(ctx context.Context) ([]byte, error) {
	r, err := l.box.Run(ctx, "/usr/bin/surflare-watchdog status --json 2>/dev/null")
	if err != nil {
		return nil, err
	}
	if r.Code != 0 {
		return nil, fmt.Errorf("surflare-watchdog status in the box exited %d: %s", r.Code, strings.TrimSpace(r.Out))
	}
	return []byte(r.Out), nil
}

// startBoxDaemon is StartDaemon on the OpenWrt router: with sets, the
// box's config is rewritten first; then procd (re)starts the service.
func (l *Lab) startBoxDaemon(ctx context.Context, sets []string) (int, error) {
	if len(sets) > 0 {
		cfg, err := l.BoxDaemonConfig(sets...)
		if err != nil {
			return 0, err
		}
		if err := l.box.WriteFile("/etc/config/surflare", []byte(cfg), 0o600); err != nil {
			return 0, err
		}
	}
	if _, err := l.box.Exec(ctx, "/etc/init.d/surflare-watchdog restart"); err != nil {
		return 0, err
	}
	st, err := l.WaitDaemon(ctx, 60*time.Second, func(s DaemonState) bool { return s.State != "starting" })
	if err != nil {
		return 0, err
	}
	return st.PID, nil
}

// stopBoxDaemon is StopDaemon on the OpenWrt router: procd stops the
// service (SIGTERM) and the call returns once the process is gone.
func (l *Lab) stopBoxDaemon(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	if _, err := l.box.Exec(ctx, "/etc/init.d/surflare-watchdog stop"); err != nil {
		return 0, err
	}
	_, err := l.box.WaitFor(ctx, 20*time.Second, "! pidof surflare-watchdog >/dev/null")
	return time.Since(start), err
}

// closeBox shuts the box down (before the namespaces go).
func (l *Lab) closeBox() error {
	if l.box == nil || l.box.PID == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return l.box.Shutdown(ctx)
}

// replugWAN replaces the WAN link (router pppoe-wan, internet isp0) with a
// new one, without router addresses: netifd configures them.
func (l *Lab) replugWAN() error {
	hr, err := netlinkHandle(l.ns[RoleRouter])
	if err != nil {
		return err
	}
	defer hr.Close()
	hi, err := netlinkHandle(l.ns[RoleInternet])
	if err != nil {
		return err
	}
	defer hi.Close()
	return l.wireWAN(hr, hi, nil)
}
