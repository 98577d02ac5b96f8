package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/nftables"

	"surflare-watchdog/src/lab/fakes"
)

// Check is one row of the selftest table.
type Check struct {
	Fault    string // fault (with args) or "baseline: …"
	Expected string
	Seen     string
	OK       bool
}

// selfCase is one fault the selftest flips: observe must see the expected
// effect while it is on; after it is off (and restore ran) client 0 must
// be back on the original exit.
type selfCase struct {
	fault    string
	args     []string
	expected string
	leaky    bool // the fault is expected to leak packets past the tunnel
	observe  func(ctx context.Context, l *Lab) (seen string, ok bool)
	restore  func(ctx context.Context, l *Lab) error
}

// observeWindow is how long an observation may take to see a fault: the
// fakes re-read faults.json every fakes.WatchInterval, and failed fetches
// need their timeout.
const observeWindow = 4 * time.Second

// Selftest brings a lab up without the watchdog, connects the fake vendor
// client itself (login + connect, plus the lab's minimal LAN tproxy table
// standing in for the watchdog's), checks that LAN clients and the router
// reach the internet through the tunnel with no leak, then flips every fault
// on and off checking what a client (or the vendor CLI) sees. It writes the
// table to w, tears the lab down and returns the checks; all passed when
// err is nil. Then every vendor knob (fakes.Knobs) is set in the
// evidence's way and the old fake's, each a row showing what a client or
// the vendor CLI sees (selftest_knobs.go).
func Selftest(ctx context.Context, o Options, w io.Writer) ([]Check, error) {
	l, err := Up(ctx, o)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	fmt.Fprintf(w, "lab %s up in %s (build %s)\n", l.Prefix, l.UpTime.Round(time.Millisecond), l.BuildTime.Round(time.Millisecond))
	checks := l.selftest(ctx, w)
	if ctx.Err() != nil {
		return checks, fmt.Errorf("selftest interrupted: %w", ctx.Err())
	}
	printChecks(w, checks)
	var failed []string
	for _, c := range checks {
		if !c.OK {
			failed = append(failed, c.Fault)
		}
	}
	if len(failed) > 0 {
		return checks, fmt.Errorf("selftest: %d of %d checks failed: %s", len(failed), len(checks), strings.Join(failed, ", "))
	}
	return checks, nil
}

func (l *Lab) selftest(ctx context.Context, w io.Writer) []Check {
	home := Nodes[0]
	var checks []Check
	add := func(c Check) {
		checks = append(checks, c)
		mark := "ok"
		if !c.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "  %-28s %-4s %s\n", c.Fault, mark, c.Seen)
	}
	if err := l.Connect(ctx, home.Name); err != nil {
		add(Check{"baseline: connect", "surflare login + connect succeed", err.Error(), false})
		return checks
	}
	if err := l.InstallLANTProxy(); err != nil {
		add(Check{"baseline: LAN tproxy", "lab tproxy table installs", err.Error(), false})
		return checks
	}
	l.ResetLeaks(ctx)
	for i := range l.clients {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		e, err := l.WaitClientExit(wctx, i, home.Addr.String())
		cancel()
		add(Check{fmt.Sprintf("baseline: client %d", i), fmt.Sprintf("exit %s %s", home.Addr, home.Country), seenEcho(e, err), err == nil && e.Country == home.Country})
	}
	f := l.FetchFrom(ctx, RoleRouter, EchoURL(1))
	add(Check{"baseline: router", "exit " + home.Addr.String(), describe(f), echoOf(f) == home.Addr.String()})
	lc, err := l.ResetLeaks(ctx)
	add(Check{"baseline: leaks", "0 packets past the tunnel, >0 to relays", fmt.Sprint(lc, err), err == nil && lc.Total() == 0 && lc.Relay > 0})

	for _, c := range selfCases(home) {
		if ctx.Err() != nil {
			break
		}
		add(l.runCase(ctx, c, home))
	}
	saved, err := fakes.LoadLabInfo(l.Dir)
	if err != nil {
		add(Check{"vendor knobs", "lab.json readable", err.Error(), false})
		return checks
	}
	for _, r := range knobRows(home) {
		if ctx.Err() != nil {
			break
		}
		add(l.runKnob(ctx, r, home, saved))
	}
	return checks
}

// runCase turns one fault on, observes it, turns it off, restores and
// checks the baseline is back.
func (l *Lab) runCase(ctx context.Context, c selfCase, home Node) Check {
	name := strings.TrimSpace(c.fault + " " + strings.Join(c.args, " "))
	chk := Check{Fault: name, Expected: c.expected}
	l.ResetLeaks(ctx)
	if err := l.Fault(ctx, c.fault, true, c.args...); err != nil {
		chk.Seen = err.Error()
		return chk
	}
	deadline := time.Now().Add(observeWindow)
	for {
		chk.Seen, chk.OK = c.observe(ctx, l)
		if chk.OK || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	lc, _ := l.Leaks(ctx)
	if !c.leaky && lc.Total() > 0 {
		chk.OK = false
		chk.Seen += "; LEAKED " + lc.String()
	}
	if err := l.Fault(ctx, c.fault, false, c.args...); err != nil {
		chk.OK = false
		chk.Seen += "; off: " + err.Error()
		return chk
	}
	if c.restore != nil {
		if err := c.restore(ctx, l); err != nil {
			chk.OK = false
			chk.Seen += "; restore: " + err.Error()
			return chk
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 8*time.Second)
	defer cancel()
	if e, err := l.WaitClientExit(wctx, 0, home.Addr.String()); err != nil {
		chk.OK = false
		chk.Seen += "; not restored: " + seenEcho(e, err)
	}
	return chk
}

func selfCases(home Node) []selfCase {
	// reconnect is the manual recovery; it retries for a few seconds
	// because the fakes see a fault's removal only at their next re-read.
	reconnect := func(ctx context.Context, l *Lab) error {
		var err error
		for range 20 {
			if err = l.Reconnect(ctx, home.Name); err == nil {
				return l.InstallLANTProxy()
			}
			time.Sleep(250 * time.Millisecond)
		}
		return err
	}
	cli := func(args ...string) func(ctx context.Context, l *Lab) (string, error) {
		return func(ctx context.Context, l *Lab) (string, error) { return l.Surflare(ctx, args...) }
	}
	login := cli("login", "-u", LabUsername, "-p", "lab-password", "--remember")
	status := cli("status")
	return []selfCase{
		{fault: FaultNodeDown, args: []string{home.Name}, expected: "fetch fails (exit refuses)", observe: fetchFails},
		{fault: FaultNodeBlackhole, args: []string{home.Name}, expected: "fetch fails (silence)", observe: fetchFails},
		{fault: FaultRelayBlackhole, args: []string{"all"}, expected: "fetch fails (silence)", observe: fetchFails},
		{fault: FaultLoss, args: []string{"100"}, expected: "fetch fails", observe: fetchFails},
		{fault: FaultLatency, args: []string{home.Name, "400"}, expected: "exit unchanged, >= 400ms", observe: fetchSlow(home, 400*time.Millisecond)},
		{fault: Fault503, args: []string{home.Name}, expected: "urltest HTTP 503, echo ok", observe: fetch503(home)},
		{fault: FaultDomesticExit, expected: fmt.Sprintf("exit %s CN, leak counted", WANRouter), leaky: true, observe: fetchDirect},
		{fault: FaultProxyLoop, expected: "fetch fails (loop)", observe: fetchFails, restore: reconnect},
		{fault: FaultProxyCrash, expected: "fetch fails (port closed)", observe: fetchFails, restore: reconnect},
		{fault: FaultTableWipe, expected: fmt.Sprintf("exit %s CN (tables gone: leak)", WANRouter), leaky: true, observe: fetchDirect, restore: reconnect},
		{fault: FaultWANDown, expected: "fetch fails", observe: fetchFails},
		{fault: FaultAPIDown, expected: "connect: Account check failed", observe: cliFails(func(ctx context.Context, l *Lab) (string, error) {
			_, _ = l.Surflare(ctx, "disconnect")
			return l.Surflare(ctx, "connect", "--node", home.Name, "--daemon")
		}, "Account check failed"), restore: reconnect},
		{fault: FaultAuth, args: []string{"429"}, expected: "login: Too Many Requests", observe: cliFails(login, "Too Many Requests")},
		{fault: FaultAuth, args: []string{"invalid"}, expected: "login: invalid username/password", observe: cliFails(login, "invalid username/password")},
		{fault: FaultAuth, args: []string{"device_limit"}, expected: "login: Device limit", observe: cliFails(login, "Device limit")},
		{fault: FaultAuth, args: []string{"account_check"}, expected: "login: Account check failed", observe: cliFails(login, "Account check failed")},
		{fault: FaultAuth, args: []string{"subscription"}, expected: "status: subscription not active", observe: cliSays(status, "subscription not active")},
		{fault: FaultAuth, args: []string{"expired"}, expected: "status: session expired", observe: cliSays(status, "session expired"), restore: reconnect},
		{fault: FaultLoginHang, expected: "login hangs (killed at 1.5s)", observe: loginHangs},
		{fault: FaultDisconnectHalf, expected: "disconnect fails, inet surflare left", observe: disconnectHalf, restore: reconnect},
	}
}

// --- observers -------------------------------------------------------------

func clientFetch(ctx context.Context, l *Lab, timeout time.Duration) Fetch {
	fctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return l.ClientFetch(fctx, 0, EchoURL(0))
}

func fetchFails(ctx context.Context, l *Lab) (string, bool) {
	f := clientFetch(ctx, l, 1500*time.Millisecond)
	return describe(f), f.Err != nil || f.Status != 200
}

// fetch503 sees the urltest target answer 503 through a 503-ing exit while
// ordinary requests still come back through it.
func fetch503(home Node) func(ctx context.Context, l *Lab) (string, bool) {
	return func(ctx context.Context, l *Lab) (string, bool) {
		fctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		u := l.ClientFetch(fctx, 0, "http://"+Search.String()+"/generate_204")
		f := clientFetch(ctx, l, 2*time.Second)
		return describe(u) + "; " + describe(f), u.Err == nil && u.Status == 503 && echoOf(f) == home.Addr.String()
	}
}

func fetchSlow(home Node, min time.Duration) func(ctx context.Context, l *Lab) (string, bool) {
	return func(ctx context.Context, l *Lab) (string, bool) {
		f := clientFetch(ctx, l, 5*time.Second)
		return describe(f), echoOf(f) == home.Addr.String() && f.Elapsed >= min
	}
}

func fetchDirect(ctx context.Context, l *Lab) (string, bool) {
	f := clientFetch(ctx, l, 2*time.Second)
	lc, _ := l.Leaks(ctx)
	seen := describe(f) + "; " + lc.String()
	return seen, echoOf(f) == WANRouter.String() && lc.TCP4 > 0
}

func cliFails(run func(context.Context, *Lab) (string, error), want string) func(ctx context.Context, l *Lab) (string, bool) {
	return func(ctx context.Context, l *Lab) (string, bool) {
		out, err := run(ctx, l)
		return oneLine(out, err), err != nil && strings.Contains(out, want)
	}
}

func cliSays(run func(context.Context, *Lab) (string, error), want string) func(ctx context.Context, l *Lab) (string, bool) {
	return func(ctx context.Context, l *Lab) (string, bool) {
		out, err := run(ctx, l)
		return oneLine(out, err), strings.Contains(out, want)
	}
}

func loginHangs(ctx context.Context, l *Lab) (string, bool) {
	hctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	start := time.Now()
	out, err := l.Surflare(hctx, "login", "-u", LabUsername, "-p", "lab-password", "--remember")
	hung := errors.Is(hctx.Err(), context.DeadlineExceeded)
	return fmt.Sprintf("%s after %s", oneLine(out, err), time.Since(start).Round(100*time.Millisecond)), hung
}

func disconnectHalf(ctx context.Context, l *Lab) (string, bool) {
	out, err := l.Surflare(ctx, "disconnect")
	left := l.hasTable(nftables.TableFamilyINet, "surflare")
	return fmt.Sprintf("%s; inet surflare left: %v", oneLine(out, err), left), err != nil && left
}

// hasTable reports whether the router has a table.
func (l *Lab) hasTable(fam nftables.TableFamily, name string) bool {
	c, err := nftConn(l.ns[RoleRouter])
	if err != nil {
		return false
	}
	t, err := c.ListTableOfFamily(name, fam)
	return err == nil && t != nil
}

// --- formatting ---------------------------------------------------------------

func echoOf(f Fetch) string {
	if f.Err != nil || f.Status != 200 {
		return ""
	}
	e, err := ParseEcho(f.Body)
	if err != nil {
		return ""
	}
	return e.IP
}

// describe says in a few words what a fetch saw.
func describe(f Fetch) string {
	if f.Err != nil {
		return "error: " + shortErr(f.Err) + " after " + f.Elapsed.Round(10*time.Millisecond).String()
	}
	if e, err := ParseEcho(f.Body); err == nil && f.Status == 200 {
		name := ExitName(e.IP)
		if name == "" {
			name = "direct"
		}
		return fmt.Sprintf("exit %s %s (%s) in %s", e.IP, e.Country, name, f.Elapsed.Round(10*time.Millisecond))
	}
	return fmt.Sprintf("HTTP %d %q", f.Status, truncate(strings.TrimSpace(f.Body), 40))
}

func seenEcho(e Echo, err error) string {
	if err != nil {
		return shortErr(err)
	}
	return fmt.Sprintf("exit %s %s", e.IP, e.Country)
}

func shortErr(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 && len(s) > 60 {
		s = s[i+2:]
	}
	return truncate(s, 60)
}

func oneLine(out string, err error) string {
	s := strings.Join(strings.Fields(out), " ")
	if err != nil && s == "" {
		s = shortErr(err)
	}
	return truncate(s, 70)
}

func printChecks(w io.Writer, checks []Check) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nFAULT\tEXPECTED\tSEEN\tOK")
	pass := 0
	for _, c := range checks {
		ok := "FAIL"
		if c.OK {
			ok = "ok"
			pass++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Fault, c.Expected, c.Seen, ok)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d/%d checks passed\n", pass, len(checks))
}
