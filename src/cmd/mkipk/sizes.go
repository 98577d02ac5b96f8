package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// cmdSizes prints one line per package architecture found under a build
// directory (what `make ipk`/`make apk` for each ARCH left there): the
// static binary, and the daemon's .ipk and .apk with their sizes, so a
// release note or a flash budget can be read off for every router family.
func cmdSizes(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("mkipk sizes", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.Usage = func() { fmt.Fprintln(stderr, "Usage: mkipk sizes BUILD_DIR") }
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fl.NArg() != 1 {
		fl.Usage()
		return exitUsage
	}
	rows := sizeRows(fl.Arg(0))
	if len(rows) == 0 {
		fmt.Fprintf(stderr, "mkipk sizes: no packages under %s (run make ipk apk ARCH=...)\n", fl.Arg(0))
		return exitFailure
	}
	fmt.Fprintf(stdout, "%-28s %12s %12s %12s %12s\n", "architecture (PKGARCH)", "binary", "ipk", "apk", "luci apk")
	for _, r := range rows {
		fmt.Fprintf(stdout, "%-28s %12s %12s %12s %12s\n", r.pkgArch, size(r.binary), size(r.ipk), size(r.apk), size(r.luciAPK))
	}
	return exitOK
}

type sizeRow struct {
	pkgArch                   string
	binary, ipk, apk, luciAPK int64
}

func size(n int64) string {
	if n <= 0 {
		return "-"
	}
	return human(n)
}

func fileSize(name string) int64 {
	if fi, err := os.Stat(name); err == nil {
		return fi.Size()
	}
	return 0
}

// newest is the size of the most recently written file among names, so a
// stale package of an older version does not stand for this build.
func newest(names []string) int64 {
	var best string
	var when int64
	for _, n := range names {
		if fi, err := os.Stat(n); err == nil && fi.ModTime().UnixNano() >= when {
			best, when = n, fi.ModTime().UnixNano()
		}
	}
	return fileSize(best)
}

// sizeRows collects build/ipk/surflare-watchdog_*_ARCH.ipk,
// build/apk/ARCH/*.apk and build/FAMILY/surflare-watchdog, where FAMILY is
// the Makefile's ARCH whose package architecture ARCH starts with.
func sizeRows(build string) []sizeRow {
	rows := map[string]*sizeRow{}
	row := func(a string) *sizeRow {
		if rows[a] == nil {
			rows[a] = &sizeRow{pkgArch: a}
		}
		return rows[a]
	}
	ipks, _ := filepath.Glob(filepath.Join(build, "ipk", corePackage+"_*_*.ipk"))
	byArch := map[string][]string{}
	for _, name := range ipks {
		// NAME_VERSION_ARCH.ipk: neither name nor version has a '_', the
		// architecture may (mipsel_24kc).
		rest := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(name), corePackage+"_"), ".ipk")
		if _, arch, ok := strings.Cut(rest, "_"); ok {
			byArch[arch] = append(byArch[arch], name)
		}
	}
	for a, names := range byArch {
		row(a).ipk = newest(names)
	}
	dirs, _ := filepath.Glob(filepath.Join(build, "apk", "*"))
	for _, d := range dirs {
		core, _ := filepath.Glob(filepath.Join(d, corePackage+"-*.apk"))
		luci, _ := filepath.Glob(filepath.Join(d, luciPackage+"-*.apk"))
		if len(core) == 0 {
			continue
		}
		r := row(filepath.Base(d))
		r.apk, r.luciAPK = newest(core), newest(luci)
	}
	var out []sizeRow
	for a, r := range rows {
		family := ""
		for f := range defaultPkgArch {
			if (a == f || strings.HasPrefix(a, f+"_")) && len(f) > len(family) {
				family = f
			}
		}
		if family != "" {
			r.binary = fileSize(filepath.Join(build, family, "surflare-watchdog"))
		}
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b sizeRow) int { return strings.Compare(a.pkgArch, b.pkgArch) })
	return out
}
