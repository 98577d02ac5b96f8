package owrtbox

import (
	"context"
	"fmt"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// statusInstalled matches `opkg status`'s line for an installed package
// ("install ok installed", "install user installed").
var statusInstalled = regexp.MustCompile(`(?m)^Status: install \S+ installed$`)

// MissingKmods are the kernel module packages opkg reports missing in the
// box although the kernel has them built in (the box's README): a package
// that depends on them installs only with --force-depends, as on a router
// whose feeds are offline. Installs check that nothing else was missing.
var MissingKmods = []string{
	"kmod-nft-tproxy", "kmod-nft-socket", "kmod-nft-nat", "kmod-inet-diag",
	"kmod-nf-conntrack-netlink", "kmod-nfnetlink-log",
	"kmod-nft-core", "kmod-nft-fib", "kmod-nft-offload",
}

// ipkDir is where Install puts packages in the box, as a user who copied
// them over with scp would.
const ipkDir = "/tmp/ipk"

// Opkg runs the box's opkg with args (a string each, quoted for ash) and
// returns its output; a non-zero exit is in Result.Code.
func (b *Box) Opkg(ctx context.Context, args ...string) (Result, error) {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = Quote(a)
	}
	return b.Run(ctx, "opkg "+strings.Join(q, " "))
}

// Install copies the ipk files into the box and runs `opkg VERB
// --force-depends` on them (VERB install or upgrade). opkg exits non-zero
// when it collected dependency errors, which --force-depends turns into
// warnings; the install counts as failed only when a dependency other than
// MissingKmods was missing or when a package is not installed afterwards.
func (b *Box) Install(ctx context.Context, verb string, ipks ...string) (Result, error) {
	var inBox []string
	for _, f := range ipks {
		p := path.Join(ipkDir, filepath.Base(f))
		if err := b.CopyIn(f, p); err != nil {
			return Result{}, err
		}
		inBox = append(inBox, p)
	}
	r, err := b.Opkg(ctx, append([]string{verb, "--force-depends"}, inBox...)...)
	if err != nil {
		return r, err
	}
	if bad := unexpectedMissing(r.Out); len(bad) > 0 {
		return r, fmt.Errorf("opkg %s: missing dependencies beyond the built-in kmods: %s\n%s", verb, strings.Join(bad, ", "), r.Out)
	}
	for _, f := range ipks {
		name, _, _ := strings.Cut(filepath.Base(f), "_")
		st, err := b.Opkg(ctx, "status", name)
		if err != nil {
			return r, err
		}
		if !statusInstalled.MatchString(st.Out) {
			return r, fmt.Errorf("opkg %s: %s is not installed afterwards:\n%s\n%s", verb, name, r.Out, st.Out)
		}
	}
	return r, nil
}

// unexpectedMissing lists the dependencies opkg reported missing
// ("\t * kmod-foo" lines after "satisfy_dependencies_for") that are not
// MissingKmods.
func unexpectedMissing(out string) []string {
	known := map[string]bool{}
	for _, k := range MissingKmods {
		known[k] = true
	}
	var bad []string
	for _, line := range strings.Split(out, "\n") {
		t := strings.TrimSpace(line)
		if !strings.HasPrefix(t, "* ") {
			continue
		}
		// "* satisfy_dependencies_for: ..." and "* resolve_conffiles: ..."
		// head opkg's messages; the missing packages are bare names.
		dep := strings.Fields(strings.TrimPrefix(t, "* "))
		if len(dep) > 0 && !strings.HasSuffix(dep[0], ":") && !known[dep[0]] {
			bad = append(bad, dep[0])
		}
	}
	return bad
}

// Quote single-quotes s for ash.
func Quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
