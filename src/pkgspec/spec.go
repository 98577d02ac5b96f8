// Package pkgspec describes an OpenWrt package once, independent of the
// file format that carries it, so the .ipk (opkg, OpenWrt 24.10) and the
// .apk (apk-tools 3, OpenWrt 25.12) of the same build ship the same files,
// dependencies, conffiles and maintainer scripts. IPK and APK map it onto
// the writers of src/ipk and src/apk the way OpenWrt's own package build
// (include/package-pack.mk) maps a package definition onto each format.
package pkgspec

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"

	"surflare-watchdog/src/apk"
)

// AllArch is the architecture of a package that runs anywhere, as opkg
// spells it; the apk writer maps it to apk's "noarch", as OpenWrt does.
const AllArch = "all"

// File is one regular file of a package.
type File struct {
	// Path is the absolute path on the target.
	Path string
	// Mode holds the permission bits.
	Mode fs.FileMode
	Data []byte
	// Conffile marks a file the user edits: both package managers keep
	// the user's copy on upgrade (the new one lands beside it as
	// PATH-opkg or PATH.apk-new) and on removal.
	Conffile bool
}

// Package is one OpenWrt package.
type Package struct {
	Name    string
	Version string
	// Arch is the opkg/apk architecture (x86_64, aarch64_cortex-a53, ...),
	// or AllArch.
	Arch        string
	Depends     []string
	Section     string
	Maintainer  string
	Description string
	Files       []File

	// The maintainer scripts, by lifecycle event. Each runs on a live
	// router and in an offline root (IPKG_INSTROOT, or opkg's PKG_ROOT).
	//
	// PostInstall runs after the files are in place, on a fresh install
	// and, with PKG_UPGRADE=1 in its environment, on an upgrade (opkg's
	// postinst; apk's post-install and post-upgrade, the latter exporting
	// PKG_UPGRADE=1 first, as OpenWrt's package-pack.mk writes it).
	PostInstall []byte
	// PreRemove runs before the files are removed (prerm, pre-deinstall).
	PreRemove []byte
	// PostRemove runs after they are gone (postrm, post-deinstall).
	PostRemove []byte
}

// opkgVersion is what opkg and the ipk file name can carry.
var opkgVersion = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z.+~:-]*$`)

// ValidVersion reports whether v is a version both formats accept: apk's
// grammar (the stricter one, e.g. 0.1.0-r272) and opkg's characters.
func ValidVersion(v string) bool { return apk.ValidVersion(v) && opkgVersion.MatchString(v) }

// CheckVersion explains why a version is refused.
func CheckVersion(v string) error {
	if !ValidVersion(v) {
		return fmt.Errorf("version %q is not valid for both opkg and apk: use MAJOR.MINOR.PATCH-rRELEASE, e.g. 0.1.0-r272", v)
	}
	return nil
}

// Conffiles lists the paths of the files marked Conffile, sorted.
func (p *Package) Conffiles() []string {
	var out []string
	for _, f := range p.Files {
		if f.Conffile {
			out = append(out, f.Path)
		}
	}
	slices.Sort(out)
	return out
}

// InstalledSize is the sum of the files' sizes in bytes.
func (p *Package) InstalledSize() int64 {
	var n int64
	for _, f := range p.Files {
		n += int64(len(f.Data))
	}
	return n
}

// File returns the file at target.
func (p *Package) File(target string) (*File, bool) {
	for i := range p.Files {
		if p.Files[i].Path == target {
			return &p.Files[i], true
		}
	}
	return nil, false
}

// ReadTree returns every regular file under dir as a file installed under
// target (e.g. dir "luci-app-surflare/htdocs", target "/www"). Modes are
// normalised to 0755 for anything executable and 0644 otherwise, so the
// package does not depend on the umask of the machine that built it.
// Symlinks and special files are refused: a package manager would install
// them verbatim and they are never what we mean to ship.
func ReadTree(dir, target string) ([]File, error) {
	var out []File
	err := filepath.WalkDir(dir, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s: not a regular file (%v)", name, d.Type())
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		data, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, name)
		if err != nil {
			return err
		}
		mode := fs.FileMode(0o644)
		if info.Mode()&0o111 != 0 {
			mode = 0o755
		}
		out = append(out, File{Path: path.Join(target, filepath.ToSlash(rel)), Mode: mode, Data: data})
		return nil
	})
	return out, err
}
