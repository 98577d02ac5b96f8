package main

import (
	"context"
	"os"

	"surflare-watchdog/src/ubus"
)

// The hidden `ubus` subcommand speaks to ubusd through our own native client,
// so the client can be tried by hand on a router (and compared with the
// real `ubus` CLI) without the daemon. Like `uci`, it takes the real tool's
// flags (-s, -t before the command), not ours: ubus.RunCLI parses them.

func init() {
	register(&command{
		name:    "ubus",
		summary: "talk to ubusd with the built-in client: list, call, send, listen (debugging)",
		hidden:  true,
		run: func(ctx context.Context, args []string) int {
			return ubus.RunCLI(ctx, args, os.Stdout, os.Stderr)
		},
	})
}
