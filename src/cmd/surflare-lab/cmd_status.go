package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"surflare-watchdog/src/lab"
	"surflare-watchdog/src/lab/fakes"
)

func init() {
	register(&command{
		name: "status", args: "[--lab PREFIX]",
		summary: "running labs: faults, leak counters, proxy, router tables",
		run: func(ctx context.Context, args []string) int {
			fs := flag.NewFlagSet("status", flag.ContinueOnError)
			prefix := fs.String("lab", "", "only this lab")
			if err := fs.Parse(args); err != nil {
				return parseExit(err)
			}
			if !needRoot("status") {
				return exitFailure
			}
			prefixes := lab.Running()
			if *prefix != "" {
				prefixes = []string{*prefix}
			}
			if len(prefixes) == 0 {
				fmt.Println("no lab running")
				return exitOK
			}
			code := exitOK
			for _, p := range prefixes {
				if err := printStatus(ctx, p); err != nil {
					fmt.Fprintf(os.Stderr, "surflare-lab status: %v\n", err)
					code = exitFailure
				}
			}
			return code
		},
	})
}

func printStatus(ctx context.Context, prefix string) error {
	l, err := lab.Attach(prefix)
	if err != nil {
		return err
	}
	defer l.Close()
	fmt.Printf("lab %s (owner pid %d)\n", l.Prefix, l.Owner())
	printLabInfo(l)
	if f, err := fakes.LoadFaults(l.Dir); err == nil {
		f.Injected = nil
		b, _ := json.Marshal(f)
		fmt.Printf("  faults.json: %s\n", b)
	}
	if lc, err := l.Leaks(ctx); err == nil {
		fmt.Printf("  counters: %s\n", lc)
	}
	fmt.Printf("  surflare-proxy pids: %v\n", l.ProcsByComm(lab.RoleRouter, fakes.ProxyName))
	fmt.Printf("  router tables: %v\n", l.RouterTables())
	log := l.FaultLog()
	if len(log) > 5 {
		log = log[len(log)-5:]
	}
	for _, ev := range log {
		fmt.Printf("  fault %s %s %s %v %s\n", ev.Time.Format("15:04:05.000"), ev.Name, onOff(ev.On), ev.Args, ev.Detail)
	}
	return nil
}
