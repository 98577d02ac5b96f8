package main

import (
	"context"
	"io"
	"os"

	"surflare-watchdog/src/uci"
)

// The uci subcommand is a drop-in for OpenWrt's uci, so laptops without it
// can read and edit the same config, and so our parser can be checked from
// outside against the real tool. Its flags are parsed like uci's getopt
// (clustered, anywhere on the line), not with package flag: scripts written
// for uci must work unchanged; that includes `batch` and `import`, which
// read stdin (or -f FILE) as OpenWrt's scripts feed them. Errors are
// prefixed "uci: " like the real tool invoked as uci.
func init() {
	register(&command{
		name:    "uci",
		summary: "read and edit UCI config like OpenWrt's uci (show, get, set, commit, ...)",
		run: func(ctx context.Context, args []string) int {
			return runUCI(args, os.Stdin, os.Stdout, os.Stderr)
		},
	})
}

func runUCI(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cli := &uci.CLI{AppName: "uci", Stdin: stdin}
	if len(args) == 1 && (args[0] == "--help" || args[0] == "-h") {
		cli.Usage(stdout)
		return exitOK
	}
	return cli.Run(args, stdout, stderr)
}
