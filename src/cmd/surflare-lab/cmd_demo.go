package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	"surflare-watchdog/src/lab"
)

func init() {
	register(&command{
		name: "demo", args: "[--no-tour] [--set surflare.S.O=V]...",
		summary: "lab + daemon + web UI on 127.0.0.1, a client looping requests, a scripted fault tour; Ctrl-C ends it",
		run:     runDemo,
	})
}

// demo holds what the demo's goroutines share.
type demo struct {
	l      *lab.Lab
	daemon bool

	mu       sync.Mutex
	lastExit string // exit node client 0 last went through
}

func runDemo(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	var sets setFlags
	fs.Var(&sets, "set", "override in the daemon's lab config, surflare.SECTION.OPTION=VALUE (repeatable)")
	vendor := vendorFlag(fs)
	noTour := fs.Bool("no-tour", false, "skip the scripted fault tour")
	webPort := fs.Int("web-port", lab.LabWebPort, "host port (127.0.0.1) for the daemon's web UI; 0 = any free port")
	every := fs.Duration("every", time.Second, "how often the LAN client fetches the IP-echo host")
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	if err := lab.CheckVendor(*vendor); err != nil {
		fmt.Fprintf(os.Stderr, "surflare-lab demo: %v\n", err)
		return exitUsage
	}
	if !needRoot("demo") {
		return exitFailure
	}
	fmt.Println("building the lab binaries and bringing the lab up …")
	l, err := lab.Up(ctx, lab.Options{Set: sets, Vendor: *vendor})
	if err != nil {
		fmt.Fprintf(os.Stderr, "surflare-lab demo: %v\n", err)
		return exitFailure
	}
	defer func() {
		fmt.Printf("\ntearing down lab %s …\n", l.Prefix)
		l.Close()
	}()
	fmt.Printf("lab %s up in %s (binaries %s)\n", l.Prefix, l.UpTime.Round(time.Millisecond), l.BuildTime.Round(time.Millisecond))
	printLabInfo(l)

	d := &demo{l: l, daemon: daemonHasRun(ctx, l)}
	if d.daemon {
		if err := d.startDaemon(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "surflare-lab demo: %v\n", err)
			return exitFailure
		}
		target := fmt.Sprintf("%s:%d", lab.LANRouter, lab.LabWebPort)
		ln, err := l.ForwardTCP(ctx, fmt.Sprintf("127.0.0.1:%d", *webPort), lab.RoleRouter, target)
		if err != nil {
			fmt.Fprintf(os.Stderr, "surflare-lab demo: web UI relay: %v (try --web-port 0)\n", err)
			return exitFailure
		}
		fmt.Printf("daemon running in %s, kill switch armed (log: %s)\n", l.NSName(lab.RoleRouter), l.LogPath(lab.DaemonName))
		fmt.Printf("web UI: http://%s/  (relayed into the router namespace, not routed)\n", ln.Addr())
	} else {
		fmt.Println("surflare-watchdog has no `run` subcommand yet: running the lab alone —")
		fmt.Println("the demo logs the fake client in, connects it and installs the lab's LAN tproxy table itself.")
		if err := d.connectByHand(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "surflare-lab demo: %v\n", err)
			return exitFailure
		}
	}
	go d.clientLoop(ctx, *every)
	if !*noTour {
		d.tour(ctx)
	}
	fmt.Println("Ctrl-C tears everything down.")
	<-ctx.Done()
	return exitOK
}

// demoDaemonStart bounds the daemon's start: up to the armed kill switch
// it takes well under a second; a hung start should not hang the demo.
const demoDaemonStart = 30 * time.Second

// startDaemon starts the daemon and returns once it is past "starting",
// i.e. its kill switch is armed: the client loop begins only then, so its
// first request cannot leave the lab directly (it did when the loop raced
// the daemon's startup).
func (d *demo) startDaemon(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, demoDaemonStart)
	defer cancel()
	_, err := d.l.StartDaemon(ctx)
	return err
}

// leakCheck prints the lab's leak counters after the client's first
// request: with the kill switch armed first they must be zero.
func (d *demo) leakCheck(ctx context.Context) (lab.LeakCounts, error) {
	lc, err := d.l.Leaks(ctx)
	switch {
	case err != nil:
		fmt.Printf("=== leak check at start failed: %v\n", err)
	case lc.Total() > 0:
		fmt.Printf("=== LEAK at start: %s (the first request left the lab outside the tunnel)\n", lc)
	default:
		fmt.Printf("=== leak check at start: %s\n", lc)
	}
	return lc, err
}

// daemonHasRun reports whether the lab's daemon binary has a `run`
// subcommand (it answers `run --help` with exit 0).
func daemonHasRun(ctx context.Context, l *lab.Lab) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := l.Exec(ctx, lab.RoleRouter, l.Path("bin", "surflare-watchdog"), "run", "--help")
	return err == nil
}

func (d *demo) connectByHand(ctx context.Context) error {
	if err := d.l.Reconnect(ctx, ""); err != nil {
		return err
	}
	return d.l.InstallLANTProxy()
}

// clientLoop has LAN client 0 fetch the IP-echo host and prints what it saw.
func (d *demo) clientLoop(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	first := true
	for {
		fctx, cancel := context.WithTimeout(ctx, every+time.Second)
		f := d.l.ClientFetch(fctx, 0, lab.EchoURL(0))
		cancel()
		if ctx.Err() != nil {
			return
		}
		seen := describeFetch(f)
		if e, err := lab.ParseEcho(f.Body); err == nil && f.Err == nil && lab.ExitName(e.IP) != "" {
			d.mu.Lock()
			d.lastExit = lab.ExitName(e.IP)
			d.mu.Unlock()
		}
		fmt.Printf("%s  client 198.18.1.10 → %s\n", time.Now().Format("15:04:05"), seen)
		if first && d.daemon {
			d.leakCheck(ctx)
		}
		first = false
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// describeFetch is one short line about an echo fetch.
func describeFetch(f lab.Fetch) string {
	if f.Err != nil {
		return "FAILED: " + f.Err.Error()
	}
	if f.Status != 200 {
		return fmt.Sprintf("HTTP %d", f.Status)
	}
	e, err := lab.ParseEcho(f.Body)
	if err != nil {
		return err.Error()
	}
	name := lab.ExitName(e.IP)
	if name == "" {
		name = "NO TUNNEL: direct"
	}
	return fmt.Sprintf("exit %s %s (%s) %s", e.IP, e.Country, name, f.Elapsed.Round(time.Millisecond))
}

// currentExit is the exit client 0 last went through ("" if none yet).
func (d *demo) currentExit() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lastExit
}

// tourStep is one scripted fault: on, hold, off, with what to watch for.
type tourStep struct {
	say     string
	fault   string
	args    func(d *demo) []string
	hold    time.Duration // with the daemon; the bare lab holds 6 s
	byHand  bool          // without the daemon, reconnect by hand after it
	oneShot bool          // nothing to switch off
}

func (d *demo) tour(ctx context.Context) {
	current := func(d *demo) []string {
		if n := d.currentExit(); n != "" {
			return []string{n}
		}
		return []string{lab.Nodes[0].Name}
	}
	steps := []tourStep{
		{say: "Black-holing the current exit: packets vanish silently. The watchdog should notice and rotate to the next candidate.", fault: lab.FaultNodeBlackhole, args: current, hold: 60 * time.Second},
		{say: "503 storm on the current exit: its urltest target answers 503 while traffic still flows.", fault: lab.Fault503, args: current, hold: 60 * time.Second},
		{say: "Adding 800 ms latency at the current exit.", fault: lab.FaultLatency, args: func(d *demo) []string { return append(current(d), "800") }, hold: 20 * time.Second},
		{say: "Killing surflare-proxy (proxy crash): its table and rule stay behind, the port is closed.", fault: lab.FaultProxyCrash, hold: 40 * time.Second, byHand: true, oneShot: true},
		{say: "Wiping every nftables table in the router (fw4 restart). Without the kill switch, traffic would leak.", fault: lab.FaultTableWipe, hold: 40 * time.Second, byHand: true, oneShot: true},
		{say: "Domestic exit: the proxy sends traffic out directly (exit country CN).", fault: lab.FaultDomesticExit, hold: 40 * time.Second},
		{say: "WAN down for a while, then up again.", fault: lab.FaultWANDown, hold: 15 * time.Second},
	}
	sleep := func(dur time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(dur):
			return true
		}
	}
	fmt.Println("\n=== fault tour (skip with --no-tour; Ctrl-C ends the demo) ===")
	if !sleep(5 * time.Second) {
		return
	}
	for i, s := range steps {
		var args []string
		if s.args != nil {
			args = s.args(d)
		}
		fmt.Printf("\n=== %d/%d %s %v: %s\n", i+1, len(steps), s.fault, args, s.say)
		if err := d.l.Fault(ctx, s.fault, true, args...); err != nil {
			fmt.Printf("=== could not inject: %v\n", err)
			continue
		}
		hold := s.hold
		if !d.daemon {
			hold = 6 * time.Second
			fmt.Println("=== (no daemon: nothing reacts; the fault is removed after 6 s)")
		}
		if !sleep(hold) {
			return
		}
		if !s.oneShot {
			if err := d.l.Fault(ctx, s.fault, false, args...); err != nil {
				fmt.Printf("=== could not remove: %v\n", err)
			}
			fmt.Printf("=== %s off\n", s.fault)
		}
		if s.byHand && !d.daemon {
			fmt.Println("=== no daemon: reconnecting by hand")
			if err := d.connectByHand(ctx); err != nil {
				fmt.Printf("=== reconnect failed: %v\n", err)
			}
		}
		if lc, err := d.l.Leaks(ctx); err == nil {
			fmt.Printf("=== counters so far: %s\n", lc)
		}
		if !sleep(5 * time.Second) {
			return
		}
	}
	fmt.Println("\n=== tour done; the lab keeps running.")
}
