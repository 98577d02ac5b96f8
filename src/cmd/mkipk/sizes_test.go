package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The size report has one line per package architecture with the binary
// of its family, its ipk and apk, architectures with '_' included.
func TestSizesListEveryArchitecture(t *testing.T) {
	build := t.TempDir()
	for name, n := range map[string]int{
		"x86_64/surflare-watchdog":                       3 << 20,
		"mipsel/surflare-watchdog":                       2 << 20,
		"ipk/surflare-watchdog_1.0.0-r1_x86_64.ipk":      1536,
		"ipk/surflare-watchdog_1.0.0-r1_mipsel_24kc.ipk": 2048,
		"ipk/luci-app-surflare_1.0.0-r1_all.ipk":         10,
		"apk/mipsel_24kc/surflare-watchdog-1.0.0-r1.apk": 4096,
		"apk/mipsel_24kc/luci-app-surflare-1.0.0-r1.apk": 512,
		"apk/x86_64/luci-app-surflare-1.0.0-r1.apk":      512,
	} {
		p := filepath.Join(build, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rc, out, errOut := runMkipk(t, "sizes", build)
	if rc != exitOK {
		t.Fatalf("rc %d: %s", rc, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := []string{
		"mipsel_24kc 2.0 MiB 2.0 KiB 4.0 KiB 512 B",
		"x86_64 3.0 MiB 1.5 KiB - -",
	}
	if len(lines) != 3 {
		t.Fatalf("want a header and 2 rows:\n%s", out)
	}
	for i, w := range want {
		if got := strings.Join(strings.Fields(lines[i+1]), " "); got != w {
			t.Errorf("row %d: %q, want %q", i+1, got, w)
		}
	}
	if rc, _, _ := runMkipk(t, "sizes", t.TempDir()); rc != exitFailure {
		t.Errorf("empty build dir: rc %d, want failure", rc)
	}
}
