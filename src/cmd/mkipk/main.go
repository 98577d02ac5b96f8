// Command mkipk builds the OpenWrt packages surflare-watchdog and
// luci-app-surflare without the OpenWrt SDK (what `make ipk` runs), and
// checks .ipk files against the layout opkg accepts and what our packages
// must contain.
//
//	mkipk build --version V --arch x86_64 --bin build/x86_64/surflare-watchdog --out build/ipk
//	mkipk check build/ipk/*.ipk
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"surflare-watchdog/src/ipk"
)

const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "build":
		return cmdBuild(args[1:], stdout, stderr)
	case "check":
		return cmdCheck(args[1:], stdout, stderr)
	case "-h", "--help", "help":
		usage(stdout)
		return exitOK
	}
	fmt.Fprintf(stderr, "mkipk: unknown command %q\n\n", args[0])
	usage(stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprint(w, `Usage: mkipk COMMAND [FLAGS]

Commands:
  build   build surflare-watchdog_<ver>_<arch>.ipk and luci-app-surflare_<ver>_all.ipk
  check   check .ipk files against opkg's layout and our packages' contents

Run 'mkipk COMMAND --help' for a command's flags.
`)
}

func cmdBuild(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("mkipk build", flag.ContinueOnError)
	fl.SetOutput(stderr)
	root := fl.String("root", ".", "repository root (holds files/, openwrt/ipk/, luci-app-surflare/)")
	version := fl.String("version", "", "package version, e.g. 1.0.0-r1 (a leading v is dropped)")
	arch := fl.String("arch", "x86_64", "opkg architecture, or a family (x86_64 aarch64 arm mipsel mips i386) for its common default")
	bin := fl.String("bin", "", "the static surflare-watchdog binary for that architecture")
	out := fl.String("out", "build/ipk", "output directory")
	luci := fl.Bool("luci", true, "also build luci-app-surflare")
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if *version == "" || *bin == "" || fl.NArg() > 0 {
		fmt.Fprintln(stderr, "mkipk build: --version and --bin are required, no arguments")
		fl.Usage()
		return exitUsage
	}
	v, a := normalizeVersion(*version), pkgArch(*arch)
	if a != *arch {
		fmt.Fprintf(stdout, "arch: %s packaged as %s (pass --arch with the router's `opkg print-architecture` name for another variant)\n", *arch, a)
	}
	binary, err := os.ReadFile(*bin)
	if err != nil {
		fmt.Fprintf(stderr, "mkipk build: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "binary  %-52s %9d bytes (%s)\n", *bin, len(binary), human(int64(len(binary))))

	core, err := buildCore(*root, v, a, binary)
	if err != nil {
		fmt.Fprintf(stderr, "mkipk build: %s: %v\n", corePackage, err)
		return exitFailure
	}
	pkgs := []*ipk.Package{core}
	if *luci {
		lp, err := buildLuci(*root, v)
		if err != nil {
			fmt.Fprintf(stderr, "mkipk build: %s: %v\n", luciPackage, err)
			return exitFailure
		}
		pkgs = append(pkgs, lp)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintf(stderr, "mkipk build: %v\n", err)
		return exitFailure
	}
	for _, p := range pkgs {
		name := filepath.Join(*out, p.FileName())
		size, err := writePackage(p, name)
		if err != nil {
			fmt.Fprintf(stderr, "mkipk build: %v\n", err)
			return exitFailure
		}
		fmt.Fprintf(stdout, "ipk     %-52s %9d bytes (%s), installed %s\n", name, size, human(size), human(p.InstalledSize()))
	}
	return exitOK
}

// writePackage builds p, proves the bytes read back clean (the same checks
// `mkipk check` makes), and only then puts the file in place atomically.
func writePackage(p *ipk.Package, name string) (int64, error) {
	b, err := p.Build()
	if err != nil {
		return 0, err
	}
	a, err := ipk.Read(b)
	if err != nil {
		return 0, fmt.Errorf("%s does not read back: %w", name, err)
	}
	if problems := checkArchive(a); len(problems) > 0 {
		return 0, fmt.Errorf("%s fails its checks: %w", name, errors.Join(problems...))
	}
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return 0, err
	}
	if err := os.Rename(tmp, name); err != nil {
		os.Remove(tmp)
		return 0, err
	}
	return int64(len(b)), nil
}

func cmdCheck(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("mkipk check", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.Usage = func() { fmt.Fprintln(stderr, "Usage: mkipk check FILE.ipk...") }
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fl.NArg() == 0 {
		fl.Usage()
		return exitUsage
	}
	rc := exitOK
	for _, name := range fl.Args() {
		problems := checkFile(name)
		if len(problems) == 0 {
			fmt.Fprintf(stdout, "ok      %s\n", name)
			continue
		}
		rc = exitFailure
		for _, p := range problems {
			fmt.Fprintf(stdout, "FAIL    %s: %v\n", name, p)
		}
	}
	return rc
}

func checkFile(name string) []error {
	b, err := os.ReadFile(name)
	if err != nil {
		return []error{err}
	}
	a, err := ipk.Read(b)
	if err != nil {
		return []error{err}
	}
	return checkArchive(a)
}

// human prints a size in KiB or MiB with one decimal.
func human(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
