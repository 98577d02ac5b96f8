package ipk

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// tempTree is a small package laid out the way our repository's is (a
// conffile, an init script and a hotplug script, with the modes the
// package rules give them).
func tempTree(t *testing.T) *Package {
	t.Helper()
	return &Package{
		Control: Control{Fields: []Field{
			{"Package", "demo"}, {"Version", "1.2.3-r1"}, {"Depends", "libc"},
			{"Architecture", "all"}, {"Maintainer", "Test <t@example.com>"},
			{"Description", "demo package\nsecond line"},
		}},
		Files: []File{
			{Path: "/etc/init.d/demo", Mode: 0o755, Data: []byte("#!/bin/sh /etc/rc.common\nSTART=50\n")},
			{Path: "/etc/hotplug.d/iface/90-demo", Mode: 0o644, Data: []byte("#!/bin/sh\nexit 0\n")},
			{Path: "/usr/share/demo/a-b", Mode: 0o644, Data: []byte("x\n")},
			{Path: "/usr/share/demo/a/b", Mode: 0o644, Data: []byte("y\n")},
			{Path: "/etc/config/demo", Mode: 0o600, Data: []byte("config demo 'main'\n"), Conffile: true},
		},
		Scripts: map[string][]byte{
			"postinst": []byte("#!/bin/sh\nexit 0\n"),
			"prerm":    []byte("#!/bin/sh\nexit 0\n"),
		},
	}
}

func TestBuildMatchesTheAcceptedLayout(t *testing.T) {
	p := tempTree(t)
	b, err := p.Build()
	if err != nil {
		t.Fatal(err)
	}
	if p.FileName() != "demo_1.2.3-r1_all.ipk" {
		t.Errorf("file name %s", p.FileName())
	}
	a, err := Read(b)
	if err != nil {
		t.Fatal(err)
	}
	if problems := Lint(a); len(problems) > 0 {
		t.Errorf("lint: %v", problems)
	}
	sample, err := Read(readFixture(t, "surflare-test_1.0.0-1_all.ipk"))
	if err != nil {
		t.Fatal(err)
	}
	names := func(ms []Member) (out []string) {
		for _, m := range ms {
			out = append(out, m.Name)
		}
		return out
	}
	if got, want := names(a.Outer), names(sample.Outer); !slices.Equal(got, want) {
		t.Errorf("outer members %q, sample has %q", got, want)
	}
	if got, want := names(a.ControlTar), names(sample.ControlTar); !slices.Equal(got, want) {
		t.Errorf("control.tar.gz entries %q, sample has %q", got, want)
	}
	if a.Outer[0].Format != sample.Outer[0].Format {
		t.Errorf("tar format %v, sample (GNU tar) uses %v", a.Outer[0].Format, sample.Outer[0].Format)
	}
	wantData := []string{"./", "./etc/", "./etc/config/", "./etc/config/demo", "./etc/hotplug.d/",
		"./etc/hotplug.d/iface/", "./etc/hotplug.d/iface/90-demo", "./etc/init.d/", "./etc/init.d/demo",
		"./usr/", "./usr/share/", "./usr/share/demo/", "./usr/share/demo/a/", "./usr/share/demo/a/b", "./usr/share/demo/a-b"}
	if got := names(a.DataTar); !slices.Equal(got, wantData) {
		t.Errorf("data entries\n%q\nwant (GNU tar --sort=name order)\n%q", got, wantData)
	}
	if m, _ := a.DataFile("/etc/init.d/demo"); m.Mode != 0o755 {
		t.Errorf("init script mode %04o, want 0755", m.Mode)
	}
	if m, _ := a.DataFile("/etc/hotplug.d/iface/90-demo"); m.Mode != 0o644 {
		t.Errorf("hotplug mode %04o, want 0644", m.Mode)
	}
	if m, _ := a.DataFile("/etc/config/demo"); m.Mode != 0o600 {
		t.Errorf("conffile mode %04o, want 0600", m.Mode)
	}
	if !slices.Equal(a.Conffiles, []string{"/etc/config/demo"}) {
		t.Errorf("conffiles %q", a.Conffiles)
	}
	if v, _ := a.Control.Get("Installed-Size"); v != "74" {
		t.Errorf("Installed-Size %s, want 74 (34+17+2+2+19 bytes)", v)
	}
	if v, _ := a.Control.Get("Description"); v != "demo package\nsecond line" {
		t.Errorf("Description %q", v)
	}
	// Installed-Size goes right after Architecture, as ipkg-build puts it.
	var order []string
	for _, f := range a.Control.Fields {
		order = append(order, f.Name)
	}
	if i := slices.Index(order, "Installed-Size"); i < 1 || order[i-1] != "Architecture" {
		t.Errorf("field order %q", order)
	}
	target := Target{Archs: map[string]int{"all": 1}, Available: map[string]bool{"libc": true}}
	if err := target.CheckInstall(a); err != nil {
		t.Errorf("opkg model refuses our package: %v", err)
	}
}

func TestBuildIsReproducible(t *testing.T) {
	p := tempTree(t)
	a, err := p.Build()
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(p.Files) // input order must not matter either
	b, err := p.Build()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Error("two builds of the same package differ")
	}
	if a[0] != 0x1f || a[1] != 0x8b || a[9] != gzipOSUnix {
		t.Errorf("gzip header % x, want 1f 8b ... OS=3 like GNU gzip", a[:10])
	}
}

// GNU tar is an independent reader: it must list our package and its inner
// archives with the owners and times the fixture's README describes.
func TestGNUTarReadsOurPackage(t *testing.T) {
	tarBin, err := exec.LookPath("tar")
	if err != nil {
		t.Skip("GNU tar not installed")
	}
	b, err := tempTree(t).Build()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "demo.ipk")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(tarBin, "-tzvf", file, "--numeric-owner").CombinedOutput()
	if err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	for _, want := range []string{"0/0", "1970-01-01 00:00 ./debian-binary", "./data.tar.gz", "./control.tar.gz"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("tar listing lacks %q:\n%s", want, out)
		}
	}
	if out, err := exec.Command(tarBin, "-xzf", file, "-C", dir).CombinedOutput(); err != nil {
		t.Fatalf("tar extract: %v\n%s", err, out)
	}
	out, err = exec.Command(tarBin, "-tzvf", filepath.Join(dir, "control.tar.gz"), "--numeric-owner").CombinedOutput()
	if err != nil {
		t.Fatalf("tar control: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "-rwxr-xr-x 0/0") || !strings.Contains(string(out), "./postinst") {
		t.Errorf("control listing:\n%s", out)
	}
}

func TestBuildRefusesWhatOpkgCannotCarry(t *testing.T) {
	for name, mutate := range map[string]func(p *Package){
		"underscore in version": func(p *Package) { p.Control.Set("Version", "1.0_beta") },
		"no architecture": func(p *Package) {
			p.Control.Fields = slices.DeleteFunc(p.Control.Fields, func(f Field) bool { return f.Name == "Architecture" })
		},
		"upper-case name":   func(p *Package) { p.Control.Set("Package", "Demo") },
		"relative path":     func(p *Package) { p.Files = append(p.Files, File{Path: "etc/x", Mode: 0o644}) },
		"duplicate path":    func(p *Package) { p.Files = append(p.Files, p.Files[0]) },
		"script without #!": func(p *Package) { p.Scripts["postinst"] = []byte("exit 0\n") },
		"unknown script":    func(p *Package) { p.Scripts["configure"] = []byte("#!/bin/sh\n") },
	} {
		p := tempTree(t)
		mutate(p)
		if _, err := p.Build(); err == nil {
			t.Errorf("%s: built anyway", name)
		}
	}
}

func TestLintReportsEveryProblem(t *testing.T) {
	a, err := Read(mustBuild(t, tempTree(t)))
	if err != nil {
		t.Fatal(err)
	}
	a.Outer[0], a.Outer[1] = a.Outer[1], a.Outer[0]
	a.ControlTar[len(a.ControlTar)-1].Mode = 0o644 // prerm not executable
	a.Conffiles = append(a.Conffiles, "/etc/config/missing")
	a.DataTar[3].UID = 1000
	problems := Lint(a)
	for _, want := range []string{"outer members", "prerm has mode 0644", "/etc/config/missing", "owned by 1000:0"} {
		found := false
		for _, p := range problems {
			found = found || strings.Contains(p.Error(), want)
		}
		if !found {
			t.Errorf("no problem mentions %q: %v", want, problems)
		}
	}
}

func mustBuild(t *testing.T, p *Package) []byte {
	t.Helper()
	b, err := p.Build()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
