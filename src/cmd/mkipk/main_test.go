package main

import (
	"archive/tar"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"surflare-watchdog/src/testenv"
	"sync"
	"testing"

	"surflare-watchdog/src/apk"
	"surflare-watchdog/src/ipk"
)

func repoRoot(t *testing.T) string { return testenv.RepoRoot(t) }

// goBuild compiles pkg (a directory or import path) with cgo off, the way
// `make build` does, and returns the binary's path.
func goBuild(t *testing.T, dir, pkg, goarch string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not in PATH")
	}
	out := filepath.Join(t.TempDir(), "surflare-watchdog")
	cmd := exec.Command(goBin, "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch, "GOMIPS=softfloat")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s for %s: %v\n%s", pkg, goarch, err, b)
	}
	return out
}

// tinyBinary is a stand-in daemon: a static Go program, quick to build and
// built once per architecture for the whole test binary.
func tinyBinary(t *testing.T, goarch string) string {
	t.Helper()
	tinyMu.Lock()
	defer tinyMu.Unlock()
	if bin, ok := tinyBins[goarch]; ok {
		return bin
	}
	dir := filepath.Join(tinyDir, goarch)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{
		"go.mod":  "module tiny\n\ngo 1.22\n",
		"main.go": "package main\n\nfunc main() {}\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := goBuild(t, dir, ".", goarch)
	kept := filepath.Join(dir, "surflare-watchdog")
	if err := os.Rename(bin, kept); err != nil {
		t.Fatal(err)
	}
	tinyBins[goarch] = kept
	return kept
}

var (
	tinyMu   sync.Mutex
	tinyDir  string
	tinyBins = map[string]string{}
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mkipk-test-")
	if err != nil {
		panic(err)
	}
	tinyDir = dir
	rc := m.Run()
	os.RemoveAll(dir)
	os.Exit(rc)
}

func runMkipk(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	rc := run(args, &stdout, &stderr)
	return rc, stdout.String(), stderr.String()
}

func readPackage(t *testing.T, name string) *ipk.Archive {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	a, err := ipk.Read(b)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return a
}

func TestBuildEveryArchitecture(t *testing.T) {
	root := repoRoot(t)
	for _, c := range []struct{ arch, goarch, pkgArch string }{
		{"x86_64", "amd64", "x86_64"},
		{"aarch64", "arm64", "aarch64_generic"},
		{"aarch64_cortex-a53", "arm64", "aarch64_cortex-a53"},
		{"mipsel", "mipsle", "mipsel_24kc"},
	} {
		t.Run(c.arch, func(t *testing.T) {
			out := t.TempDir()
			rc, stdout, stderr := runMkipk(t, "build", "--root", root, "--version", "v1.2.3-r1",
				"--arch", c.arch, "--bin", tinyBinary(t, c.goarch), "--out", out)
			if rc != exitOK {
				t.Fatalf("rc %d\n%s%s", rc, stdout, stderr)
			}
			core := filepath.Join(out, "surflare-watchdog_1.2.3-r1_"+c.pkgArch+".ipk")
			luci := filepath.Join(out, "luci-app-surflare_1.2.3-r1_all.ipk")
			for _, want := range []string{"binary  ", "bytes", core, luci} {
				if !strings.Contains(stdout, want) {
					t.Errorf("output lacks %q:\n%s", want, stdout)
				}
			}
			for _, name := range []string{core, luci} {
				if problems := checkArchive(readPackage(t, name)); len(problems) > 0 {
					t.Errorf("%s: %v", name, problems)
				}
			}
			a := readPackage(t, core)
			if v, _ := a.Control.Get("Architecture"); v != c.pkgArch {
				t.Errorf("Architecture %s, want %s", v, c.pkgArch)
			}
			// A router of another family must refuse it, a matching one must
			// take it once the dependencies are there.
			deps := map[string]bool{}
			for _, d := range coreDepends {
				deps[d] = true
			}
			ok := ipk.Target{Archs: map[string]int{"all": 1, "noarch": 1, c.pkgArch: 10}, Available: deps}
			if err := ok.CheckInstall(a); err != nil {
				t.Errorf("matching router refuses: %v", err)
			}
			other := ipk.Target{Archs: map[string]int{"all": 1, "mips_24kc": 10}, Available: deps}
			if err := other.CheckInstall(a); err == nil {
				t.Error("a mips_24kc router would install it")
			}
		})
	}
}

// The fixture's opkg root has only libc: our package must be refused for
// its missing kernel modules, not installed half-working.
func TestDependsAreEnforcedOnABareRouter(t *testing.T) {
	root := repoRoot(t)
	out := t.TempDir()
	if rc, stdout, stderr := runMkipk(t, "build", "--root", root, "--version", "1.0.0", "--bin", tinyBinary(t, "amd64"), "--out", out, "--luci=false"); rc != exitOK {
		t.Fatalf("rc %d\n%s%s", rc, stdout, stderr)
	}
	conf, err := os.ReadFile(filepath.Join(root, "..", "shared", "fixtures", "ipk", "opkg.conf"))
	if err != nil {
		t.Skipf("fixture opkg.conf: %v", err)
	}
	target, err := ipk.ParseOpkgConf(conf)
	if err != nil {
		t.Fatal(err)
	}
	target.Available["libc"] = true
	err = target.CheckInstall(readPackage(t, filepath.Join(out, "surflare-watchdog_1.0.0_x86_64.ipk")))
	var dep *ipk.DependencyError
	if !asDependencyError(err, &dep) || !slices.Contains(dep.Missing, "kmod-nft-tproxy") {
		t.Errorf("err %v, want missing kmod-nft-tproxy", err)
	}
	if _, err := os.Stat(filepath.Join(out, "luci-app-surflare_1.0.0_all.ipk")); err == nil {
		t.Error("--luci=false still built the LuCI package")
	}
}

func asDependencyError(err error, target **ipk.DependencyError) bool {
	d, ok := err.(*ipk.DependencyError)
	if ok {
		*target = d
	}
	return ok
}

func TestBuildRefusesWrongOrDynamicBinary(t *testing.T) {
	root := repoRoot(t)
	for name, c := range map[string]struct{ bin, arch, want string }{
		"dynamic":       {"/bin/sh", "x86_64", "dynamically linked"},
		"wrong family":  {tinyBinary(t, "arm64"), "mipsel", "needs EM_MIPS"},
		"not a binary":  {filepath.Join(root, "go.mod"), "x86_64", "not an ELF"},
		"missing input": {filepath.Join(t.TempDir(), "nope"), "x86_64", "no such file"},
	} {
		out := t.TempDir()
		rc, stdout, stderr := runMkipk(t, "build", "--root", root, "--version", "1.0.0", "--arch", c.arch, "--bin", c.bin, "--out", out)
		if rc != exitFailure || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: rc %d, stderr %q, want failure mentioning %q", name, rc, stderr, c.want)
		}
		if files, _ := filepath.Glob(filepath.Join(out, "*.ipk")); len(files) > 0 {
			t.Errorf("%s: wrote %v anyway", name, files)
		}
		_ = stdout
	}
}

func TestUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		rc   int
	}{
		{nil, exitUsage},
		{[]string{"frobnicate"}, exitUsage},
		{[]string{"--help"}, exitOK},
		{[]string{"build", "--help"}, exitOK},
		{[]string{"build", "--version", "1"}, exitUsage},
		{[]string{"check"}, exitUsage},
		{[]string{"check", "--help"}, exitOK},
	} {
		if rc, _, _ := runMkipk(t, c.args...); rc != c.rc {
			t.Errorf("mkipk %q: rc %d, want %d", c.args, rc, c.rc)
		}
	}
}

func TestCheckReportsBrokenPackages(t *testing.T) {
	root := repoRoot(t)
	dir := t.TempDir()
	// The fixture sample is a valid ipk, but not one of ours.
	sample := filepath.Join(root, "..", "shared", "fixtures", "ipk", "surflare-test_1.0.0-1_all.ipk")
	garbage := filepath.Join(dir, "garbage.ipk")
	if err := os.WriteFile(garbage, []byte("nope"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"check", garbage}
	if _, err := os.Stat(sample); err == nil {
		args = append(args, sample)
	}
	rc, stdout, _ := runMkipk(t, args...)
	if rc != exitFailure || !strings.Contains(stdout, "malformed") {
		t.Errorf("rc %d:\n%s", rc, stdout)
	}
	if len(args) == 3 && !strings.Contains(stdout, `unknown package "surflare-test"`) {
		t.Errorf("sample not flagged as foreign:\n%s", stdout)
	}
}

// The real daemon, built the way `make build` builds it, must package and
// pass every check: static, right architecture, all files in place.
func TestRealDaemonPackages(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the daemon")
	}
	root := repoRoot(t)
	bin := goBuild(t, root, "./src/cmd/surflare-watchdog", "amd64")
	out := t.TempDir()
	rc, stdout, stderr := runMkipk(t, "build", "--root", root, "--version", "0.0.0-r0", "--bin", bin, "--out", out)
	if rc != exitOK {
		t.Fatalf("rc %d\n%s%s", rc, stdout, stderr)
	}
	t.Logf("\n%s", stdout)
	rc, stdout, _ = runMkipk(t, "check", filepath.Join(out, "surflare-watchdog_0.0.0-r0_x86_64.ipk"), filepath.Join(out, "luci-app-surflare_0.0.0-r0_all.ipk"))
	if rc != exitOK {
		t.Errorf("check:\n%s", stdout)
	}
}

// TestMakeIpkArtifacts checks what `make ipk` left in build/ipk, when it has
// been run (CI runs it before the tests; locally it is skipped otherwise).
func TestMakeIpkArtifacts(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(repoRoot(t), "build", "ipk", "*.ipk"))
	if len(files) == 0 {
		t.Skip("no build/ipk/*.ipk: run `make ipk` first")
	}
	var core, luci int
	for _, name := range files {
		a := readPackage(t, name)
		switch n, _ := a.Control.Get("Package"); n {
		case corePackage:
			core++
		case luciPackage:
			luci++
		}
		if problems := checkArchive(a); len(problems) > 0 {
			t.Errorf("%s: %v", name, problems)
		}
	}
	if core == 0 || luci == 0 {
		t.Errorf("build/ipk has %d surflare-watchdog and %d luci-app-surflare packages, want both", core, luci)
	}
}

// TestMakeApkArtifacts checks what `make apk` left in build/apk, when it
// has been run (CI runs it before the tests; locally it is skipped
// otherwise).
func TestMakeApkArtifacts(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(repoRoot(t), "build", "apk", "*", "*.apk"))
	if len(files) == 0 {
		t.Skip("no build/apk/*/*.apk: run `make apk` first")
	}
	var core, luci int
	for _, name := range files {
		problems := checkFile(name)
		if len(problems) > 0 {
			t.Errorf("%s: %v", name, problems)
		}
		switch base := filepath.Base(name); {
		case strings.HasPrefix(base, corePackage+"-"):
			core++
			if arch := filepath.Base(filepath.Dir(name)); !strings.HasPrefix(arch, "x86_64") && !strings.Contains(arch, "_") {
				t.Errorf("%s: directory %s is not a package architecture", name, arch)
			}
		case strings.HasPrefix(base, luciPackage+"-"):
			luci++
		}
	}
	if core == 0 || luci == 0 {
		t.Errorf("build/apk has %d surflare-watchdog and %d luci-app-surflare packages, want both", core, luci)
	}
}

// The .ipk and the .apk of one build carry the same thing: files with
// their modes and bytes, dependencies, conffiles and scripts; only the
// bookkeeping differs (apk's lib/apk/packages/ files, noarch for all).
func TestIpkAndApkCarryTheSame(t *testing.T) {
	root := repoRoot(t)
	bin := tinyBinary(t, "amd64")
	ipkDir, apkDir := t.TempDir(), t.TempDir()
	for format, out := range map[string]string{"ipk": ipkDir, "apk": apkDir} {
		if rc, stdout, stderr := runMkipk(t, "build", "--format", format, "--root", root, "--version", "1.0.0-r1", "--bin", bin, "--out", out); rc != exitOK {
			t.Fatalf("%s: rc %d\n%s%s", format, rc, stdout, stderr)
		}
	}
	for _, c := range []struct{ ipkName, apkName string }{
		{"surflare-watchdog_1.0.0-r1_x86_64.ipk", "surflare-watchdog-1.0.0-r1.apk"},
		{"luci-app-surflare_1.0.0-r1_all.ipk", "luci-app-surflare-1.0.0-r1.apk"},
	} {
		ia := readPackage(t, filepath.Join(ipkDir, c.ipkName))
		aa, err := apk.Read(mustRead(t, filepath.Join(apkDir, c.apkName)))
		if err != nil {
			t.Fatal(err)
		}
		apkFiles := map[string]apk.File{}
		for _, f := range aa.Files {
			if !strings.HasPrefix(f.Path, "/lib/apk/packages/") {
				apkFiles[f.Path] = f
			}
		}
		n := 0
		for _, m := range ia.DataTar {
			if m.Type != tar.TypeReg {
				continue
			}
			n++
			p := strings.TrimPrefix(m.Name, ".")
			f, ok := apkFiles[p]
			if !ok || f.Mode != os.FileMode(m.Mode&0o7777) || !bytes.Equal(f.Data, m.Data) {
				t.Errorf("%s: %s differs in the apk (present %v, mode %v)", c.apkName, p, ok, f.Mode)
			}
		}
		if n != len(apkFiles) {
			t.Errorf("%s: %d files, the ipk %d", c.apkName, len(apkFiles), n)
		}
		var ipkDeps []string
		v, _ := ia.Control.Get("Depends")
		for _, d := range ipk.ParseDepends(v) {
			ipkDeps = append(ipkDeps, d.Alternatives[0])
		}
		slices.Sort(ipkDeps)
		if !slices.Equal(ipkDeps, aa.Depends) {
			t.Errorf("%s: depends %q, the ipk %q", c.apkName, aa.Depends, ipkDeps)
		}
		conf, _ := aa.File("/lib/apk/packages/" + aa.Name + ".conffiles")
		if got := strings.Fields(string(conf.Data)); !slices.Equal(got, ia.Conffiles) {
			t.Errorf("%s: conffiles %q, the ipk %q", c.apkName, got, ia.Conffiles)
		}
		for ipkScript, apkScript := range map[string]string{"postinst": "post-install", "prerm": "pre-deinstall", "postrm": "post-deinstall"} {
			m, ok := ia.ControlFile(ipkScript)
			if s, ok2 := aa.Scripts[apkScript]; ok != ok2 || ok && !bytes.Equal(m.Data, s) {
				t.Errorf("%s: %s differs from the ipk's %s", c.apkName, apkScript, ipkScript)
			}
		}
	}
}
