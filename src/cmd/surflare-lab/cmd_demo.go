package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
	lastExit string        // exit node client 0 last went through
	fetches  []fetchRecord // client 0's recent fetches, oldest first
}

// fetchRecord is one of client 0's fetches: did it get through the tunnel.
type fetchRecord struct {
	at time.Time
	ok bool
}

// maxFetchRecords bounds the record (a fetch a second: over half an hour).
const maxFetchRecords = 2048

func (d *demo) record(at time.Time, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.fetches = append(d.fetches, fetchRecord{at, ok})
	if len(d.fetches) > maxFetchRecords {
		d.fetches = d.fetches[len(d.fetches)-maxFetchRecords:]
	}
}

// since returns the fetches at or after t.
func (d *demo) since(t time.Time) []fetchRecord {
	d.mu.Lock()
	defer d.mu.Unlock()
	i := len(d.fetches)
	for i > 0 && !d.fetches[i-1].at.Before(t) {
		i--
	}
	return append([]fetchRecord(nil), d.fetches[i:]...)
}

// stepOutcome judges a tour step from the client's fetches since it began:
// no failure at all, an outage that ended (how long), or one still going.
type stepOutcome struct {
	failed    int
	outage    time.Duration // from the first failure to the first success after the last one
	recovered bool
	at        time.Time // that first success
}

func judge(fs []fetchRecord) stepOutcome {
	var o stepOutcome
	var first, lastFail time.Time
	for _, f := range fs {
		if !f.ok {
			o.failed++
			if first.IsZero() {
				first = f.at
			}
			lastFail = f.at
		}
	}
	if o.failed == 0 {
		o.recovered = true
		return o
	}
	for _, f := range fs {
		if f.ok && f.at.After(lastFail) {
			o.recovered, o.outage, o.at = true, f.at.Sub(first), f.at
			break
		}
	}
	return o
}

// waitRecovered waits until a fetch after the last failure since t got
// through, or until grace has passed.
func (d *demo) waitRecovered(ctx context.Context, t time.Time, grace time.Duration) stepOutcome {
	deadline := time.Now().Add(grace)
	for {
		o := judge(d.since(t))
		if o.recovered || time.Now().After(deadline) || ctx.Err() != nil {
			return o
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func runDemo(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	var sets setFlags
	fs.Var(&sets, "set", "override in the daemon's lab config, surflare.SECTION.OPTION=VALUE (repeatable)")
	vendor := vendorFlag(fs)
	noTour := fs.Bool("no-tour", false, "skip the scripted fault tour")
	webPort := fs.Int("web-port", lab.LabWebPort, "host port (127.0.0.1) for the daemon's web UI; 0 = any free port")
	every := fs.Duration("every", time.Second, "how often the LAN client fetches the IP-echo host")
	openwrt := fs.Bool("openwrt", false, openwrtUsage)
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
	if !*noTour {
		// The tour injects seven faults in a few minutes; with the shipped
		// limits (6 reconnects in 10 min, a 10 min cooldown when no node
		// works) the later steps would only show the rate limit. The
		// demo's own limits come first, so --set still overrides them.
		sets = append(append(setFlags{}, demoLimits...), sets...)
		fmt.Println("demo limits (a router keeps the shipped ones): " + demoLimitsText)
	}
	fmt.Println("building the lab binaries and bringing the lab up …")
	l, err := lab.Up(ctx, lab.Options{Set: sets, Vendor: *vendor, OpenWrt: openwrtOption(*openwrt)})
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
		where := l.LogPath(lab.DaemonName)
		if b := l.Box(); b != nil {
			where = "logread in the OpenWrt router: " + filepath.Join(b.Dir, "enter.sh") + " " + b.NetNS + " logread -f"
		}
		fmt.Printf("daemon running in %s, kill switch armed (log: %s)\n", l.NSName(lab.RoleRouter), where)
		fmt.Printf("web UI: %s  (relayed into the router namespace, not routed)\n", webURL(l, ln.Addr().String()))
		// The client's first request waits for the tunnel: before it, the
		// kill switch rightly refuses it, and a demo that starts with a
		// failure shows the wrong thing.
		if _, err := l.WaitDaemon(ctx, demoHealthy, lab.DaemonState.Healthy); err != nil {
			fmt.Printf("=== the tunnel is not up after %s: %v\n", demoHealthy, err)
		}
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

// demoHealthy bounds the wait for the first healthy tunnel.
const demoHealthy = 60 * time.Second

// demoLimits are the limits the demo runs the daemon with, and what they
// are, printed at the start.
var demoLimits = setFlags{
	"surflare.main.reconnect_limit=40",
	"surflare.main.reconnect_window=600",
	"surflare.main.storm_cooldown=20",
}

const demoLimitsText = "40 reconnects in 10 min (shipped 6), 20 s cooldown when no node works (shipped 10 min)"

// webURL is the web UI's address with the lab's token in the fragment (the
// page moves it to session storage and never sends the fragment), so the
// printed link opens the live view at once.
func webURL(l *lab.Lab, addr string) string {
	u := "http://" + addr + "/"
	if tok, err := os.ReadFile(l.Path("config", "web.token")); err == nil {
		if t := strings.TrimSpace(string(tok)); t != "" {
			u += "#token=" + t
		}
	}
	return u
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
		ok := false
		if e, err := lab.ParseEcho(f.Body); err == nil && f.Err == nil && lab.ExitName(e.IP) != "" {
			ok = true
			d.mu.Lock()
			d.lastExit = lab.ExitName(e.IP)
			d.mu.Unlock()
		}
		d.record(time.Now(), ok)
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

func failedText(n int) string {
	if n == 1 {
		return "1 request failed"
	}
	return fmt.Sprintf("%d requests failed", n)
}

// tourGrace is how long a step may take to recover after its fault is
// off (or, for a one-shot fault, after it struck).
const tourGrace = 45 * time.Second

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
	passed := 0
	for i, s := range steps {
		var args []string
		if s.args != nil {
			args = s.args(d)
		}
		fmt.Printf("\n=== %d/%d %s %v: %s\n", i+1, len(steps), s.fault, args, s.say)
		leaks0, _ := d.l.Leaks(ctx)
		began := time.Now()
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
		ended := time.Now()
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
		o := d.waitRecovered(ctx, began, tourGrace)
		leaks := "leaks ?"
		if lc, err := d.l.Leaks(ctx); err == nil {
			leaks = fmt.Sprintf("leaks %d", lc.Total()-leaks0.Total())
		}
		switch {
		case !o.recovered:
			fmt.Printf("=== ✗ not recovered %s after the fault (%s, %s)\n", time.Since(began).Round(time.Second), failedText(o.failed), leaks)
		case o.failed == 0:
			passed++
			fmt.Printf("=== ✓ no request failed (%s)\n", leaks)
		case !s.oneShot && o.at.After(ended):
			// Nothing on the router can mend this one (the WAN, a proxy
			// that goes direct on every node): what counts is that the
			// LAN was held offline without a leak, and came back.
			passed++
			fmt.Printf("=== ✓ held offline while it lasted (%s), back %.1f s after it ended (%s)\n",
				failedText(o.failed), o.at.Sub(ended).Seconds(), leaks)
		default:
			passed++
			fmt.Printf("=== ✓ recovered in %.1f s (%s, %s)\n", o.outage.Seconds(), failedText(o.failed), leaks)
		}
		if !sleep(5 * time.Second) {
			return
		}
	}
	fmt.Printf("\n=== tour: %d of %d steps recovered\n", passed, len(steps))
	fmt.Println("\n=== tour done; the lab keeps running.")
}
