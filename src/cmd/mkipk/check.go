package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

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
		if !slices.Contains(a.Conffiles, configPath) {
			bad("conffiles lacks %s: a user's config would be overwritten on upgrade", configPath)
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
