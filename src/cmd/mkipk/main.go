// Command mkipk builds the OpenWrt packages surflare-watchdog and
// luci-app-surflare without the OpenWrt SDK (what `make ipk` and `make apk`
// run), as .ipk for opkg (OpenWrt 24.10 and earlier) or .apk for apk-tools
// 3 (OpenWrt 25.12), from one description of each package; it checks
// package files against the layout their package manager accepts and what
// our packages must contain, and reports the sizes of every architecture
// built.
//
//	mkipk build --version V --arch x86_64 --bin build/x86_64/surflare-watchdog --out build/ipk
//	mkipk build --format apk --version V --arch x86_64 --bin ... --out build/apk/x86_64
//	mkipk check build/ipk/*.ipk build/apk/*/*.apk
//	mkipk sizes build
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"surflare-watchdog/src/apk"
	"surflare-watchdog/src/ipk"
	"surflare-watchdog/src/pkgspec"
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
	case "sizes":
		return cmdSizes(args[1:], stdout, stderr)
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
  build   build surflare-watchdog and luci-app-surflare as .ipk (default) or .apk
  check   check .ipk and .apk files against their format and our packages' contents
  sizes   list binary and package sizes of every architecture under a build directory

Run 'mkipk COMMAND --help' for a command's flags.
`)
}

func cmdBuild(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("mkipk build", flag.ContinueOnError)
	fl.SetOutput(stderr)
	root := fl.String("root", ".", "repository root (holds files/, openwrt/ipk/, luci-app-surflare/)")
	version := fl.String("version", "", "package version, e.g. 0.1.0-r272, valid for opkg and apk (a leading v is dropped)")
	format := fl.String("format", "ipk", "package format: ipk (opkg, OpenWrt 24.10) or apk (apk-tools 3, OpenWrt 25.12)")
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
	if *version == "" || *bin == "" || fl.NArg() > 0 || (*format != "ipk" && *format != "apk") {
		fmt.Fprintln(stderr, "mkipk build: --version and --bin are required, --format is ipk or apk, no arguments")
		fl.Usage()
		return exitUsage
	}
	v, a := normalizeVersion(*version), pkgArch(*arch)
	if err := pkgspec.CheckVersion(v); err != nil {
		fmt.Fprintf(stderr, "mkipk build: %v\n", err)
		return exitFailure
	}
	if a != *arch {
		fmt.Fprintf(stdout, "arch: %s packaged as %s (pass --arch with the router's name for another variant: `opkg print-architecture` on 24.10, /etc/apk/arch on 25.12)\n", *arch, a)
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
	pkgs := []*pkgspec.Package{core}
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
		name, size, err := writePackage(p, *format, *out)
		if err != nil {
			fmt.Fprintf(stderr, "mkipk build: %s: %v\n", p.Name, err)
			return exitFailure
		}
		fmt.Fprintf(stdout, "%-7s %-52s %9d bytes (%s), installed %s\n", *format, name, size, human(size), human(p.InstalledSize()))
	}
	return exitOK
}

// writePackage builds p in the format asked for, proves the bytes read
// back clean (the same checks `mkipk check` makes), and only then puts the
// file in place atomically.
func writePackage(p *pkgspec.Package, format, dir string) (string, int64, error) {
	var (
		name     string
		b        []byte
		problems []error
	)
	switch format {
	case "apk":
		ap, err := p.APK()
		if err != nil {
			return "", 0, err
		}
		if b, err = ap.Build(); err != nil {
			return "", 0, err
		}
		name = filepath.Join(dir, ap.FileName())
		a, err := apk.Read(b)
		if err != nil {
			return "", 0, fmt.Errorf("%s does not read back: %w", name, err)
		}
		problems = checkAPK(a)
	default:
		ip, err := p.IPK()
		if err != nil {
			return "", 0, err
		}
		if b, err = ip.Build(); err != nil {
			return "", 0, err
		}
		name = filepath.Join(dir, ip.FileName())
		a, err := ipk.Read(b)
		if err != nil {
			return "", 0, fmt.Errorf("%s does not read back: %w", name, err)
		}
		problems = checkArchive(a)
	}
	if len(problems) > 0 {
		return "", 0, fmt.Errorf("%s fails its checks: %w", name, errors.Join(problems...))
	}
	return name, int64(len(b)), writeAtomic(name, b)
}

func writeAtomic(name string, b []byte) error {
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, name); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

func cmdCheck(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("mkipk check", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.Usage = func() { fmt.Fprintln(stderr, "Usage: mkipk check FILE.ipk|FILE.apk...") }
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
	if strings.HasSuffix(name, ".apk") {
		a, err := apk.Read(b)
		if err != nil {
			return []error{err}
		}
		return checkAPK(a)
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
