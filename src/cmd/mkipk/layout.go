package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"surflare-watchdog/src/ipk"
	"surflare-watchdog/src/pkgspec"
)

// Names and paths of what we ship.
const (
	corePackage = "surflare-watchdog"
	luciPackage = "luci-app-surflare"

	binaryPath   = "/usr/bin/surflare-watchdog"
	configPath   = "/etc/config/surflare"
	initScript   = "/etc/init.d/surflare-watchdog"
	bootLockInit = "/etc/init.d/surflare-bootlock"
	hotplugPath  = "/etc/hotplug.d/iface/90-surflare"
	dnsmasqHook  = "/etc/dnsmasq.d/surflare-smartdns.conf"

	maintainer = "surflare-watchdog project"
)

// coreDepends are the packages the daemon needs on the router, beyond libc
// (which every OpenWrt has): nft tproxy/socket expressions for the LAN
// transparent proxy, nft nat for the DNS redirect, inet-diag for the early
// detector's tcp_info (sock_diag), conntrack-netlink to cut connections
// pinned to a dead node, nfnetlink-log for the loop guard's kernel events
// (without it the guard falls back to polling), ca-bundle for the TLS
// probes, and firewall4 for the nftables.d includes and the nft tool the
// boot lock loads with.
var coreDepends = []string{
	"libc", "kmod-nft-tproxy", "kmod-nft-socket", "kmod-nft-nat",
	"kmod-inet-diag", "kmod-nf-conntrack-netlink", "kmod-nfnetlink-log", "ca-bundle", "firewall4",
}

var luciDepends = []string{"libc", corePackage, "luci-base"}

// defaultPkgArch maps the Makefile's ARCH (a CPU family, what GOARCH is
// derived from) to the opkg architecture a package is labelled with. opkg
// only installs a package whose Architecture is listed in the router's
// opkg.conf (`opkg print-architecture`), and those names carry the CPU
// variant: a MT7621 router says mipsel_24kc, a Raspberry Pi 4 aarch64_cortex-a72.
// The Go binary is the same for every variant of a family, so any of them
// can be given with --arch; these are the common defaults.
var defaultPkgArch = map[string]string{
	"x86_64":  "x86_64",
	"aarch64": "aarch64_generic",
	"arm":     "arm_cortex-a7_neon-vfpv4",
	"mipsel":  "mipsel_24kc",
	"mips":    "mips_24kc",
	"i386":    "i386_pentium4",
}

// pkgArch returns the opkg architecture for a family name or passes a full
// architecture name through.
func pkgArch(arch string) string {
	if a, ok := defaultPkgArch[arch]; ok {
		return a
	}
	return arch
}

// normalizeVersion turns a git tag like v1.2.3 into 1.2.3, the form opkg
// compares sensibly; anything else is used as given (Build validates it).
func normalizeVersion(v string) string {
	if len(v) > 1 && v[0] == 'v' && v[1] >= '0' && v[1] <= '9' {
		return v[1:]
	}
	return v
}

// buildCore assembles the daemon's package: the static binary, everything
// under files/etc and files/usr (other helpers add nftables.d includes and
// the boot lock ruleset there), and the maintainer scripts.
func buildCore(root, version, arch string, binary []byte) (*pkgspec.Package, error) {
	if err := ipk.CheckStaticBinary(binary, arch); err != nil {
		return nil, fmt.Errorf("binary for %s: %w", arch, err)
	}
	p := &pkgspec.Package{
		Name:       corePackage,
		Version:    version,
		Arch:       arch,
		Depends:    coreDepends,
		Section:    "net",
		Maintainer: maintainer,
		Description: "Watchdog for the Surflare VPN: health checks, exit node rotation and an\n" +
			"nftables kill switch that stays armed through every failover, with LAN\n" +
			"transparent proxying, DNS enforcement, bypass and a boot-time lockdown.",
		Files: []pkgspec.File{{Path: binaryPath, Mode: 0o755, Data: binary}},
	}
	for _, dir := range []string{"etc", "usr"} {
		src := filepath.Join(root, "files", dir)
		if _, err := os.Stat(src); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		files, err := pkgspec.ReadTree(src, "/"+dir)
		if err != nil {
			return nil, fmt.Errorf("files/%s: %w", dir, err)
		}
		p.Files = append(p.Files, files...)
	}
	for i := range p.Files {
		applyRules(&p.Files[i])
	}
	for _, must := range []string{configPath, initScript, bootLockInit, hotplugPath, dnsmasqHook} {
		if _, ok := p.File(must); !ok {
			return nil, fmt.Errorf("files%s is missing from the source tree", must)
		}
	}
	var err error
	if p.PostInstall, err = readScript(root, "surflare-watchdog.postinst"); err != nil {
		return nil, err
	}
	if p.PreRemove, err = readScript(root, "surflare-watchdog.prerm"); err != nil {
		return nil, err
	}
	return p, nil
}

// applyRules sets what OpenWrt's INSTALL_* macros and the package's
// conffiles would: UCI configs are private conffiles (0600: the file may
// hold account names); the SmartDNS configuration and its dnsmasq hook are
// conffiles too, since users edit their upstreams and domain lists (an
// upgrade must not overwrite them); init and uci-defaults scripts are
// executable, hotplug scripts are sourced (0644).
func applyRules(f *pkgspec.File) {
	switch dir := path.Dir(f.Path); {
	case dir == "/etc/config":
		f.Mode, f.Conffile = 0o600, true
	case dir == "/etc/smartdns" && strings.HasSuffix(f.Path, ".conf"), f.Path == dnsmasqHook:
		f.Conffile = true
	case dir == "/etc/init.d" || dir == "/etc/uci-defaults":
		f.Mode = 0o755
	case strings.HasPrefix(dir, "/etc/hotplug.d/"):
		f.Mode = 0o644
	}
}

// buildLuci assembles the LuCI app: htdocs/ lands in /www, root/ in /.
// The views are optional here (another part of the project writes them);
// the menu and the ACL are not.
func buildLuci(root, version string) (*pkgspec.Package, error) {
	p := &pkgspec.Package{
		Name:        luciPackage,
		Version:     version,
		Arch:        pkgspec.AllArch,
		Depends:     luciDepends,
		Section:     "luci",
		Maintainer:  maintainer,
		Description: "LuCI support for the Surflare VPN watchdog: live status, settings, nodes and log.",
	}
	app := filepath.Join(root, luciPackage)
	for _, tree := range []struct{ src, dst string }{{"htdocs", "/www"}, {"root", "/"}} {
		src := filepath.Join(app, tree.src)
		if _, err := os.Stat(src); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		files, err := pkgspec.ReadTree(src, tree.dst)
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", luciPackage, tree.src, err)
		}
		p.Files = append(p.Files, files...)
	}
	for _, must := range []string{luciMenu, luciACL, luciUcitrack} {
		if _, ok := p.File(must); !ok {
			return nil, fmt.Errorf("%s/root%s is missing", luciPackage, must)
		}
	}
	// One script for both: drop LuCI's caches and reload rpcd's ACLs.
	script, err := readScript(root, "luci-app-surflare.postinst")
	if err != nil {
		return nil, err
	}
	p.PostInstall, p.PostRemove = script, script
	return p, nil
}

const (
	luciMenu     = "/usr/share/luci/menu.d/luci-app-surflare.json"
	luciACL      = "/usr/share/rpcd/acl.d/luci-app-surflare.json"
	luciUcitrack = "/usr/share/ucitrack/luci-app-surflare.json"
)

// readScript loads a maintainer script from openwrt/ipk/.
func readScript(root, file string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(root, "openwrt", "ipk", file))
	if err != nil {
		return nil, fmt.Errorf("maintainer script: %w", err)
	}
	return b, nil
}
