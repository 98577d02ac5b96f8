package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"time"

	"surflare-watchdog/src/config"
	"surflare-watchdog/src/daemon"
	"surflare-watchdog/src/firewall"
	"surflare-watchdog/src/progress"
)

func init() {
	register(&command{
		name:    "firewall",
		summary: "show, apply, inspect or remove the watchdog's nftables tables",
		run: func(ctx context.Context, args []string) int {
			return firewallMain(ctx, args, os.Stdout, os.Stderr)
		},
	})
	register(&command{
		name:    "teardown",
		summary: "remove every table, set, rule and route of the watchdog",
		run: func(ctx context.Context, args []string) int {
			return teardownMain(ctx, args, os.Stdout, os.Stderr)
		},
	})
	register(&command{
		name:    "routes",
		summary: "update the cn_direct (chnroute) files from APNIC",
		run: func(ctx context.Context, args []string) int {
			return routesMain(ctx, args, os.Stdout, os.Stderr)
		},
	})
}

const firewallUsage = `Usage: surflare-watchdog firewall plan|apply|teardown|status|trace [flags]

  plan      print the ruleset the config gives, in nft syntax (changes nothing)
  apply     make the kernel hold that ruleset (idempotent) and the tunnel routing
  teardown  remove the watchdog's tables and routing (--keep-kill-switch: all but the kill switch)
  status    what is installed, what a crash left behind, counters
  trace     start [--addr A] [--port N] [--all] | stop | watch [--for D]: nftrace diagnostics

apply, teardown, status and trace act on the current network namespace.
Run 'surflare-watchdog firewall SUBCOMMAND --help' for the flags.
`

func firewallMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return subcommands("firewall", firewallUsage, args, stdout, stderr, map[string]func([]string) int{
		"plan":     func(a []string) int { return firewallPlan(a, stdout, stderr) },
		"apply":    func(a []string) int { return firewallApply(ctx, a, stdout, stderr) },
		"teardown": func(a []string) int { return firewallTeardown(ctx, "firewall teardown", a, stdout, stderr, true) },
		"status":   func(a []string) int { return firewallStatus(ctx, a, stdout, stderr) },
		"trace":    func(a []string) int { return firewallTrace(ctx, a, stdout, stderr) },
	})
}

// flagUsageNotes say what a subcommand does, under its usage line.
var flagUsageNotes = map[string]string{
	"firewall plan":     "Prints the ruleset the config gives, in nft syntax; changes nothing.",
	"firewall apply":    "Makes the current network namespace hold that ruleset and the tunnel routing (idempotent).",
	"firewall teardown": "Removes the watchdog's tables, sets, rules and routes from the current network namespace.",
	"firewall status":   "What is installed, what a crash left behind, counters.",
	"teardown":          "Removes every table, set, rule and route of the watchdog from the current network\nnamespace, the kill switch included (the network is open afterwards).",
	"version":           "Prints the version, the Go release and the platform it was built for.",
	"routes update":     "Fetches APNIC delegated-format data and writes the cn_direct prefix files atomically;\na failed download keeps the old files.",
}

// specFlags are the flags every subcommand that builds a Spec takes.
type specFlags struct {
	config, leases *string
}

func addSpecFlags(fs *flag.FlagSet) specFlags {
	return specFlags{
		config: fs.String("config", config.DefaultPath, "the UCI `file` to read"),
		leases: fs.String("leases", firewall.DHCPLeasesFile, "dnsmasq lease `file` mapping bypass MACs to addresses"),
	}
}

func firewallPlan(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("firewall plan", flag.ContinueOnError)
	sf := addSpecFlags(fs)
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	s, err := daemon.SpecFromFile(*sf.config, *sf.leases, false, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "surflare-watchdog firewall plan: %v\n", err)
		return exitFailure
	}
	text, err := firewall.Render(s)
	if err != nil {
		fmt.Fprintf(stderr, "surflare-watchdog firewall plan: %v\n", err)
		return exitFailure
	}
	fmt.Fprint(stdout, text)
	return exitOK
}

func firewallApply(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("firewall apply", flag.ContinueOnError)
	sf := addSpecFlags(fs)
	noRouting := fs.Bool("no-routing", false, "leave the fwmark rule and table 100 alone")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	s, err := daemon.SpecFromFile(*sf.config, *sf.leases, true, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "surflare-watchdog firewall apply: %v\n", err)
		return exitFailure
	}
	fw := firewall.New()
	ch, err := fw.Apply(ctx, s)
	if err != nil {
		fmt.Fprintf(stderr, "surflare-watchdog firewall apply: %v\n", err)
		return exitFailure
	}
	if !*noRouting {
		rc, err := fw.EnsureRouting(ctx, s)
		ch = append(ch, rc...)
		if err != nil {
			fmt.Fprintf(stderr, "surflare-watchdog firewall apply: tunnel routing: %v\n", err)
			return exitFailure
		}
	}
	ch.WriteText(stdout)
	return exitOK
}

func teardownMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return firewallTeardown(ctx, "teardown", args, stdout, stderr, false)
}

func firewallTeardown(ctx context.Context, name string, args []string, stdout, stderr io.Writer, allowKeep bool) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	keep := new(bool)
	if allowKeep {
		keep = fs.Bool("keep-kill-switch", false, "leave inet killswitch armed (stop without opening the gates)")
	}
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	ch, err := firewall.New().Teardown(ctx, *keep)
	ch.WriteText(stdout)
	if err != nil {
		fmt.Fprintf(stderr, "surflare-watchdog %s: %v\n", name, err)
		return exitFailure
	}
	return exitOK
}

func firewallStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("firewall status", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	rep, err := firewall.New().Report(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "surflare-watchdog firewall status: %v\n", err)
		return exitFailure
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(rep)
		return exitOK
	}
	rep.WriteText(stdout)
	return exitOK
}

const traceUsage = `Usage: surflare-watchdog firewall trace start [--addr A] [--port N] [--all] | stop | watch [--for D]
`

func firewallTrace(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fw := firewall.New()
	return subcommands("firewall trace", traceUsage, args, stdout, stderr, map[string]func([]string) int{
		"start": func(a []string) int { return traceStart(ctx, fw, a, stdout, stderr) },
		"stop": func(a []string) int {
			fs := flag.NewFlagSet("firewall trace stop", flag.ContinueOnError)
			if code, ok := parseFlags(fs, a, stdout, stderr); !ok {
				return code
			}
			if err := fw.TraceStop(ctx); err != nil {
				fmt.Fprintf(stderr, "surflare-watchdog firewall trace stop: %v\n", err)
				return exitFailure
			}
			fmt.Fprintln(stdout, "trace stopped")
			return exitOK
		},
		"watch": func(a []string) int {
			fs := flag.NewFlagSet("firewall trace watch", flag.ContinueOnError)
			d := fs.Duration("for", 0, "stop after this `duration` (0 = until interrupted)")
			if code, ok := parseFlags(fs, a, stdout, stderr); !ok {
				return code
			}
			if *d > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, *d)
				defer cancel()
			}
			if err := fw.ReadTrace(ctx, func(e firewall.TraceEvent) { fmt.Fprintln(stdout, e) }); err != nil {
				fmt.Fprintf(stderr, "surflare-watchdog firewall trace watch: %v\n", err)
				return exitFailure
			}
			return exitOK
		},
	})
}

func traceStart(ctx context.Context, fw *firewall.Firewall, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("firewall trace start", flag.ContinueOnError)
	addr := fs.String("addr", "", "trace packets from or to this `address`")
	port := fs.Uint("port", 0, "trace TCP/UDP packets from or to this `port`")
	all := fs.Bool("all", false, "trace every packet (heavy on a busy router)")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	var f firewall.TraceFilter
	if *addr != "" {
		a, err := netip.ParseAddr(*addr)
		if err != nil {
			fmt.Fprintf(stderr, "surflare-watchdog firewall trace start: --addr %q is not an address\n", *addr)
			return exitUsage
		}
		f.Addr = a
	}
	if *port > 65535 {
		fmt.Fprintf(stderr, "surflare-watchdog firewall trace start: --port %d is out of range\n", *port)
		return exitUsage
	}
	f.Port = uint16(*port)
	if !f.Addr.IsValid() && f.Port == 0 && !*all {
		fmt.Fprintln(stderr, "surflare-watchdog firewall trace start: give --addr and/or --port, or --all")
		return exitUsage
	}
	if err := fw.TraceStart(ctx, f); err != nil {
		fmt.Fprintf(stderr, "surflare-watchdog firewall trace start: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "tracing %s; 'surflare-watchdog firewall trace watch' shows events, 'trace stop' ends it\n", f)
	return exitOK
}

const routesUsage = `Usage: surflare-watchdog routes update [--config FILE] [--url URL] [--out4 FILE] [--out6 FILE] [--country CC]
`

func routesMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return subcommands("routes", routesUsage, args, stdout, stderr, map[string]func([]string) int{
		"update": func(a []string) int { return routesUpdate(ctx, a, stdout, stderr) },
	})
}

func routesUpdate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("routes update", flag.ContinueOnError)
	cfgPath := fs.String("config", config.DefaultPath, "the UCI `file` to take the defaults from")
	url := fs.String("url", "", "APNIC delegated-format `URL` (default: chnroute_url from the config)")
	out4 := fs.String("out4", "", "IPv4 output `file` (default: chnroute_v4 from the config)")
	out6 := fs.String("out6", "", "IPv6 output `file` (default: chnroute_v6 from the config)")
	country := fs.String("country", "CN", "two-letter `country` code")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after this `duration`")
	if code, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	// Flags win; the config fills in the rest; a missing config file is fine
	// when the flags say everything.
	if c, _, err := config.Load(*cfgPath); err == nil {
		setDefault(url, c.Paths.ChnrouteURL)
		setDefault(out4, c.Paths.ChnrouteV4)
		setDefault(out6, c.Paths.ChnrouteV6)
	} else if *url == "" || *out4 == "" || *out6 == "" {
		fmt.Fprintf(stderr, "surflare-watchdog routes update: %v (or give --url, --out4 and --out6)\n", err)
		return exitFailure
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	p := progress.Auto(stdout) // the download is a few MB: on a terminal its count updates in place
	p.Step("downloading " + *url + progress.StepSuffix)
	client := &http.Client{Transport: progress.Transport(p, http.DefaultTransport)}
	n4, n6, err := firewall.UpdateChnroute(ctx, client, *url, *country, *out4, *out6)
	p.Done()
	if err != nil {
		fmt.Fprintf(stderr, "surflare-watchdog routes update: %v\n", err)
		return exitFailure
	}
	fmt.Fprintf(stdout, "%s: %d IPv4 prefixes\n%s: %d IPv6 prefixes\n", *out4, n4, *out6, n6)
	return exitOK
}

func setDefault(p *string, v string) {
	if *p == "" {
		*p = v
	}
}
