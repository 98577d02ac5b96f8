package ipk

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// Target is what a router's opkg knows when asked to install a file: the
// architectures its opkg.conf lists and the packages already installed (or
// installable from its feeds).
type Target struct {
	// Archs maps an architecture to its priority ("arch x86_64 10").
	Archs map[string]int
	// Available holds the package names a Depends entry can be satisfied by.
	Available map[string]bool
}

// ParseOpkgConf reads the "arch NAME PRIORITY" lines of an opkg.conf; other
// lines (dest, lists_dir, src/gz) are not needed to judge one file.
func ParseOpkgConf(data []byte) (Target, error) {
	t := Target{Archs: map[string]int{}, Available: map[string]bool{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "arch" {
			continue
		}
		if len(f) != 3 {
			return Target{}, fmt.Errorf("opkg.conf line %d: want \"arch NAME PRIORITY\", got %q", n, sc.Text())
		}
		prio, err := strconv.Atoi(f[2])
		if err != nil {
			return Target{}, fmt.Errorf("opkg.conf line %d: priority %q: %w", n, f[2], err)
		}
		t.Archs[f[1]] = prio
	}
	return t, sc.Err()
}

// ArchError is opkg's "Packages for P found, but incompatible with the
// architectures configured": the Architecture field is missing or not one of
// the target's.
type ArchError struct {
	Package string
	Arch    string // empty when the field is missing
}

func (e *ArchError) Error() string {
	return fmt.Sprintf("pkg_hash_fetch_best_installation_candidate: Packages for %s found, but incompatible with the architectures configured (Architecture %q)", e.Package, e.Arch)
}

// DependencyError is opkg's "pkg_hash_check_unresolved: cannot find
// dependency D for P", once per missing dependency.
type DependencyError struct {
	Package string
	Missing []string
}

func (e *DependencyError) Error() string {
	lines := make([]string, len(e.Missing))
	for i, m := range e.Missing {
		lines[i] = fmt.Sprintf("pkg_hash_check_unresolved: cannot find dependency %s for %s", m, e.Package)
	}
	return strings.Join(lines, "\n")
}

// CheckInstall decides, as opkg-lede does before unpacking anything, whether
// the package can be installed on the target: every dependency must be
// available (DependencyError) and the architecture must be configured
// (ArchError). opkg reports unresolved dependencies first, so we do too.
func (t Target) CheckInstall(a *Archive) error {
	name, _ := a.Control.Get("Package")
	if deps, ok := a.Control.Get("Depends"); ok {
		var missing []string
		for _, d := range ParseDepends(deps) {
			if !t.satisfies(d) {
				missing = append(missing, strings.Join(d.Alternatives, " | "))
			}
		}
		if len(missing) > 0 {
			return &DependencyError{Package: name, Missing: missing}
		}
	}
	arch, _ := a.Control.Get("Architecture")
	if _, ok := t.Archs[arch]; !ok || arch == "" {
		return &ArchError{Package: name, Arch: arch}
	}
	return nil
}

func (t Target) satisfies(d Dependency) bool {
	for _, alt := range d.Alternatives {
		if t.Available[alt] {
			return true
		}
	}
	return false
}
