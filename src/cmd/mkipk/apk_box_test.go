package main

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"surflare-watchdog/src/testenv"
)

// box is an OpenWrt userland booted by ../shared/owrt/boot.sh (real procd
// as PID 1, ubusd, rc.common) in a network namespace of its own that has
// no interface but loopback: nothing the daemon tries reaches a real host.
type box struct {
	t     *testing.T
	dir   string // ../shared/owrt
	netns string
	pid   string
}

// bootBox boots a box and arranges its shutdown and the removal of its
// namespace and run files, also when the test fails.
func bootBox(t *testing.T) *box {
	t.Helper()
	dir := testenv.OpenWrtDir()
	switch {
	case dir == "":
		t.Skip("OpenWrt userland not found (want ../shared/owrt beside the repository root)")
	case os.Geteuid() != 0:
		t.Skip("needs root: booting the OpenWrt box")
	case testing.Short():
		t.Skip("boots the OpenWrt box")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("ip (iproute2) not installed")
	}
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		t.Fatal(err)
	}
	b := &box{t: t, dir: dir, netns: "apk-box-" + hex.EncodeToString(suffix)}
	if out, err := exec.Command("ip", "netns", "add", b.netns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v\n%s", b.netns, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command(filepath.Join(dir, "shutdown.sh"), b.netns, "20").CombinedOutput(); err != nil {
			t.Errorf("shutdown.sh %s: %v\n%s", b.netns, err, out)
		}
		if out, err := exec.Command("ip", "netns", "del", b.netns).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v\n%s", b.netns, err, out)
		}
		os.Remove("/run/owrtbox/" + b.netns + ".log")
		os.Remove("/run/owrtbox/" + b.netns + ".console.log")
	})
	out, err := exec.Command(filepath.Join(dir, "boot.sh"), b.netns, "--wait", "60").Output()
	if err != nil {
		t.Fatalf("boot.sh %s: %v\n%s", b.netns, err, out)
	}
	b.pid = strings.TrimSpace(string(out))
	return b
}

// sh runs a command line inside the box and returns its output and status.
func (b *box) sh(cmdline string) (string, int) {
	out, err := exec.Command(filepath.Join(b.dir, "enter.sh"), b.netns, cmdline).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	} else if err != nil {
		b.t.Fatalf("enter.sh: %v", err)
	}
	return string(out), 0
}

// put copies a host file into the box's /tmp.
func (b *box) put(src, name string) string {
	dst := filepath.Join("/proc", b.pid, "root", "tmp", "pkgs", name)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(dst, mustRead(b.t, src), 0o644); err != nil {
		b.t.Fatal(err)
	}
	return "/tmp/pkgs/" + name
}

var instancePID = regexp.MustCompile(`"pid":\s*(\d+)`)

// service waits up to 20 s for procd's view of surflare-watchdog to
// satisfy ok, and returns it.
func (b *box) service(ok func(list string) bool) string {
	var list string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		list, _ = b.sh(`ubus call service list '{"name":"surflare-watchdog"}'`)
		if ok(list) {
			break
		}
	}
	return list
}

// TestApkInTheOpenWrtBox installs our .apk packages with apk in a booted
// OpenWrt (real procd, ubusd, rc.common), upgrades and removes them: the
// install enables and starts the service under procd, the upgrade
// restarts it, the removal stops it, tears its tables down and removes it.
func TestApkInTheOpenWrtBox(t *testing.T) {
	b := bootBox(t)
	root := repoRoot(t)
	bin := goBuild(t, root, "./src/cmd/surflare-watchdog", "amd64")
	var stubs []string
	for _, s := range stubDependencies(t, t.TempDir()) {
		stubs = append(stubs, b.put(s, "stubs/"+filepath.Base(s)))
	}
	build := func(version string) []string {
		out := t.TempDir()
		if rc, stdout, stderr := runMkipk(t, "build", "--format", "apk", "--root", root, "--version", version, "--bin", bin, "--out", out); rc != exitOK {
			t.Fatalf("build %s: rc %d\n%s%s", version, rc, stdout, stderr)
		}
		var in []string
		for _, p := range []string{corePackage, luciPackage} {
			name := p + "-" + version + ".apk"
			in = append(in, b.put(filepath.Join(out, name), version+"/"+name))
		}
		return in
	}
	apk := func(args ...string) string {
		t.Helper()
		out, rc := b.sh("apk --allow-untrusted --no-network " + strings.Join(args, " "))
		t.Logf("apk %s:\n%s", args[0], out)
		if rc != 0 {
			t.Fatalf("apk %s: rc %d\n%s", strings.Join(args, " "), rc, out)
		}
		return out
	}
	running := func(list string) bool { return strings.Contains(list, `"running": true`) }

	apk(append(append([]string{"add", "--initdb"}, stubs...), build("1.0.0-r1")...)...)
	list := b.service(running)
	if !running(list) || !strings.Contains(list, "/usr/bin/surflare-watchdog") {
		t.Fatalf("after apk add, procd does not run the daemon:\n%s", list)
	}
	first := instancePID.FindStringSubmatch(list)
	if _, rc := b.sh("/etc/init.d/surflare-watchdog enabled && /etc/init.d/surflare-bootlock enabled"); rc != 0 {
		t.Error("apk add did not enable both services")
	}
	// The daemon registers its object once it has started up.
	var obj string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if obj, _ = b.sh("ubus list surflare"); strings.TrimSpace(obj) == "surflare" {
			break
		}
	}
	if strings.TrimSpace(obj) != "surflare" {
		t.Errorf("the daemon's ubus object is not there: %q", obj)
	}

	apk(append([]string{"add"}, build("1.0.0-r2")...)...)
	list = b.service(func(l string) bool {
		m := instancePID.FindStringSubmatch(l)
		return running(l) && m != nil && first != nil && m[1] != first[1]
	})
	if m := instancePID.FindStringSubmatch(list); !running(list) || m == nil || first == nil || m[1] == first[1] {
		t.Errorf("after the upgrade the daemon was not restarted (pid before %v):\n%s", first, list)
	}
	if out, _ := b.sh("apk info -v"); !strings.Contains(out, corePackage+"-1.0.0-r2") {
		t.Errorf("not upgraded:\n%s", out)
	}

	apk("del", corePackage, luciPackage)
	list = b.service(func(l string) bool { return !strings.Contains(l, "surflare-watchdog") })
	if strings.Contains(list, "surflare-watchdog") {
		t.Errorf("procd still knows the service after apk del:\n%s", list)
	}
	if out, rc := b.sh("pidof surflare-watchdog"); rc == 0 {
		t.Errorf("the daemon still runs after apk del: %s", out)
	}
	if out, _ := b.sh("nft list tables"); strings.Contains(out, "killswitch") || strings.Contains(out, "sw_lan_tproxy") {
		t.Errorf("our tables outlive the package:\n%s", out)
	}
	if out, rc := b.sh("ls /usr/bin/surflare-watchdog /etc/init.d/surflare-watchdog /etc/rc.d/S21surflare-watchdog 2>/dev/null"); rc == 0 || strings.TrimSpace(out) != "" {
		t.Errorf("files left after apk del: %s", out)
	}
}
