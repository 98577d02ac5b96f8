package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"surflare-watchdog/src/ubus"
)

// The hidden `ubus` subcommand speaks to ubusd through our own native client,
// so the client can be tried by hand on a router (and compared with the
// real `ubus` CLI) without the daemon.

func init() {
	register(&command{
		name:    "ubus",
		summary: "talk to ubusd with the built-in client: list, call, send, listen (debugging)",
		hidden:  true,
		run: func(ctx context.Context, args []string) int {
			return runUbus(ctx, args, os.Stdout, os.Stderr)
		},
	})
}

const ubusUsage = `Usage: surflare-watchdog ubus [-s SOCKET] [-t SECONDS] COMMAND
  list [PATH]               list objects (with their signatures)
  call PATH METHOD [JSON]   call a method
  send EVENT [JSON]         send an event
  listen [PATTERN]          print events until interrupted (default pattern "*")
`

func runUbus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ubus", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, ubusUsage); fs.PrintDefaults() }
	sock := fs.String("s", ubus.DefaultSocket, "ubusd `socket`")
	timeout := fs.Int("t", 30, "request timeout in `seconds`")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	rest := fs.Args()
	if len(rest) == 0 {
		fs.Usage()
		return exitUsage
	}
	verb, rest := rest[0], rest[1:]
	arg := func(i int) string {
		if i < len(rest) {
			return rest[i]
		}
		return ""
	}
	want := map[string][2]int{"list": {0, 1}, "call": {2, 3}, "send": {1, 2}, "listen": {0, 1}}
	n, ok := want[verb]
	if !ok || len(rest) < n[0] || len(rest) > n[1] {
		fs.Usage()
		return exitUsage
	}
	c, err := ubus.Dial(ctx, *sock)
	if err != nil {
		fmt.Fprintf(stderr, "Failed to connect to ubus: %v\n", err)
		return exitFailure
	}
	defer c.Close()
	if verb == "listen" {
		return ubusListen(ctx, c, arg(0), stdout, stderr)
	}
	rctx, cancel := context.WithTimeout(ctx, time.Duration(*timeout)*time.Second)
	defer cancel()
	switch verb {
	case "list":
		var objs []ubus.ObjectInfo
		if objs, err = c.Lookup(rctx, arg(0)); err == nil {
			ubus.WriteList(stdout, objs)
		}
	case "call":
		var out ubus.Fields
		if out, err = c.CallJSON(rctx, arg(0), arg(1), arg(2)); err == nil && out != nil {
			err = ubus.WriteJSON(stdout, out)
		}
	case "send":
		var data ubus.Fields
		if arg(1) != "" {
			data, err = ubus.ParseJSON([]byte(arg(1)))
		}
		if err == nil {
			err = c.SendEvent(rctx, arg(0), data)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "Command failed: %v\n", err)
		return exitFailure
	}
	return exitOK
}

func ubusListen(ctx context.Context, c *ubus.Conn, pattern string, stdout, stderr io.Writer) int {
	if pattern == "" {
		pattern = "*"
	}
	events := make(chan ubus.Event, 16)
	if err := c.Listen(ctx, pattern, func(e ubus.Event) { events <- e }); err != nil {
		fmt.Fprintf(stderr, "Command failed: %v\n", err)
		return exitFailure
	}
	for {
		select {
		case e := <-events:
			ubus.WriteEvent(stdout, e)
		case <-c.Done():
			fmt.Fprintf(stderr, "ubus connection lost: %v\n", c.Err())
			return exitFailure
		case <-ctx.Done():
			return exitOK
		}
	}
}
