package lab

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// Sweep removes what crashed lab runs left behind: namespaces named
// <NamePrefix>…-<role> and directories $TMPDIR/surflare-lab-<NamePrefix>…
// whose recorded owner process is gone. Labs with a live owner (running
// tests, a detached `surflare-lab up`) are left alone. It returns the
// prefixes it removed.
func Sweep(log *slog.Logger) []string {
	if log == nil {
		log = slog.Default()
	}
	log = log.With("subsystem", "lab")
	prefixes := map[string]bool{}
	for _, n := range listNamed(NamePrefix) {
		if p, _, ok := strings.Cut(n, "-"); ok {
			prefixes[p] = true
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "surflare-lab-"+NamePrefix+"*"))
	for _, d := range dirs {
		prefixes[strings.TrimPrefix(filepath.Base(d), "surflare-lab-")] = true
	}
	var removed []string
	for p := range prefixes {
		dir := DefaultDir(p)
		if ownerAlive(dir) {
			continue
		}
		if _, err := os.Stat(dir); err != nil && nsInUse(p) {
			// No directory under our $TMPDIR, but processes live in its
			// namespaces: a lab run with another TMPDIR (whose owner file
			// we cannot see), not a stale one. Tearing it down killed
			// another run's lab in the middle of its measurement.
			continue
		}
		if err := teardown(p, dir); err != nil {
			log.Warn("sweeping stale lab", "lab", p, "err", err)
			continue
		}
		log.Info("swept stale lab", "lab", p)
		removed = append(removed, p)
	}
	return removed
}

// Running lists the prefixes of labs whose owner is alive.
func Running() []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range listNamed(NamePrefix) {
		p, _, ok := strings.Cut(n, "-")
		if ok && !seen[p] && ownerAlive(DefaultDir(p)) {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// Attach opens a running lab by prefix ("" = the only running one), for the
// CLI's fault/status/down commands. Closing an attached lab does not tear
// it down; use Down for that.
func Attach(prefix string) (*Lab, error) {
	if prefix == "" {
		run := Running()
		switch len(run) {
		case 0:
			return nil, fmt.Errorf("no lab running (start one with: surflare-lab up)")
		case 1:
			prefix = run[0]
		default:
			return nil, fmt.Errorf("several labs running (%s): pick one with --lab", strings.Join(run, ", "))
		}
	}
	l, err := newLab(Options{Prefix: prefix, Clients: countClients(prefix)})
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(l.Dir); err != nil {
		return nil, fmt.Errorf("lab %s: %w", prefix, errNotRunning)
	}
	for _, r := range l.roles() {
		h, err := nsFromName(l.NSName(r))
		if err != nil {
			l.closeHandles()
			return nil, fmt.Errorf("lab %s: namespace %s: %w", prefix, l.NSName(r), err)
		}
		l.ns[r] = h
	}
	return l, nil
}

func countClients(prefix string) int {
	n := 0
	for i := range LANClient {
		if _, err := os.Stat(filepath.Join(netnsDir, prefix+"-"+clientRole(i))); err == nil {
			n = i + 1
		}
	}
	if n == 0 {
		return 1
	}
	return n
}

// nsInUse reports whether any process lives in one of the namespaces named
// <prefix>-…: every running lab keeps its fakes there.
func nsInUse(prefix string) bool {
	inodes := map[uint64]bool{}
	for _, n := range listNamed(prefix + "-") {
		if ino, err := nsInode(filepath.Join(netnsDir, n)); err == nil {
			inodes[ino] = true
		}
	}
	if len(inodes) == 0 {
		return false
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/ns/net")
	for _, p := range procs {
		if ino, err := nsInode(p); err == nil && inodes[ino] {
			return true
		}
	}
	return false
}
