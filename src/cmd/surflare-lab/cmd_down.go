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
		name: "down", args: "[--lab PREFIX]",
		summary: "tear a running lab down (the only one, or --lab)",
		run: func(ctx context.Context, args []string) int {
			fs := flag.NewFlagSet("down", flag.ContinueOnError)
			prefix := fs.String("lab", "", "lab prefix (default: the only running lab)")
			all := fs.Bool("all", false, "tear down every running lab")
			if err := fs.Parse(args); err != nil {
				return parseExit(err)
			}
			if !needRoot("down") {
				return exitFailure
			}
			targets := []string{*prefix}
			if *all {
				targets = lab.Running()
			} else if *prefix == "" {
				run := lab.Running()
				if len(run) != 1 {
					fmt.Fprintf(os.Stderr, "surflare-lab down: %d labs running %v: pick one with --lab or use --all\n", len(run), run)
					return exitFailure
				}
				targets = run
			}
			code := exitOK
			for _, p := range targets {
				if err := lab.Down(p); err != nil {
					fmt.Fprintf(os.Stderr, "surflare-lab down: %s: %v\n", p, err)
					code = exitFailure
					continue
				}
				fmt.Printf("lab %s down\n", p)
			}
			return code
		},
	})
}
