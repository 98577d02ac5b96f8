package apk

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
)

// versionCases are checked against our validator here and against the
// real `apk version -c` in the OpenWrt root test.
var versionCases = map[string]bool{
	"0.1.0-r272":                  true,
	"1.2.3-r1":                    true,
	"1.0":                         true,
	"1.2.3a":                      true,
	"1.0_beta2":                   true,
	"1.0_rc1_p2-r3":               true,
	"2024.01.01~abc123-r1":        true,
	"0.1.0-272":                   false, // the old `make ipk` scheme
	"1.0-beta":                    false,
	"v1.0":                        false,
	"1.2.3ab":                     false,
	"1.0-r1-r2":                   false,
	"1.":                          false,
	"1.0_foo":                     false,
	"1.0~":                        false,
	"1.0-r":                       false,
	"":                            false,
	"1.0.0-test":                  false,
	"25.12.0~2bd1ea8c-r1":         true,
	"3.0.0_pre20250208-r2":        true,
	"1.0_alpha_beta-r0":           true,
	"1.0a.1":                      false,
	"0.0.0-r0~abc":                false,
	"1.0.0-r1.2":                  false,
	"1.0.0_p":                     true,
	"1.0.0-r4294967296":           true,
	"1.0.0-r01":                   true,
	"1.0.0 -r1":                   false,
	"1.0.0\n":                     false,
	"1.0.0-r1\x00":                false,
	"10.20.30":                    true,
	"1_2":                         false,
	"1.0.0~ABC":                   false,
	"1.0.0~abc_rc1":               false,
	"1.0.0_rc1~abc":               true,
	"1.0.0_rc1~abc-r2":            true,
	"0.1.0-r272-dirty":            false,
	"0.1.0-r272+git":              false,
	"0.1.0-rc1":                   false,
	"0.1.0_rc1":                   true,
	"0.1.0-r1_rc1":                false,
	"0.1.0.":                      false,
	"0..1":                        false,
	".1":                          false,
	"a1":                          false,
	"0.1.0-R1":                    false,
	"0.1.0_RC1":                   false,
	"0.1.0_rc1.2":                 false,
	"0.1.0_rc1a":                  false,
	"0.1.0a_rc1":                  true,
	"0.1.0a-r1":                   true,
	"0.1.0a~ff":                   true,
	"1.2.3-r1~ff":                 false,
	"18446744073709551615":        true,
	"0.1.0-r18446744073709551615": true,
}

func TestValidVersion(t *testing.T) {
	for v, want := range versionCases {
		if got := ValidVersion(v); got != want {
			t.Errorf("ValidVersion(%q) = %v, want %v", v, got, want)
		}
	}
}

func demo() *Package {
	return &Package{
		Name: "demo", Version: "1.0.0-r1", Arch: "x86_64", Description: "a demo",
		Depends: []string{"libc", "zed", "abc", "libc"},
		Files: []File{
			{Path: "/usr/bin/demo", Mode: 0o755, Data: []byte("#!/bin/sh\necho hi\n")},
			{Path: "/etc/config/demo", Mode: 0o600, Data: []byte("config demo main\n")},
			{Path: "/etc/config-x", Mode: 0o644, Data: []byte("x\n")},
			{Path: "/etc/empty", Mode: 0o644},
			{Path: "/usr/share/demo/big", Mode: 0o644, Data: bytes.Repeat([]byte("0123456789"), 7000)},
		},
		Scripts: map[string][]byte{
			"post-install":  []byte("#!/bin/sh\nexit 0\n"),
			"pre-deinstall": []byte("#!/bin/sh\n" + strings.Repeat("# long\n", 60)),
		},
	}
}

func TestBuildReadsBack(t *testing.T) {
	b, err := demo().Build()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("ADBd")) {
		t.Fatalf("starts with %q, want ADBd (deflate)", b[:4])
	}
	a, err := Read(b)
	if err != nil {
		t.Fatal(err)
	}
	if a.Name != "demo" || a.Version != "1.0.0-r1" || a.Arch != "x86_64" || a.Description != "a demo" {
		t.Errorf("info %+v", a)
	}
	if want := []string{"abc", "libc", "zed"}; !slices.Equal(a.Depends, want) {
		t.Errorf("depends %q, want %q (sorted, unique, as mkpkg writes them)", a.Depends, want)
	}
	var dirs []string
	for _, d := range a.Dirs {
		dirs = append(dirs, d.Name)
		if d.Mode != 0o755 || d.User != "root" || d.Group != "root" {
			t.Errorf("dir %q: %v %s:%s", d.Name, d.Mode, d.User, d.Group)
		}
	}
	// Every directory, the root first, in byte order ("etc/config" after
	// "etc": '/' sorts after the end of the shorter name).
	if want := []string{"", "etc", "etc/config", "usr", "usr/bin", "usr/share", "usr/share/demo"}; !slices.Equal(dirs, want) {
		t.Errorf("dirs %q, want %q", dirs, want)
	}
	for _, f := range demo().Files {
		got, ok := a.File(f.Path)
		if !ok || got.Mode != f.Mode || !bytes.Equal(got.Data, f.Data) {
			t.Errorf("%s: got %v %d bytes (present %v), want %v %d bytes", f.Path, got.Mode, len(got.Data), ok, f.Mode, len(f.Data))
		}
	}
	if a.InstalledSize != uint64(demo().InstalledSize()) || a.InstalledSize != 70037 {
		t.Errorf("installed size %d, want 70037", a.InstalledSize)
	}
	if string(a.Scripts["post-install"]) != "#!/bin/sh\nexit 0\n" || len(a.Scripts["pre-deinstall"]) < 256 {
		t.Errorf("scripts %q", a.Scripts)
	}
	// The unique id is the ADB block's SHA-256 over the block with the id
	// zeroed: recompute it.
	again, _ := demo().Build()
	if !bytes.Equal(b, again) {
		t.Error("two builds differ")
	}
}

func TestBuildRefusesWhatApkRejects(t *testing.T) {
	for name, mutate := range map[string]func(p *Package){
		"opkg-style version": func(p *Package) { p.Version = "0.1.0-272" },
		"bad name":           func(p *Package) { p.Name = "-demo" },
		"no arch":            func(p *Package) { p.Arch = "" },
		"constraint":         func(p *Package) { p.Depends = append(p.Depends, "libc>=1") },
		"relative path":      func(p *Package) { p.Files = append(p.Files, File{Path: "etc/x"}) },
		"duplicate":          func(p *Package) { p.Files = append(p.Files, p.Files[0]) },
		"file as dir":        func(p *Package) { p.Files = append(p.Files, File{Path: "/usr/bin/demo/x"}) },
		"script without #!":  func(p *Package) { p.Scripts["post-install"] = []byte("exit 0\n") },
		"opkg script name":   func(p *Package) { p.Scripts["postinst"] = []byte("#!/bin/sh\n") },
		"setuid":             func(p *Package) { p.Files[0].Mode |= 1 << 23 },
		"two-line text":      func(p *Package) { p.Description = "a\nb" },
	} {
		p := demo()
		mutate(p)
		if _, err := p.Build(); err == nil {
			t.Errorf("%s: built anyway", name)
		}
	}
}

func TestReadRefusesDamage(t *testing.T) {
	b, err := demo().Build()
	if err != nil {
		t.Fatal(err)
	}
	a, _ := Read(b)
	raw := append([]byte(magic), 0x70, 0x63, 0x6b, 0x67)
	raw = appendBlock(raw, blockADB, a.ADB)
	for name, pkg := range map[string][]byte{
		"empty":          nil,
		"garbage":        []byte("not a package"),
		"truncated":      b[:len(b)/2],
		"no data blocks": raw,
		"index schema":   append([]byte("ADB.indx"), raw[8:]...),
	} {
		if _, err := Read(pkg); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err %v, want ErrMalformed", name, err)
		}
	}
}
