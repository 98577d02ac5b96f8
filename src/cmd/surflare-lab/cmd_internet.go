package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"surflare-watchdog/src/lab/internet"
)

func init() {
	register(&command{
		name: "internet-serve", args: "--lab-dir DIR", hidden: true,
		summary: "serve the lab internet in the current namespace (run by the lab inside <prefix>-internet)",
		run: func(ctx context.Context, args []string) int {
			fs := flag.NewFlagSet("internet-serve", flag.ContinueOnError)
			dir := fs.String("lab-dir", "", "the lab directory (faults.json is read from it)")
			if err := fs.Parse(args); err != nil {
				return parseExit(err)
			}
			if *dir == "" {
				fmt.Fprintln(os.Stderr, "surflare-lab internet-serve: --lab-dir is required")
				return exitUsage
			}
			if err := internet.Run(ctx, *dir); err != nil {
				fmt.Fprintf(os.Stderr, "surflare-lab internet-serve: %v\n", err)
				return exitFailure
			}
			return exitOK
		},
	})
}
