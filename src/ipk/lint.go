package ipk

import (
	"archive/tar"
	"bytes"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
)

// requiredFields are the control fields every package we ship carries. opkg
// itself only insists on Package and a configured Architecture, but the
// others are what `opkg info` and LuCI's package list show.
var requiredFields = []string{"Package", "Version", "Architecture", "Installed-Size", "Maintainer", "Description"}

// Lint checks an archive against the layout of the accepted fixture sample
// and OpenWrt's ipkg-build, which is stricter than what opkg tolerates: the
// three outer members in order, debian-binary "2.0", root-owned entries with
// mtime 0 and "./" names, the control fields, Installed-Size, conffiles that
// exist in the data, and executable shell maintainer scripts. It returns
// every problem found, not just the first.
func Lint(a *Archive) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	var names []string
	for _, m := range a.Outer {
		names = append(names, m.Name)
	}
	if want := []string{MemberDebianBinary, MemberData, MemberControl}; !slices.Equal(names, want) {
		bad("outer members are %q, want %q", names, want)
	}
	if m, ok := a.member("debian-binary"); !ok || string(m.Data) != DebianBinary {
		bad("debian-binary must contain %q", DebianBinary)
	}
	for _, part := range []struct {
		name    string
		members []Member
	}{{"outer archive", a.Outer}, {"control.tar.gz", a.ControlTar}, {"data.tar.gz", a.DataTar}} {
		for _, m := range part.members {
			if err := lintMember(m); err != nil {
				bad("%s: %w", part.name, err)
			}
		}
	}
	errs = append(errs, lintControl(a)...)
	errs = append(errs, lintData(a)...)
	for _, name := range ScriptNames {
		m, ok := a.ControlFile(name)
		if !ok {
			continue
		}
		if m.Mode&0o777 != 0o755 {
			bad("control.tar.gz: %s has mode %04o, want 0755", name, m.Mode&0o7777)
		}
		if !bytes.HasPrefix(m.Data, []byte("#!/bin/sh")) {
			bad("control.tar.gz: %s does not start with #!/bin/sh", name)
		}
	}
	return errs
}

func lintMember(m Member) error {
	switch {
	case m.UID != 0 || m.GID != 0:
		return fmt.Errorf("%s is owned by %d:%d, want 0:0", m.Name, m.UID, m.GID)
	case !m.ModTime.Equal(epoch):
		return fmt.Errorf("%s has mtime %s, want the epoch (reproducible builds)", m.Name, m.ModTime.UTC())
	case m.Name != "./" && !strings.HasPrefix(m.Name, "./"):
		return fmt.Errorf("%s does not start with ./", m.Name)
	case slices.Contains(strings.Split(m.Name, "/"), ".."):
		return fmt.Errorf("%s escapes the root", m.Name)
	case m.Type != tar.TypeReg && m.Type != tar.TypeDir:
		return fmt.Errorf("%s is tar type %q, want a regular file or directory", m.Name, m.Type)
	}
	return nil
}

func lintControl(a *Archive) []error {
	var errs []error
	for _, f := range requiredFields {
		if v, ok := a.Control.Get(f); !ok || v == "" {
			errs = append(errs, fmt.Errorf("control: %s is missing", f))
		}
	}
	for field, pattern := range map[string]interface{ MatchString(string) bool }{
		"Package": namePattern, "Version": versionPattern, "Architecture": archPattern,
	} {
		if v, ok := a.Control.Get(field); ok && !pattern.MatchString(v) {
			errs = append(errs, fmt.Errorf("control: %s %q is not a valid value", field, v))
		}
	}
	if v, ok := a.Control.Get("Installed-Size"); ok {
		var sum int64
		for _, m := range a.DataTar {
			if m.Type == tar.TypeReg {
				sum += int64(len(m.Data))
			}
		}
		if n, err := strconv.ParseInt(v, 10, 64); err != nil || n != sum {
			errs = append(errs, fmt.Errorf("control: Installed-Size %q, want %d (sum of the data's file sizes)", v, sum))
		}
	}
	for _, c := range a.Conffiles {
		if !path.IsAbs(c) {
			errs = append(errs, fmt.Errorf("conffiles: %q is not an absolute path", c))
			continue
		}
		if m, ok := a.DataFile(c); !ok || m.Type != tar.TypeReg {
			errs = append(errs, fmt.Errorf("conffiles: %s is not a regular file in data.tar.gz", c))
		}
	}
	return errs
}

// lintData checks that every entry's parent directory was listed before it,
// as GNU tar writes and as opkg's .list bookkeeping expects.
func lintData(a *Archive) []error {
	var errs []error
	seen := map[string]bool{".": true}
	for _, m := range a.DataTar {
		if m.Name == "./" {
			continue
		}
		name := strings.TrimSuffix(stripDot(m.Name), "/")
		if parent := path.Dir(name); !seen[parent] {
			errs = append(errs, fmt.Errorf("data.tar.gz: %s comes before its directory %s/", m.Name, parent))
		}
		if m.Type == tar.TypeDir {
			seen[name] = true
		}
	}
	return errs
}
