package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"surflare-watchdog/src/testenv"
)

// The real opkg of OpenWrt 24.10 takes the 0.1.0-rN versions `make ipk`
// now writes: it installs one, upgrades it to the next, and orders the old
// 0.1.0-N scheme below the new one, so routers on old packages upgrade.
func TestOpkgTakesTheVersionScheme(t *testing.T) {
	root := testenv.OpenWrtRoot(t)
	if err := os.MkdirAll(filepath.Join(root, "tmp", "lock"), 0o755); err != nil {
		t.Fatal(err)
	}
	opkg := func(args ...string) (string, int) { return testenv.Chroot(root, nil, "/bin/opkg", args...) }
	for _, c := range [][2]string{{"0.1.0-272", "0.1.0-r273"}, {"0.1.0-r273", "0.1.0-r274"}, {"0.1.0-r9", "0.1.0-r10"}} {
		if out, rc := opkg("compare-versions", c[0], "<<", c[1]); rc != 0 {
			t.Errorf("opkg: %s is not older than %s (rc %d)\n%s", c[0], c[1], rc, out)
		}
	}
	bin := tinyBinary(t, "amd64")
	for _, v := range []string{"0.1.0-r9", "0.1.0-r10"} {
		out := filepath.Join(root, "tmp", "ipk", v)
		if rc, stdout, stderr := runMkipk(t, "build", "--root", repoRoot(t), "--version", v, "--bin", bin, "--out", out, "--luci=false"); rc != exitOK {
			t.Fatalf("build %s: rc %d\n%s%s", v, rc, stdout, stderr)
		}
		file := "/tmp/ipk/" + v + "/" + corePackage + "_" + v + "_x86_64.ipk"
		res, rc := opkg("install", file)
		t.Logf("opkg install %s: rc %d\n%s", v, rc, res)
		list, _ := opkg("list-installed", corePackage)
		if !strings.Contains(list, corePackage+" - "+v) {
			t.Errorf("after installing %s, opkg lists %q\n%s", v, list, res)
		}
	}
}
