package main

import (
	"context"
	"fmt"
	"runtime"
)

// version is stamped at build time: -ldflags "-X main.version=…".
var version = "dev"

func init() {
	register(&command{
		name:    "version",
		summary: "print the version",
		run: func(ctx context.Context, args []string) int {
			fmt.Printf("surflare-watchdog %s (%s, %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return exitOK
		},
	})
}
