package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// crossArchs are the router families we ship besides x86_64, with the
// qemu-user emulator (Debian's qemu-user-static) that runs their binary.
var crossArchs = []struct{ arch, goarch, qemu string }{
	{"aarch64", "arm64", "qemu-aarch64-static"},
	{"arm", "arm", "qemu-arm-static"},
	{"mipsel", "mipsle", "qemu-mipsel-static"},
}

// smokeSession runs the CLI a user or the init script runs without a
// router's kernel state, and returns the transcript: the version, the
// shipped config's check, uci edits and reads, and the firewall plan for
// every role and mode. run executes the binary with args.
func smokeSession(t *testing.T, run func(args ...string) string, dir string) string {
	t.Helper()
	root := repoRoot(t)
	conf := filepath.Join(dir, "surflare")
	if err := os.WriteFile(conf, mustRead(t, filepath.Join(root, "files", "etc", "config", "surflare")), 0o600); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	step := func(args ...string) {
		fmt.Fprintf(&b, "$ %s\n%s", strings.Join(args, " "), run(args...))
	}
	step("version")
	step("config", "check", "--config", conf)
	step("uci", "-c", dir, "show", "surflare")
	step("uci", "-c", dir, "add_list", "surflare.main.candidate=Tokyo")
	step("uci", "-c", dir, "commit", "surflare")
	step("uci", "-c", dir, "get", "surflare.main.candidate")
	for _, role := range []string{"router", "laptop"} {
		for _, mode := range []string{"rule", "global"} {
			step("uci", "-c", dir, "set", "surflare.main.role="+role)
			step("uci", "-c", dir, "set", "surflare.main.mode="+mode)
			step("uci", "-c", dir, "commit", "surflare")
			step("config", "check", "--config", conf)
			step("firewall", "plan", "--config", conf, "--leases", filepath.Join(dir, "no-leases"))
		}
	}
	step("uci", "-c", dir, "delete", "surflare.main.candidate")
	step("uci", "-c", dir, "commit", "surflare")
	step("uci", "-c", dir, "export", "surflare")
	return strings.ReplaceAll(b.String(), dir, "DIR")
}

// Every architecture runs its own binary: the aarch64, arm and mipsel
// builds, under qemu-user, print exactly what the x86_64 build prints,
// but for the architecture in `version`.
func TestEveryArchitectureRunsTheSame(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the daemon four times")
	}
	root := repoRoot(t)
	// runner runs bin with args, under emulator unless it is "", with a
	// bare environment, and returns the output and exit status.
	runner := func(t *testing.T, emulator, bin string) func(args ...string) string {
		return func(args ...string) string {
			cmd := exec.Command(bin, args...)
			if emulator != "" {
				cmd = exec.Command(emulator, append([]string{bin}, args...)...)
			}
			cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "LANG=C"}
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			rc := 0
			if ee, ok := err.(*exec.ExitError); ok {
				rc = ee.ExitCode()
			} else if err != nil {
				t.Fatalf("%s %v: %v", bin, args, err)
			}
			return fmt.Sprintf("%s[rc %d]\n", out.String(), rc)
		}
	}
	native := goBuild(t, root, "./src/cmd/surflare-watchdog", "amd64")
	want := smokeSession(t, runner(t, "", native), t.TempDir())
	if !strings.Contains(want, "linux/amd64") || !strings.Contains(want, "table inet killswitch") || !strings.Contains(want, "mode=global") {
		t.Fatalf("x86_64 session does not show a version and plans:\n%s", want)
	}
	archRe := regexp.MustCompile(`linux/[a-z0-9]+`)
	for _, c := range crossArchs {
		t.Run(c.arch, func(t *testing.T) {
			qemu, err := exec.LookPath(c.qemu)
			if err != nil {
				t.Skipf("%s not installed (Debian: apt-get install qemu-user-static)", c.qemu)
			}
			bin := goBuild(t, root, "./src/cmd/surflare-watchdog", c.goarch)
			got := smokeSession(t, runner(t, qemu, bin), t.TempDir())
			if !strings.Contains(got, "linux/"+c.goarch) {
				t.Errorf("version does not name linux/%s:\n%s", c.goarch, got)
			}
			if g, w := archRe.ReplaceAllString(got, "linux/ARCH"), archRe.ReplaceAllString(want, "linux/ARCH"); g != w {
				t.Errorf("%s output differs from x86_64:\n--- %s\n%s\n--- x86_64\n%s", c.arch, c.arch, g, w)
			}
		})
	}
}
