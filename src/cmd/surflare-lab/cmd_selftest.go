package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"surflare-watchdog/src/lab"
)

func init() {
	register(&command{
		name:    "selftest",
		summary: "bring a lab up, check the tunnel and every fault, print a table, tear down (exit 0 = all passed)",
		run: func(ctx context.Context, args []string) int {
			fs := flag.NewFlagSet("selftest", flag.ContinueOnError)
			if err := fs.Parse(args); err != nil {
				return parseExit(err)
			}
			if !needRoot("selftest") {
				return exitFailure
			}
			if _, err := lab.Selftest(ctx, lab.Options{}, os.Stdout); err != nil {
				fmt.Fprintf(os.Stderr, "surflare-lab %v\n", err)
				return exitFailure
			}
			return exitOK
		},
	})
}
