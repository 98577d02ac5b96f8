package main

import (
	"context"
	"flag"
	"fmt"

	"surflare-watchdog/src/lab"
)

func init() {
	register(&command{
		name:    "sweep",
		summary: "remove namespaces and directories left by crashed labs (owner process gone)",
		run: func(ctx context.Context, args []string) int {
			fs := flag.NewFlagSet("sweep", flag.ContinueOnError)
			if err := fs.Parse(args); err != nil {
				return parseExit(err)
			}
			if !needRoot("sweep") {
				return exitFailure
			}
			removed := lab.Sweep(nil)
			fmt.Printf("swept %d stale lab(s) %v; running: %v\n", len(removed), removed, lab.Running())
			return exitOK
		},
	})
}
