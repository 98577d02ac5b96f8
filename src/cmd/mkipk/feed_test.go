package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"surflare-watchdog/src/apk"
)

// openwrt/Makefile (the SDK build) must ship the same conffiles as
// `make ipk`/`make apk`, and turn the repository's version into what both
// opkg (24.10) and apk (25.12) accept: PKG_VERSION in apk's grammar,
// PKG_RELEASE a number.
func TestFeedMakefileMatchesOurPackages(t *testing.T) {
	root := repoRoot(t)
	mk := string(mustRead(t, filepath.Join(root, "openwrt", "Makefile")))
	m := regexp.MustCompile(`(?s)define Package/surflare-watchdog/conffiles\n(.*?)endef`).FindStringSubmatch(mk)
	if m == nil {
		t.Fatal("openwrt/Makefile has no conffiles define")
	}
	feed := strings.Fields(m[1])
	core, err := buildCore(root, "1.0.0-r1", "x86_64", mustRead(t, tinyBinary(t, "amd64")))
	if err != nil {
		t.Fatal(err)
	}
	if got := core.Conffiles(); !slices.Equal(feed, got) {
		t.Errorf("openwrt/Makefile conffiles %q, make ipk/apk ship %q", feed, got)
	}
	for _, c := range feed {
		if !strings.Contains(mk, "files"+filepath.Dir(c)) {
			t.Errorf("openwrt/Makefile does not install %s", c)
		}
	}

	makeBin, err := exec.LookPath("make")
	if err != nil {
		t.Skip("make not installed")
	}
	var lines []string
	for _, l := range strings.Split(mk, "\n") {
		if regexp.MustCompile(`^(SURFLARE_VERSION \?=|PKG_VERSION:=|PKG_RELEASE:=)`).MatchString(l) {
			lines = append(lines, l)
		}
	}
	if len(lines) != 3 {
		t.Fatalf("version lines %q", lines)
	}
	script := filepath.Join(t.TempDir(), "version.mk")
	body := strings.Join(lines, "\n") + "\nall:\n\t@echo $(PKG_VERSION) $(PKG_RELEASE)\n"
	if err := os.WriteFile(script, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	for given, want := range map[string]string{"": "0.1.0 1", "0.1.0-r272": "0.1.0 272", "1.2.3_rc1-r5": "1.2.3_rc1 5"} {
		args := []string{"-s", "-f", script}
		if given != "" {
			args = append(args, "SURFLARE_VERSION="+given)
		}
		out, err := exec.Command(makeBin, args...).Output()
		if err != nil {
			t.Fatalf("make: %v", err)
		}
		got := strings.TrimSpace(string(out))
		if got != want {
			t.Errorf("SURFLARE_VERSION=%q: PKG_VERSION PKG_RELEASE %q, want %q", given, got, want)
		}
		v, rel, _ := strings.Cut(got, " ")
		if !apk.ValidVersion(v+"-r"+rel) || strings.Contains(v, "-") {
			t.Errorf("%q-r%q is not a version apk takes", v, rel)
		}
	}
}
