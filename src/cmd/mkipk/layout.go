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
func buildCore(root, version, arch string, binary []byte) (*ipk.Package, error) {
	if err := ipk.CheckStaticBinary(binary, arch); err != nil {
		return nil, fmt.Errorf("binary for %s: %w", arch, err)
	}
	p := &ipk.Package{
		Control: ipk.Control{Fields: []ipk.Field{
			{Name: "Package", Value: corePackage},
			{Name: "Version", Value: version},
			{Name: "Depends", Value: strings.Join(coreDepends, ", ")},
			{Name: "Source", Value: "openwrt"},
			{Name: "SourceName", Value: corePackage},
			{Name: "Section", Value: "net"},
			{Name: "Architecture", Value: arch},
			{Name: "Maintainer", Value: maintainer},
			{Name: "Description", Value: "Watchdog for the Surflare VPN: health checks, exit node rotation and an\n" +
				"nftables kill switch that stays armed through every failover, with LAN\n" +
				"transparent proxying, DNS enforcement, bypass and a boot-time lockdown."},
		}},
		Files: []ipk.File{{Path: binaryPath, Mode: 0o755, Data: binary}},
	}
	for _, dir := range []string{"etc", "usr"} {
		src := filepath.Join(root, "files", dir)
		if _, err := os.Stat(src); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := p.AddTree(src, "/"+dir); err != nil {
			return nil, fmt.Errorf("files/%s: %w", dir, err)
		}
	}
	for i := range p.Files {
		applyRules(&p.Files[i])
	}
	for _, must := range []string{configPath, initScript, bootLockInit, hotplugPath} {
		if !hasFile(p, must) {
			return nil, fmt.Errorf("files%s is missing from the source tree", must)
		}
	}
	scripts, err := readScripts(root, map[string]string{"postinst": "surflare-watchdog.postinst", "prerm": "surflare-watchdog.prerm"})
	if err != nil {
		return nil, err
	}
	p.Scripts = scripts
	return p, nil
}

// applyRules sets what OpenWrt's INSTALL_* macros would: UCI configs are
// private conffiles (0600: the file may hold account names), init and
// uci-defaults scripts are executable, hotplug scripts are sourced (0644).
func applyRules(f *ipk.File) {
	switch dir := path.Dir(f.Path); {
	case dir == "/etc/config":
		f.Mode, f.Conffile = 0o600, true
	case dir == "/etc/init.d" || dir == "/etc/uci-defaults":
		f.Mode = 0o755
	case strings.HasPrefix(dir, "/etc/hotplug.d/"):
		f.Mode = 0o644
	}
}

// buildLuci assembles the LuCI app: htdocs/ lands in /www, root/ in /.
// The views are optional here (another part of the project writes them);
// the menu and the ACL are not.
func buildLuci(root, version string) (*ipk.Package, error) {
	p := &ipk.Package{
		Control: ipk.Control{Fields: []ipk.Field{
			{Name: "Package", Value: luciPackage},
			{Name: "Version", Value: version},
			{Name: "Depends", Value: strings.Join(luciDepends, ", ")},
			{Name: "Source", Value: luciPackage},
			{Name: "SourceName", Value: luciPackage},
			{Name: "Section", Value: "luci"},
			{Name: "Architecture", Value: "all"},
			{Name: "Maintainer", Value: maintainer},
			{Name: "Description", Value: "LuCI support for the Surflare VPN watchdog: live status, settings, nodes and log."},
		}},
	}
	app := filepath.Join(root, luciPackage)
	for _, tree := range []struct{ src, dst string }{{"htdocs", "/www"}, {"root", "/"}} {
		src := filepath.Join(app, tree.src)
		if _, err := os.Stat(src); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := p.AddTree(src, tree.dst); err != nil {
			return nil, fmt.Errorf("%s/%s: %w", luciPackage, tree.src, err)
		}
	}
	for _, must := range []string{luciMenu, luciACL, luciUcitrack} {
		if !hasFile(p, must) {
			return nil, fmt.Errorf("%s/root%s is missing", luciPackage, must)
		}
	}
	scripts, err := readScripts(root, map[string]string{"postinst": "luci-app-surflare.postinst", "postrm": "luci-app-surflare.postinst"})
	if err != nil {
		return nil, err
	}
	p.Scripts = scripts
	return p, nil
}

const (
	luciMenu     = "/usr/share/luci/menu.d/luci-app-surflare.json"
	luciACL      = "/usr/share/rpcd/acl.d/luci-app-surflare.json"
	luciUcitrack = "/usr/share/ucitrack/luci-app-surflare.json"
)

// readScripts loads maintainer scripts from openwrt/ipk/.
func readScripts(root string, names map[string]string) (map[string][]byte, error) {
	out := map[string][]byte{}
	for script, file := range names {
		b, err := os.ReadFile(filepath.Join(root, "openwrt", "ipk", file))
		if err != nil {
			return nil, fmt.Errorf("maintainer script %s: %w", script, err)
		}
		out[script] = b
	}
	return out, nil
}

func hasFile(p *ipk.Package, target string) bool {
	for _, f := range p.Files {
		if f.Path == target {
			return true
		}
	}
	return false
}
