package ipk

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildHello compiles a tiny Go program for goarch with cgo off, the way
// `make build` compiles the daemon.
func buildHello(t *testing.T, goarch string) []byte {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not in PATH")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module hello\n\ngo 1.22\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "hello")
	cmd := exec.Command(goBin, "build", "-trimpath", "-ldflags=-s -w", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch, "GOMIPS=softfloat", "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", goarch, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCheckStaticBinaryPerArchitecture(t *testing.T) {
	for _, c := range []struct {
		goarch string
		good   []string
		bad    []string
	}{
		{"amd64", []string{"x86_64"}, []string{"aarch64_generic", "mipsel_24kc", "i386_pentium4"}},
		{"arm64", []string{"aarch64_generic", "aarch64_cortex-a53"}, []string{"x86_64", "arm_cortex-a7"}},
		{"mipsle", []string{"mipsel_24kc", "mipsel_74kc"}, []string{"mips_24kc", "mips64el_octeonplus", "x86_64"}},
	} {
		bin := buildHello(t, c.goarch)
		for _, arch := range c.good {
			if err := CheckStaticBinary(bin, arch); err != nil {
				t.Errorf("%s binary as %s: %v", c.goarch, arch, err)
			}
		}
		for _, arch := range c.bad {
			if err := CheckStaticBinary(bin, arch); err == nil {
				t.Errorf("%s binary accepted as %s", c.goarch, arch)
			}
		}
	}
}

func TestCheckStaticBinaryRefusesDynamic(t *testing.T) {
	// The host's /bin/sh is a dynamically linked ELF with a PT_INTERP.
	sh, err := os.ReadFile("/bin/sh")
	if err != nil {
		t.Skip("no /bin/sh")
	}
	resolved, _ := filepath.EvalSymlinks("/bin/sh")
	err = CheckStaticBinary(sh, "x86_64")
	if err == nil || !strings.Contains(err.Error(), "dynamically linked") {
		t.Errorf("%s: err %v, want dynamically linked", resolved, err)
	}
	if err := CheckStaticBinary([]byte("#!/bin/sh\n"), "x86_64"); err == nil {
		t.Error("a shell script passed as a binary")
	}
}
