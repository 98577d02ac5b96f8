package ubus

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"
)

// Exit statuses of RunCLI, those of the surflare-watchdog command.
const (
	cliOK       = 0
	cliFailed   = 1
	cliUsageErr = 2
)

const cliUsage = `Usage: surflare-watchdog ubus [-s SOCKET] [-t SECONDS] COMMAND
  list [PATH]               list objects (with their signatures)
  call PATH METHOD [JSON]   call a method
  send EVENT [JSON]         send an event
  listen [PATTERN]          print events until interrupted (default pattern "*")
`

// RunCLI runs `surflare-watchdog ubus ARGS`: list, call, send and listen
// with this package's client, printing what OpenWrt's ubus CLI prints, so
// the two can be compared by hand on a router. It returns the exit status:
// 0, 1 when the command failed, 2 for a usage error.
func RunCLI(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ubus", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, cliUsage); fs.PrintDefaults() }
	sock := fs.String("s", DefaultSocket, "ubusd `socket`")
	timeout := fs.Int("t", 30, "request timeout in `seconds`")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cliOK
		}
		return cliUsageErr
	}
	rest := fs.Args()
	if len(rest) == 0 {
		fs.Usage()
		return cliUsageErr
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
		return cliUsageErr
	}
	c, err := Dial(ctx, *sock)
	if err != nil {
		fmt.Fprintf(stderr, "Failed to connect to ubus: %v\n", err)
		return cliFailed
	}
	defer c.Close()
	if verb == "listen" {
		return cliListen(ctx, c, arg(0), stdout, stderr)
	}
	rctx, cancel := context.WithTimeout(ctx, time.Duration(*timeout)*time.Second)
	defer cancel()
	switch verb {
	case "list":
		var objs []ObjectInfo
		if objs, err = c.Lookup(rctx, arg(0)); err == nil {
			WriteList(stdout, objs)
		}
	case "call":
		var out Fields
		if out, err = c.CallJSON(rctx, arg(0), arg(1), arg(2)); err == nil && out != nil {
			err = WriteJSON(stdout, out)
		}
	case "send":
		var data Fields
		if arg(1) != "" {
			data, err = ParseJSON([]byte(arg(1)))
		}
		if err == nil {
			err = c.SendEvent(rctx, arg(0), data)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "Command failed: %v\n", err)
		return cliFailed
	}
	return cliOK
}

func cliListen(ctx context.Context, c *Conn, pattern string, stdout, stderr io.Writer) int {
	if pattern == "" {
		pattern = "*"
	}
	events := make(chan Event, 16)
	if err := c.Listen(ctx, pattern, func(e Event) { events <- e }); err != nil {
		fmt.Fprintf(stderr, "Command failed: %v\n", err)
		return cliFailed
	}
	for {
		select {
		case e := <-events:
			WriteEvent(stdout, e)
		case <-c.Done():
			fmt.Fprintf(stderr, "ubus connection lost: %v\n", c.Err())
			return cliFailed
		case <-ctx.Done():
			return cliOK
		}
	}
}
