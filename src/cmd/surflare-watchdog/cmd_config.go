package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"surflare-watchdog/src/config"
)

func init() {
	register(&command{
		name:    "config",
		summary: "check or show the configuration (/etc/config/surflare)",
		run: func(ctx context.Context, args []string) int {
			return configMain(args, os.Stdout, os.Stderr)
		},
	})
}

const configUsage = `Usage: surflare-watchdog config check|show [flags]

  check   validate the file: print every error and warning with its line;
          exit 0 when it is valid (with warnings too, unless --strict),
          1 when it is not
  show    print the effective configuration (defaults filled in) as UCI,
          or as JSON with --json

Run 'surflare-watchdog config check --help' for the flags.
`

func configMain(args []string, stdout, stderr io.Writer) int {
	return subcommands("config", configUsage, args, stdout, stderr, map[string]func([]string) int{
		"check": func(a []string) int { return configCheck(a, stdout, stderr) },
		"show":  func(a []string) int { return configShow(a, stdout, stderr) },
	})
}

func configCheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("config check", flag.ContinueOnError)
	strict := fs.Bool("strict", false, "exit 1 on warnings too (an ignored, misspelled option)")
	c, warns, code := loadConfigFlags(fs, args, "config check [--config FILE] [--strict]", stdout, stderr)
	if c == nil {
		return code
	}
	// A file with warnings is valid and exits 0, as `nginx -t`, `sshd -t`
	// and `haproxy -c` do: the daemon runs with it, and scripts (upgrade,
	// LuCI) that read non-zero as "will not load" would refuse a file it
	// loads. The warnings are printed loudly instead; --strict is for a
	// script that wants them fatal (haproxy -dW). 2 stays the usage error.
	fmt.Fprintf(stdout, "%s: valid", fs.Lookup("config").Value)
	if len(warns) > 0 {
		fmt.Fprintf(stdout, "; warnings on stderr: %d (what they name is ignored)", len(warns))
		if *strict {
			code = exitFailure
		}
	}
	fmt.Fprintln(stdout)
	return code
}

func configShow(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("config show", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON keyed by section and option names")
	c, _, code := loadConfigFlags(fs, args, "config show [--config FILE] [--json]", stdout, stderr)
	if c == nil {
		return code
	}
	if *asJSON {
		b, err := json.MarshalIndent(c, "", "  ")
		if err != nil {
			fmt.Fprintf(stderr, "surflare-watchdog: %v\n", err)
			return exitFailure
		}
		fmt.Fprintf(stdout, "%s\n", b)
		return exitOK
	}
	fmt.Fprintf(stdout, "# effective configuration from %s (role auto resolves to %s here)\n",
		fs.Lookup("config").Value, c.Main.Role.Resolve(config.OpenWrtRelease))
	stdout.Write(config.Format(c))
	return exitOK
}

// loadConfigFlags adds --config to fs, parses args and loads the file,
// printing warnings and every error. A nil config means return code.
func loadConfigFlags(fs *flag.FlagSet, args []string, synopsis string, stdout, stderr io.Writer) (*config.Config, []config.Warning, int) {
	path := fs.String("config", config.DefaultPath, "the UCI `file` to read")
	if code, ok := parseFlagsOrUsage(fs, args, synopsis, stdout, stderr); !ok {
		return nil, nil, code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "surflare-watchdog %s: unexpected argument %q (use --config FILE)\n", fs.Name(), fs.Arg(0))
		return nil, nil, exitUsage
	}
	c, warns, err := config.Load(*path)
	config.WriteWarnings(stderr, warns)
	if err != nil {
		config.WriteErrors(stderr, err)
		return nil, warns, exitFailure
	}
	return c, warns, exitOK
}
