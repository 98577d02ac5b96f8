package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"surflare-watchdog/src/apk"
	"surflare-watchdog/src/ipk"
)

// checkArchive applies the generic layout rules (ipk.Lint) and what our two
// packages must contain to work on a router. It returns every problem.
func checkArchive(a *ipk.Archive) []error {
	errs := ipk.Lint(a)
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	name, _ := a.Control.Get("Package")
	arch, _ := a.Control.Get("Architecture")
	deps := map[string]bool{}
	if v, ok := a.Control.Get("Depends"); ok {
		for _, d := range ipk.ParseDepends(v) {
			deps[d.Alternatives[0]] = true
		}
	}
	needDeps := func(want []string) {
		for _, d := range want {
			if !deps[d] {
				bad("Depends lacks %s", d)
			}
		}
	}
	needFile := func(target string, mode int64) (ipk.Member, bool) {
		m, ok := a.DataFile(target)
		switch {
		case !ok || m.Type != tar.TypeReg:
			bad("%s is missing", target)
			return m, false
		case m.Mode&0o7777 != mode:
			bad("%s has mode %04o, want %04o", target, m.Mode&0o7777, mode)
		}
		return m, true
	}
	needScripts := func(names ...string) {
		for _, s := range names {
			if _, ok := a.ControlFile(s); !ok {
				bad("maintainer script %s is missing", s)
			}
		}
	}

	switch name {
	case corePackage:
		needDeps(coreDepends)
		if bin, ok := needFile(binaryPath, 0o755); ok {
			if err := ipk.CheckStaticBinary(bin.Data, arch); err != nil {
				bad("%s: %w", binaryPath, err)
			}
		}
		if init, ok := needFile(initScript, 0o755); ok && !bytes.Contains(init.Data, []byte("USE_PROCD=1")) {
			bad("%s is not a procd init script", initScript)
		}
		needFile(bootLockInit, 0o755)
		needFile(hotplugPath, 0o644)
		needFile(configPath, 0o600)
		for _, c := range []string{configPath, dnsmasqHook} {
			if !slices.Contains(a.Conffiles, c) {
				bad("conffiles lacks %s: a user's edits would be overwritten on upgrade", c)
			}
		}
		needScripts("postinst", "prerm")
	case luciPackage:
		needDeps(luciDepends)
		if arch != "all" {
			bad("Architecture %s, want all", arch)
		}
		for _, f := range []string{luciMenu, luciACL, luciUcitrack} {
			if m, ok := needFile(f, 0o644); ok && !json.Valid(m.Data) {
				bad("%s is not valid JSON", f)
			}
		}
		needScripts("postinst", "postrm")
	default:
		bad("unknown package %q: not one of ours", name)
	}
	return errs
}

// checkAPK applies to an .apk what checkArchive applies to an .ipk, plus
// OpenWrt's apk bookkeeping: NAME.list names every file, NAME.conffiles
// the conffiles and NAME.conffiles_static their shipped SHA-256.
func checkAPK(a *apk.Archive) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	needFile := func(target string, mode fs.FileMode) (apk.File, bool) {
		f, ok := a.File(target)
		switch {
		case !ok:
			bad("%s is missing", target)
		case f.Mode != mode:
			bad("%s has mode %04o, want %04o", target, f.Mode, mode)
		}
		return f, ok
	}
	needDeps := func(want []string) {
		for _, d := range want {
			if !slices.Contains(a.Depends, d) {
				bad("depends lacks %s", d)
			}
		}
	}
	needScripts := func(names ...string) {
		for _, s := range names {
			if _, ok := a.Scripts[s]; !ok {
				bad("script %s is missing", s)
			}
		}
	}
	db := "/lib/apk/packages/" + a.Name
	var listed []string
	if f, ok := needFile(db+".list", 0o644); ok {
		listed = strings.Fields(string(f.Data))
	}
	for _, f := range a.Files {
		if !strings.HasPrefix(f.Path, "/lib/apk/packages/") && !slices.Contains(listed, f.Path) {
			bad("%s.list does not list %s", db, f.Path)
		}
	}
	conffiles := map[string]bool{}
	if f, ok := a.File(db + ".conffiles"); ok {
		for _, c := range strings.Fields(string(f.Data)) {
			conffiles[c] = true
		}
	}
	if f, ok := a.File(db + ".conffiles_static"); ok {
		for _, line := range strings.Split(strings.TrimSpace(string(f.Data)), "\n") {
			p, sum, _ := strings.Cut(line, " ")
			cf, ok := a.File(p)
			got := sha256.Sum256(cf.Data)
			if !ok || !conffiles[p] || hex.EncodeToString(got[:]) != sum {
				bad("%s.conffiles_static: %q does not match a conffile and its content", db, line)
			}
		}
	} else if len(conffiles) > 0 {
		bad("%s.conffiles_static is missing", db)
	}

	switch a.Name {
	case corePackage:
		needDeps(coreDepends)
		if bin, ok := needFile(binaryPath, 0o755); ok {
			if err := ipk.CheckStaticBinary(bin.Data, a.Arch); err != nil {
				bad("%s: %w", binaryPath, err)
			}
		}
		if init, ok := needFile(initScript, 0o755); ok && !bytes.Contains(init.Data, []byte("USE_PROCD=1")) {
			bad("%s is not a procd init script", initScript)
		}
		needFile(bootLockInit, 0o755)
		needFile(hotplugPath, 0o644)
		needFile(configPath, 0o600)
		for _, c := range []string{configPath, dnsmasqHook} {
			if !conffiles[c] {
				bad("%s.conffiles lacks %s: a user's edits would be overwritten on upgrade", db, c)
			}
		}
		needScripts("post-install", "post-upgrade", "pre-deinstall")
		if s := a.Scripts["post-upgrade"]; !bytes.Contains(s, []byte("\nexport PKG_UPGRADE=1\n")) {
			bad("post-upgrade does not export PKG_UPGRADE=1: it would re-enable services a user disabled")
		}
	case luciPackage:
		needDeps(luciDepends)
		if a.Arch != apk.NoArch {
			bad("arch %s, want %s", a.Arch, apk.NoArch)
		}
		for _, f := range []string{luciMenu, luciACL, luciUcitrack} {
			if m, ok := needFile(f, 0o644); ok && !json.Valid(m.Data) {
				bad("%s is not valid JSON", f)
			}
		}
		needScripts("post-install", "post-upgrade", "post-deinstall")
	default:
		bad("unknown package %q: not one of ours", a.Name)
	}
	return errs
}
