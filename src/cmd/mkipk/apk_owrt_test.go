package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"surflare-watchdog/src/apk"
	"surflare-watchdog/src/testenv"
)

// stubDependencies writes an empty apk package for every dependency of
// ours into dir: the OpenWrt root has their files (installed by opkg), but
// its apk database is new and knows none of them.
func stubDependencies(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	seen := map[string]bool{corePackage: true}
	for _, d := range append(append([]string{}, coreDepends...), luciDepends...) {
		if seen[d] {
			continue
		}
		seen[d] = true
		p := &apk.Package{Name: d, Version: "0-r0", Arch: apk.NoArch, Description: "stand-in: present in the OpenWrt root"}
		b, err := p.Build()
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Join(dir, p.FileName())
		if err := os.WriteFile(name, b, 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	return names
}

// sourceCopy copies what mkipk reads (files/, openwrt/ipk/,
// luci-app-surflare/) so a test can change a shipped file.
func sourceCopy(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	for _, d := range []string{"files", "openwrt", luciPackage} {
		if out, err := exec.Command("cp", "-a", filepath.Join(repoRoot(t), d), dst).CombinedOutput(); err != nil {
			t.Fatalf("cp %s: %v\n%s", d, err, out)
		}
	}
	return dst
}

// inRoot maps a path of the OpenWrt root to the host.
func inRoot(root, p string) string { return filepath.Join(root, p) }

// TestApkLifecycleInOpenWrtRoot installs, upgrades and removes our .apk
// packages with the real apk-tools 3 in an OpenWrt root (chroot, a fresh
// apk database, the dependencies as stand-ins), running our scripts there:
// the install enables the services, the upgrade keeps a changed config
// and leaves the new one beside it as .apk-new, and keeps a service the
// user disabled disabled, and the removal disables the services, removes
// our files and keeps the changed config.
func TestApkLifecycleInOpenWrtRoot(t *testing.T) {
	root := testenv.OpenWrtRoot(t)
	// What /etc/init.d/boot makes on a booted router (/var is /tmp):
	// procd.sh takes its lock there.
	for _, d := range []string{"tmp/lock", "tmp/run"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	src := sourceCopy(t)
	bin := tinyBinary(t, "amd64")
	build := func(version, sub string) []string {
		out := filepath.Join(root, "tmp", "pkgs", sub)
		rc, stdout, stderr := runMkipk(t, "build", "--format", "apk", "--root", src, "--version", version, "--bin", bin, "--out", out)
		if rc != exitOK {
			t.Fatalf("build %s: rc %d\n%s%s", version, rc, stdout, stderr)
		}
		return []string{"/tmp/pkgs/" + sub + "/" + corePackage + "-" + version + ".apk", "/tmp/pkgs/" + sub + "/" + luciPackage + "-" + version + ".apk"}
	}
	stubDir := filepath.Join(root, "tmp", "pkgs", "stubs")
	if err := os.MkdirAll(stubDir, 0o755); err != nil {
		t.Fatal(err)
	}
	var stubs []string
	for _, s := range stubDependencies(t, stubDir) {
		stubs = append(stubs, strings.TrimPrefix(s, root))
	}
	apkRun := func(args ...string) (string, int) {
		return testenv.Chroot(root, nil, "/usr/bin/apk", append([]string{"--allow-untrusted", "--no-network"}, args...)...)
	}
	installed := func() string {
		out, _ := apkRun("info", "-v")
		return out
	}
	exists := func(p string) bool { _, err := os.Lstat(inRoot(root, p)); return err == nil }
	read := func(p string) string { b, _ := os.ReadFile(inRoot(root, p)); return string(b) }

	// Install into the fresh database.
	v1 := build("1.0.0-r1", "v1")
	out, rc := apkRun(append(append([]string{"add", "--initdb"}, stubs...), v1...)...)
	t.Logf("apk add:\n%s", out)
	if rc != 0 {
		t.Fatalf("apk add: rc %d\n%s", rc, out)
	}
	for _, want := range []string{corePackage + "-1.0.0-r1", luciPackage + "-1.0.0-r1"} {
		if !strings.Contains(installed(), want) {
			t.Errorf("apk info -v lacks %s:\n%s", want, installed())
		}
	}
	if b, _ := os.ReadFile(inRoot(root, binaryPath)); !bytes.Equal(b, mustRead(t, bin)) {
		t.Errorf("%s is not the binary we packaged", binaryPath)
	}
	for p, mode := range map[string]os.FileMode{binaryPath: 0o755, configPath: 0o600, initScript: 0o755, hotplugPath: 0o644, luciACL: 0o644} {
		if fi, err := os.Stat(inRoot(root, p)); err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: %v, want mode %04o", p, err, mode)
		}
	}
	conffiles := read("/lib/apk/packages/" + corePackage + ".conffiles")
	for _, c := range []string{configPath, dnsmasqHook, "/etc/smartdns/surflare.conf"} {
		if !strings.Contains(conffiles, c+"\n") {
			t.Errorf("%s.conffiles lacks %s:\n%s", corePackage, c, conffiles)
		}
	}
	if !strings.Contains(read("/lib/apk/packages/"+corePackage+".list"), binaryPath+"\n") {
		t.Errorf("%s.list lacks the binary", corePackage)
	}
	// post-install enabled both services (rc.common enable: the rc.d links).
	for _, link := range []string{"/etc/rc.d/S21surflare-watchdog", "/etc/rc.d/S18surflare-bootlock"} {
		if !exists(link) {
			t.Errorf("post-install did not enable %s", link)
		}
	}

	// The user edits the config and disables the boot lock; v2 ships a
	// changed config.
	userConfig := read(configPath) + "\n# mine\n"
	if err := os.WriteFile(inRoot(root, configPath), []byte(userConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, rc := testenv.Chroot(root, nil, "/etc/init.d/surflare-bootlock", "disable"); rc != 0 {
		t.Fatalf("disable: %s", out)
	}
	shipped := filepath.Join(src, "files", "etc", "config", "surflare")
	v2config := string(mustRead(t, shipped)) + "\n# shipped with 1.0.0-r2\n"
	if err := os.WriteFile(shipped, []byte(v2config), 0o644); err != nil {
		t.Fatal(err)
	}
	v2 := build("1.0.0-r2", "v2")
	out, rc = apkRun(append([]string{"add"}, v2...)...)
	t.Logf("apk add (upgrade):\n%s", out)
	if rc != 0 {
		t.Fatalf("upgrade: rc %d\n%s", rc, out)
	}
	if !strings.Contains(installed(), corePackage+"-1.0.0-r2") {
		t.Errorf("not upgraded:\n%s", installed())
	}
	if got := read(configPath); got != userConfig {
		t.Errorf("upgrade changed the user's config:\n%s", got)
	}
	if got := read(configPath + ".apk-new"); got != v2config {
		t.Errorf("%s.apk-new is %q, want the new shipped config", configPath, got)
	}
	if !strings.Contains(out, "etc/config/surflare.apk-new") {
		t.Errorf("apk did not say it installed surflare.apk-new:\n%s", out)
	}
	if exists("/etc/rc.d/S18surflare-bootlock") {
		t.Error("post-upgrade re-enabled the boot lock the user had disabled")
	}
	if !exists("/etc/rc.d/S21surflare-watchdog") {
		t.Error("the watchdog is no longer enabled after the upgrade")
	}

	// Removal.
	out, rc = apkRun("del", corePackage, luciPackage)
	t.Logf("apk del:\n%s", out)
	if rc != 0 {
		t.Fatalf("apk del: rc %d\n%s", rc, out)
	}
	if strings.Contains(installed(), corePackage) || strings.Contains(installed(), luciPackage) {
		t.Errorf("still installed:\n%s", installed())
	}
	for _, gone := range []string{binaryPath, initScript, bootLockInit, hotplugPath, luciACL, "/etc/rc.d/S21surflare-watchdog",
		"/lib/apk/packages/" + corePackage + ".list"} {
		if exists(gone) {
			t.Errorf("%s is still there after apk del", gone)
		}
	}
	if got := read(configPath); got != userConfig {
		t.Errorf("apk del did not keep the user's config: %q", got)
	}
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
