package pkgspec

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"surflare-watchdog/src/apk"
	"surflare-watchdog/src/ipk"
)

func sample() *Package {
	return &Package{
		Name: "demo", Version: "1.2.3-r4", Arch: AllArch, Depends: []string{"libc", "luci-base"},
		Section: "luci", Maintainer: "us", Description: "first line\nsecond line",
		Files: []File{
			{Path: "/usr/bin/demo", Mode: 0o755, Data: []byte("bin")},
			{Path: "/etc/config/demo", Mode: 0o600, Data: []byte("config demo 'main'\n"), Conffile: true},
			{Path: "/etc/demo/a.conf", Mode: 0o644, Data: []byte("a\n"), Conffile: true},
		},
		PostInstall: []byte("#!/bin/sh\n# install\n[ \"$PKG_UPGRADE\" = 1 ] || enable\n"),
		PreRemove:   []byte("#!/bin/sh\nstop\n"),
		PostRemove:  []byte("#!/bin/sh\ncleanup\n"),
	}
}

// Both formats carry the same files, dependencies, conffiles and scripts;
// only the names of things differ.
func TestOneDescriptionTwoFormats(t *testing.T) {
	p := sample()
	ip, err := p.IPK()
	if err != nil {
		t.Fatal(err)
	}
	b, err := ip.Build()
	if err != nil {
		t.Fatal(err)
	}
	ia, err := ipk.Read(b)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/etc/config/demo", "/etc/demo/a.conf"}; !slices.Equal(ia.Conffiles, want) {
		t.Errorf("ipk conffiles %q, want %q", ia.Conffiles, want)
	}
	for name, want := range map[string][]byte{"postinst": p.PostInstall, "prerm": p.PreRemove, "postrm": p.PostRemove} {
		if m, ok := ia.ControlFile(name); !ok || string(m.Data) != string(want) {
			t.Errorf("ipk %s: %q", name, m.Data)
		}
	}
	if v, _ := ia.Control.Get("Architecture"); v != "all" {
		t.Errorf("ipk Architecture %s", v)
	}

	ap, err := p.APK()
	if err != nil {
		t.Fatal(err)
	}
	b, err = ap.Build()
	if err != nil {
		t.Fatal(err)
	}
	aa, err := apk.Read(b)
	if err != nil {
		t.Fatal(err)
	}
	if aa.Arch != "noarch" || aa.Description != "first line second line" || !slices.Equal(aa.Depends, p.Depends) {
		t.Errorf("apk info: arch %q description %q depends %q", aa.Arch, aa.Description, aa.Depends)
	}
	for _, f := range p.Files {
		got, ok := aa.File(f.Path)
		if !ok || got.Mode != f.Mode || string(got.Data) != string(f.Data) {
			t.Errorf("apk %s: %+v", f.Path, got)
		}
	}
	db := func(suffix string) string {
		f, ok := aa.File("/lib/apk/packages/demo" + suffix)
		if !ok {
			t.Errorf("apk lacks /lib/apk/packages/demo%s", suffix)
		}
		return string(f.Data)
	}
	if got := db(".list"); got != "/etc/config/demo\n/etc/demo/a.conf\n/usr/bin/demo\n" {
		t.Errorf(".list %q", got)
	}
	if got := db(".conffiles"); got != "/etc/config/demo\n/etc/demo/a.conf\n" {
		t.Errorf(".conffiles %q", got)
	}
	sum := sha256.Sum256([]byte("a\n"))
	if got := db(".conffiles_static"); !strings.Contains(got, "/etc/demo/a.conf "+hex.EncodeToString(sum[:])+"\n") || strings.Count(got, "\n") != 2 {
		t.Errorf(".conffiles_static %q", got)
	}
	if string(aa.Scripts["post-install"]) != string(p.PostInstall) || string(aa.Scripts["pre-deinstall"]) != string(p.PreRemove) ||
		string(aa.Scripts["post-deinstall"]) != string(p.PostRemove) {
		t.Errorf("apk scripts %q", aa.Scripts)
	}
	if want := "#!/bin/sh\nexport PKG_UPGRADE=1\n# install\n"; !strings.HasPrefix(string(aa.Scripts["post-upgrade"]), want) {
		t.Errorf("post-upgrade %q, want it to start %q", aa.Scripts["post-upgrade"], want)
	}
	if _, ok := aa.Scripts["pre-upgrade"]; ok {
		t.Error("pre-upgrade written without a pre-install script (OpenWrt writes none)")
	}
}

func TestVersionsValidForBoth(t *testing.T) {
	for v, want := range map[string]bool{"0.1.0-r272": true, "0.1.0-272": false, "1.0-beta": false, "0.1.0": true,
		"1.0_beta":    false, // apk takes it, but _ separates the fields of an ipk file name
		"1.0~ab12-r1": true} {
		p := sample()
		p.Version = v
		_, err1 := p.IPK()
		_, err2 := p.APK()
		if (err1 == nil) != want || (err2 == nil) != want {
			t.Errorf("%s: ipk err %v, apk err %v, want valid=%v", v, err1, err2, want)
		}
	}
	p := sample()
	p.Files = append(p.Files, File{Path: "/lib/apk/packages/demo.list", Mode: 0o644})
	if _, err := p.APK(); err == nil {
		t.Error("a package may not ship apk's own bookkeeping files")
	}
}

func TestReadTreeNormalisesModes(t *testing.T) {
	dir := t.TempDir()
	for name, mode := range map[string]os.FileMode{"init.d/demo": 0o700, "hotplug/90-demo": 0o600, "a/b/c": 0o664} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(name), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	files, err := ReadTree(dir, "/etc")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]os.FileMode{}
	for _, f := range files {
		got[f.Path] = f.Mode
	}
	want := map[string]os.FileMode{"/etc/init.d/demo": 0o755, "/etc/hotplug/90-demo": 0o644, "/etc/a/b/c": 0o644}
	for p, m := range want {
		if got[p] != m {
			t.Errorf("%s: mode %04o, want %04o whatever the source tree had", p, got[p], m)
		}
	}
	if err := os.Symlink("a", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadTree(dir, "/etc"); err == nil {
		t.Error("a symlink in the tree was taken")
	}
}
