package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
)

// version is stamped at build time: -ldflags "-X main.version=…".
var version = "dev"

func init() {
	register(&command{
		name:    "version",
		summary: "print the version",
		run: func(ctx context.Context, args []string) int {
			return versionMain(args, os.Stdout, os.Stderr)
		},
	})
}

// versionMain prints the version; like every subcommand it answers --help
// (with its usage, not the version) and refuses arguments it does not know.
func versionMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	fmt.Fprintf(stdout, "surflare-watchdog %s (%s, %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return exitOK
}
