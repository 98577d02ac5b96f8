package apk

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"surflare-watchdog/src/testenv"
)

// The real apk-tools 3 (in the OpenWrt root) is the reference: `apk mkpkg`
// on the same tree must write the same ADB block and data as Build, byte
// for byte, and the real apk must read our package.
func TestSameBytesAsApkMkpkg(t *testing.T) {
	root := testenv.OpenWrtRoot(t)
	p := demo()
	work := filepath.Join(root, "tmp", "mkpkg")
	files := filepath.Join(work, "files")
	for _, f := range p.Files {
		name := filepath.Join(files, f.Path)
		for d := filepath.Dir(name); d != files && !strings.HasPrefix(files, d); d = filepath.Dir(d) {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(name, f.Data, f.Mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(name, f.Mode); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"mkpkg", "--info", "name:" + p.Name, "--info", "version:" + p.Version, "--info", "arch:" + p.Arch,
		"--info", "description:" + p.Description, "--info", "depends:" + strings.Join(p.Depends, " ")}
	for name, text := range p.Scripts {
		file := filepath.Join(work, name)
		if err := os.WriteFile(file, text, 0o755); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--script", name+":/tmp/mkpkg/"+name)
	}
	// Every directory 0755 whatever the umask was.
	if err := filepath.WalkDir(files, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			err = os.Chmod(p, 0o755)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	args = append(args, "--files", "/tmp/mkpkg/files", "--output", "/tmp/mkpkg/ref.apk")
	if out, rc := testenv.Chroot(root, []string{"SOURCE_DATE_EPOCH=0"}, "/usr/bin/apk", args...); rc != 0 {
		t.Fatalf("apk mkpkg: rc %d\n%s", rc, out)
	}
	ref, err := os.ReadFile(filepath.Join(work, "ref.apk"))
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := Read(ref)
	if err != nil {
		t.Fatalf("we cannot read what apk mkpkg wrote: %v", err)
	}
	b, err := p.Build()
	if err != nil {
		t.Fatal(err)
	}
	ours, err := Read(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ours.ADB, theirs.ADB) {
		for i := range min(len(ours.ADB), len(theirs.ADB)) {
			if ours.ADB[i] != theirs.ADB[i] {
				t.Errorf("ADB blocks differ first at byte %d of %d/%d", i, len(ours.ADB), len(theirs.ADB))
				break
			}
		}
		t.Errorf("ADB block: ours %d bytes, mkpkg's %d bytes", len(ours.ADB), len(theirs.ADB))
	}
	if err := os.WriteFile(filepath.Join(work, "ours.apk"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	mine, rc := testenv.Chroot(root, nil, "/usr/bin/apk", "adbdump", "/tmp/mkpkg/ours.apk")
	want, rc2 := testenv.Chroot(root, nil, "/usr/bin/apk", "adbdump", "/tmp/mkpkg/ref.apk")
	if rc != 0 || rc2 != 0 || mine != want {
		t.Errorf("apk adbdump of ours (rc %d):\n%s\nof mkpkg's (rc %d):\n%s", rc, mine, rc2, want)
	}
	if !strings.Contains(mine, "name: demo") || !strings.Contains(mine, "# data block") {
		t.Errorf("adbdump does not show our package:\n%s", mine)
	}
}

// Our version rule is apk's: `apk version -c` prints exactly the versions
// it finds invalid.
func TestVersionRuleIsApks(t *testing.T) {
	root := testenv.OpenWrtRoot(t)
	var args []string
	want := map[string]bool{}
	for v, ok := range versionCases {
		if v == "" || strings.ContainsAny(v, " \n\x00") {
			continue // not passable as one argument line
		}
		args = append(args, v)
		if !ok {
			want[v] = true
		}
	}
	out, _ := testenv.Chroot(root, nil, "/usr/bin/apk", append([]string{"version", "-c"}, args...)...)
	got := map[string]bool{}
	for _, l := range strings.Fields(out) {
		got[l] = true
	}
	for _, v := range args {
		if got[v] != want[v] {
			t.Errorf("%q: apk calls it invalid=%v, we say valid=%v", v, got[v], versionCases[v])
		}
	}
}
