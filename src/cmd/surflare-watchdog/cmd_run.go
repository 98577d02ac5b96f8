package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"surflare-watchdog/src/config"
	"surflare-watchdog/src/credentials"
	"surflare-watchdog/src/daemon"
	"surflare-watchdog/src/runfiles"
)

func init() {
	register(&command{
		name:    "run",
		summary: "run the watchdog daemon in the foreground (procd/systemd start this)",
		run: func(ctx context.Context, args []string) int {
			return runMain(ctx, args, os.Stdout, os.Stderr)
		},
	})
}

// runNote is run's help, under its usage line.
const runNote = `Runs the daemon until SIGTERM or SIGINT (both end it within 5 s, at any point).
The kill switch stays armed when it stops: a stopped watchdog leaks nothing.
To open the network on purpose, stop it with --open-on-exit set, or run
'surflare-watchdog teardown' after it has stopped.

Signals: SIGUSR1 runs a health check now, SIGUSR2 toggles diag mode, SIGHUP
reloads the config (on an error the last good config stays; every problem is
logged as FILE:LINE). The CLI talks to it through <run_dir>/surflare-watchdog.sock
(status, check, rotate, reconnect, diag).`

func init() { flagUsageNotes["run"] = runNote }

func runMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var o daemon.Options
	fs.StringVar(&o.ConfigPath, "config", config.DefaultPath, "the UCI `file` to run with")
	fs.StringVar(&o.PasswordFile, "password-file", "", "the vendor account's password `file` (default "+credentials.DefaultFile+
		", or a file named 'password' next to a --config that is not the default one)")
	fs.BoolVar(&o.OpenOnExit, "open-on-exit", false, "on SIGTERM/SIGINT remove the kill switch too (the user stops the service on purpose)")
	level := fs.String("log-level", "info", "`level`: debug, info, warn or error")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		fmt.Fprintf(stderr, "surflare-watchdog run: --log-level %q: %v\n", *level, err)
		return exitUsage
	}
	daemon.SetupLogging(stderr, lvl)

	d, err := daemon.New(o)
	if err != nil {
		fmt.Fprintf(stderr, "surflare-watchdog run: %v\n", err)
		return exitFailure
	}
	if err := d.Run(ctx); err != nil {
		if errors.Is(err, runfiles.ErrLocked) {
			fmt.Fprintf(stderr, "surflare-watchdog run: %v\n", err)
			return exitFailure
		}
		slog.Error("surflare-watchdog run failed", "err", err)
		return exitFailure
	}
	return exitOK
}
