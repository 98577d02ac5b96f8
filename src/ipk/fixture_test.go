package ipk

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"surflare-watchdog/src/testenv"
	"testing"
)

func fixtures(t *testing.T) string { return testenv.Fixtures(t, "ipk") }

func readFixture(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtures(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fixtureTarget is the opkg the fixtures were recorded with: opkg.conf's
// architectures and a root where only libc is installed.
func fixtureTarget(t *testing.T) Target {
	t.Helper()
	target, err := ParseOpkgConf(readFixture(t, "opkg.conf"))
	if err != nil {
		t.Fatal(err)
	}
	target.Available["libc"] = true
	return target
}

func TestAcceptedSampleReadsLikeOpkg(t *testing.T) {
	target := fixtureTarget(t)
	for _, name := range []string{"surflare-test_1.0.0-1_all.ipk", "surflare-test_1.0.0-2_all.ipk"} {
		a, err := Read(readFixture(t, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := target.CheckInstall(a); err != nil {
			t.Errorf("%s: opkg installed it, we refuse: %v", name, err)
		}
		if got := a.Conffiles; len(got) != 1 || got[0] != "/etc/config/surflare" {
			t.Errorf("%s: conffiles %q", name, got)
		}
		if m, ok := a.DataFile("/usr/bin/surflare-hello"); !ok || m.Mode != 0o755 {
			t.Errorf("%s: /usr/bin/surflare-hello missing or not 0755: %+v", name, m.Mode)
		}
		// The sample was hand-made with a fake Installed-Size (1024 for 65
		// bytes of data); that is the one rule of ours it breaks.
		problems := Lint(a)
		if len(problems) != 1 || !strings.Contains(problems[0].Error(), "Installed-Size") {
			t.Errorf("%s: lint problems %v, want only the Installed-Size one", name, problems)
		}
	}
	// The unpacked copy is the same content: compare the control file.
	a, err := Read(readFixture(t, "surflare-test_1.0.0-1_all.ipk"))
	if err != nil {
		t.Fatal(err)
	}
	want := readFixture(t, "surflare-test_1.0.0-1_all.unpacked/control/control")
	if got, _ := a.ControlFile("control"); string(got.Data) != string(want) {
		t.Errorf("control differs from the unpacked copy:\n%s\nwant\n%s", got.Data, want)
	}
	if got := a.Control.Bytes(); string(got) != string(want) {
		t.Errorf("control does not round-trip through ParseControl/Bytes:\n%s", got)
	}
}

func TestAcceptedVariantsInstall(t *testing.T) {
	target := fixtureTarget(t)
	entries, err := os.ReadDir(filepath.Join(fixtures(t), "accepted"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) == 0 {
		t.Fatal("no accepted variants")
	}
	for _, e := range entries {
		t.Run(e.Name(), func(t *testing.T) {
			a, err := Read(readFixture(t, filepath.Join("accepted", e.Name())))
			if err != nil {
				t.Fatalf("opkg accepted it, we refuse: %v", err)
			}
			if err := target.CheckInstall(a); err != nil {
				t.Fatalf("opkg installed it, we refuse: %v", err)
			}
			// The transcript names the same package we read.
			results := string(readFixture(t, filepath.Join("results", strings.TrimSuffix(e.Name(), ".ipk")+".txt")))
			name, _ := a.Control.Get("Package")
			if !strings.Contains(results, "Installing "+name+" (") {
				t.Errorf("results do not show %s being installed", name)
			}
		})
	}
}

func TestRejectedVariantsFailForOpkgsReason(t *testing.T) {
	target := fixtureTarget(t)
	entries, err := os.ReadDir(filepath.Join(fixtures(t), "rejected"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) == 0 {
		t.Fatal("no rejected variants")
	}
	for _, e := range entries {
		t.Run(e.Name(), func(t *testing.T) {
			results := string(readFixture(t, filepath.Join("results", strings.TrimSuffix(e.Name(), ".ipk")+".txt")))
			a, err := Read(readFixture(t, filepath.Join("rejected", e.Name())))
			if err == nil {
				err = target.CheckInstall(a)
			}
			if err == nil {
				t.Fatalf("opkg rejected it, we accept; opkg said:\n%s", results)
			}
			var archErr *ArchError
			var depErr *DependencyError
			switch {
			case errors.Is(err, ErrMalformed):
				if !strings.Contains(results, "Malformed package file "+e.Name()+".") {
					t.Errorf("we call it malformed (%v), opkg said:\n%s", err, results)
				}
			case errors.As(err, &depErr):
				for _, line := range strings.Split(depErr.Error(), "\n") {
					if !strings.Contains(results, line) {
						t.Errorf("our %q is not in opkg's output:\n%s", line, results)
					}
				}
			case errors.As(err, &archErr):
				msg := "Packages for " + archErr.Package + " found, but incompatible with the architectures configured"
				if !strings.Contains(err.Error(), msg) || !strings.Contains(results, msg) {
					t.Errorf("arch error %q, opkg said:\n%s", err, results)
				}
			default:
				t.Errorf("unexpected error kind %T: %v", err, err)
			}
			if !strings.Contains(results, "[exit 255]") {
				t.Errorf("fixture transcript does not end in exit 255")
			}
		})
	}
}

func TestReadRefusesTruncatedAndGarbage(t *testing.T) {
	good := readFixture(t, "surflare-test_1.0.0-1_all.ipk")
	for name, b := range map[string][]byte{
		"empty":     nil,
		"garbage":   []byte("not a package at all"),
		"truncated": good[:len(good)/2],
		"header":    good[:10],
	} {
		if _, err := Read(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err %v, want ErrMalformed", name, err)
		}
	}
}

func FuzzRead(f *testing.F) {
	dir := filepath.Join("..", "..", "..", "shared", "fixtures", "ipk")
	for _, glob := range []string{"*.ipk", "accepted/*.ipk", "rejected/*.ipk"} {
		files, _ := filepath.Glob(filepath.Join(dir, glob))
		for _, name := range files {
			if b, err := os.ReadFile(name); err == nil {
				f.Add(b)
			}
		}
	}
	f.Add([]byte{0x1f, 0x8b})
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := Read(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error not marked malformed: %v", err)
			}
			return
		}
		// Whatever reads must lint and judge without panicking.
		_ = Lint(a)
		_ = Target{}.CheckInstall(a)
	})
}
