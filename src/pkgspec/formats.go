package pkgspec

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"surflare-watchdog/src/apk"
	"surflare-watchdog/src/ipk"
)

// IPK is the package as opkg installs it: the control fields OpenWrt's
// ipkg-build writes, conffiles, and postinst/prerm/postrm.
func (p *Package) IPK() (*ipk.Package, error) {
	if err := CheckVersion(p.Version); err != nil {
		return nil, err
	}
	out := &ipk.Package{
		Control: ipk.Control{Fields: []ipk.Field{
			{Name: "Package", Value: p.Name},
			{Name: "Version", Value: p.Version},
			{Name: "Depends", Value: strings.Join(p.Depends, ", ")},
			{Name: "Source", Value: p.Name},
			{Name: "SourceName", Value: p.Name},
			{Name: "Section", Value: p.Section},
			{Name: "Architecture", Value: p.Arch},
			{Name: "Maintainer", Value: p.Maintainer},
			{Name: "Description", Value: p.Description},
		}},
		Scripts: map[string][]byte{},
	}
	for _, f := range p.Files {
		out.Files = append(out.Files, ipk.File{Path: f.Path, Mode: f.Mode, Data: f.Data, Conffile: f.Conffile})
	}
	for name, text := range map[string][]byte{"postinst": p.PostInstall, "prerm": p.PreRemove, "postrm": p.PostRemove} {
		if text != nil {
			out.Scripts[name] = text
		}
	}
	return out, nil
}

// apkDBDir is where OpenWrt's apk packages carry their own bookkeeping
// (include/package-pack.mk): NAME.list, NAME.conffiles and
// NAME.conffiles_static. sysupgrade and the conffile tools read these,
// opkg's info directory being gone.
const apkDBDir = "/lib/apk/packages/"

// APK is the package as OpenWrt 25.12's package-pack.mk makes it with
// `apk mkpkg`: "all" becomes "noarch"; the description is one line (apk
// keeps its installed database in the line-based v2 format, where a
// newline breaks the entry: "v2 database format error"); lib/apk/packages/NAME.list lists
// every file (sorted), NAME.conffiles the conffiles and
// NAME.conffiles_static each conffile with the SHA-256 it ships with; the
// scripts are post-install, post-upgrade (the same with PKG_UPGRADE=1
// exported), pre-deinstall and post-deinstall.
func (p *Package) APK() (*apk.Package, error) {
	if err := CheckVersion(p.Version); err != nil {
		return nil, err
	}
	arch := p.Arch
	if arch == AllArch {
		arch = apk.NoArch
	}
	out := &apk.Package{
		Name: p.Name, Version: p.Version, Arch: arch,
		Description: strings.Join(strings.Fields(p.Description), " "), Maintainer: p.Maintainer, Origin: p.Name,
		Depends: p.Depends, Scripts: map[string][]byte{},
	}
	var list []string
	for _, f := range p.Files {
		if strings.HasPrefix(f.Path, apkDBDir) {
			return nil, fmt.Errorf("%s: %s is the package database's, not ours to ship", f.Path, apkDBDir)
		}
		out.Files = append(out.Files, apk.File{Path: f.Path, Mode: f.Mode, Data: f.Data})
		list = append(list, f.Path)
	}
	slices.Sort(list)
	db := func(suffix string, lines []string) {
		if len(lines) == 0 {
			return
		}
		out.Files = append(out.Files, apk.File{Path: apkDBDir + p.Name + suffix, Mode: 0o644, Data: []byte(strings.Join(lines, "\n") + "\n")})
	}
	db(".list", list)
	conffiles := p.Conffiles()
	db(".conffiles", conffiles)
	var static []string
	for _, c := range conffiles {
		f, _ := p.File(c)
		sum := sha256.Sum256(f.Data)
		static = append(static, c+" "+hex.EncodeToString(sum[:]))
	}
	db(".conffiles_static", static)

	if p.PostInstall != nil {
		out.Scripts["post-install"] = p.PostInstall
		up, err := withUpgradeFlag(p.PostInstall)
		if err != nil {
			return nil, err
		}
		out.Scripts["post-upgrade"] = up
	}
	if p.PreRemove != nil {
		out.Scripts["pre-deinstall"] = p.PreRemove
	}
	if p.PostRemove != nil {
		out.Scripts["post-deinstall"] = p.PostRemove
	}
	return out, nil
}

// withUpgradeFlag puts `export PKG_UPGRADE=1` right after the #! line:
// apk runs post-upgrade with a clean environment, and the script tells an
// upgrade from an install by that variable, as under opkg.
func withUpgradeFlag(script []byte) ([]byte, error) {
	shebang, rest, ok := bytes.Cut(script, []byte("\n"))
	if !ok || !bytes.HasPrefix(shebang, []byte("#!")) {
		return nil, fmt.Errorf("maintainer script does not start with a #! line")
	}
	out := append(slices.Clone(shebang), "\nexport PKG_UPGRADE=1\n"...)
	return append(out, rest...), nil
}
