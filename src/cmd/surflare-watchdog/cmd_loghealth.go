package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"surflare-watchdog/src/config"
	"surflare-watchdog/src/detectors/loghealth"
	"surflare-watchdog/src/runfiles"
)

func init() {
	register(&command{
		name:    "log-health",
		summary: "read the proxy log's urltest errors per node/transit and write the node health file",
		run: func(ctx context.Context, args []string) int {
			return logHealthMain(args, os.Stdout, os.Stderr)
		},
	})
}

const logHealthSynopsis = "log-health [--config FILE] [--log FILE] [--window-minutes N] [--out FILE] [--json]"

// logHealthMain is the one-shot reader: it reads the last Tail bytes of the
// proxy log once, prints a table of urltest errors per node/transit in the
// window and writes the same JSON file the daemon keeps current.
func logHealthMain(args []string, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("log-health", flag.ContinueOnError)
	cfgPath := fset.String("config", config.DefaultPath, "the UCI `file` with loghealth and paths settings (defaults when the default file is absent)")
	logPath := fset.String("log", "", "the proxy `file` to read (default: the config's proxy_log, /var/log/surflare/surflare-proxy.log)")
	window := fset.Int("window-minutes", 0, "count errors over the last `N` minutes (default: the config's loghealth window, 10)")
	out := fset.String("out", "", "write the node health JSON to `FILE` (default: RUN_DIR/"+runfiles.NodeHealthFile+"; - = do not write)")
	asJSON := fset.Bool("json", false, "print the JSON instead of the table")
	if code, ok := parseFlagsOrUsage(fset, args, logHealthSynopsis, stdout, stderr); !ok {
		return code
	}
	if fset.NArg() > 0 {
		fmt.Fprintf(stderr, "surflare-watchdog log-health: unexpected argument %q\n", fset.Arg(0))
		return exitUsage
	}
	if *window < 0 {
		fmt.Fprintf(stderr, "surflare-watchdog log-health: --window-minutes %d: must be positive\n", *window)
		return exitUsage
	}

	cfg := config.Default()
	explicit := false
	fset.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "config" })
	if _, err := os.Stat(*cfgPath); explicit || err == nil {
		c, warns, err := config.Load(*cfgPath)
		config.WriteWarnings(stderr, warns)
		if err != nil {
			config.WriteErrors(stderr, err)
			return exitFailure
		}
		cfg = c
	}

	o := loghealth.FromConfig(cfg, "")
	if *logPath != "" {
		o.LogPath = *logPath
	}
	if *window > 0 {
		o.Window = time.Duration(*window) * time.Minute
	}
	rep, err := loghealth.ReadOnce(o, time.Now())
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(stderr, "surflare-watchdog log-health: proxy log %s does not exist (is the proxy running? --log FILE reads another)\n", o.LogPath)
		} else {
			fmt.Fprintf(stderr, "surflare-watchdog log-health: %v\n", err)
		}
		return exitFailure
	}

	dest := *out
	if dest == "" {
		dest = filepath.Join(cfg.Paths.RunDir, runfiles.NodeHealthFile)
	}
	if dest != "-" {
		if err := loghealth.WriteReport(dest, rep); err != nil {
			fmt.Fprintf(stderr, "surflare-watchdog log-health: %v\n", err)
			return exitFailure
		}
	}
	if *asJSON {
		b, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Fprintf(stdout, "%s\n", b)
		return exitOK
	}
	loghealth.WriteTable(stdout, o, rep)
	if dest != "-" {
		fmt.Fprintf(stdout, "Wrote %s\n", dest)
	}
	return exitOK
}
