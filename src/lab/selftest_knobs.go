package lab

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/google/nftables"

	"surflare-watchdog/src/lab/fakes"
)

// knobRow is one selftest row for a vendor knob (fakes.Knobs): the knobs
// are set, run shows what a client (or the vendor CLI) sees, and the lab
// goes back to its knobs and the home connection afterwards. Every knob has
// a row for the evidence's behaviour and one for the old fake's.
type knobRow struct {
	knobs    []string // KEY=VALUE; none = the defaults
	label    string   // the row's name when knobs alone do not say it
	expected string
	leaky    bool // packets past the tunnel are the point (direct traffic)
	run      func(ctx context.Context, l *Lab) (seen string, ok bool)
}

func (r knobRow) name() string {
	if r.label != "" {
		return "--vendor " + r.label
	}
	return "--vendor " + strings.Join(r.knobs, " ")
}

// runKnob sets a row's knobs, observes, and restores the lab.
func (l *Lab) runKnob(ctx context.Context, r knobRow, home Node, saved fakes.LabInfo) Check {
	chk := Check{Fault: r.name(), Expected: r.expected}
	l.ResetLeaks(ctx)
	if err := l.SetVendor(r.knobs...); err != nil {
		chk.Seen = err.Error()
		return chk
	}
	time.Sleep(fakes.WatchInterval + 50*time.Millisecond) // the account API re-reads lab.json
	chk.Seen, chk.OK = r.run(ctx, l)
	if lc, _ := l.Leaks(ctx); !r.leaky && lc.Total() > 0 {
		chk.OK = false
		chk.Seen += "; LEAKED " + lc.String()
	}
	if err := l.restoreKnobs(ctx, home, saved); err != nil {
		chk.OK = false
		chk.Seen += "; restore: " + err.Error()
		return chk
	}
	wctx, cancel := context.WithTimeout(ctx, 8*time.Second)
	defer cancel()
	if e, err := l.WaitClientExit(wctx, 0, home.Addr.String()); err != nil {
		chk.OK = false
		chk.Seen += "; not restored: " + seenEcho(e, err)
	}
	return chk
}

// restoreKnobs puts lab.json and the faults back and reconnects home.
func (l *Lab) restoreKnobs(ctx context.Context, home Node, saved fakes.LabInfo) error {
	if err := saved.Save(l.Dir); err != nil {
		return err
	}
	if err := (fakes.Faults{}).Save(l.Dir); err != nil {
		return err
	}
	for _, r := range Relays {
		setBlackholed(l.ns[RoleInternet], r.Addr, false)
	}
	time.Sleep(fakes.WatchInterval + 50*time.Millisecond)
	var err error
	for range 20 {
		if err = l.Reconnect(ctx, home.Name); err == nil {
			return l.InstallLANTProxy()
		}
		time.Sleep(250 * time.Millisecond)
	}
	return err
}

// reconnectWith is `surflare disconnect` (whatever it says) and
// `surflare connect ARGS`.
func (l *Lab) reconnectWith(ctx context.Context, args ...string) (string, error) {
	_, _ = l.Surflare(ctx, "disconnect")
	return l.Surflare(ctx, append([]string{"connect"}, args...)...)
}

// clientEchoHost fetches an IP echo host from client 0 as a client that
// resolved host to it (the Host header names it).
func (l *Lab) clientEchoHost(ctx context.Context, host string) (string, Fetch) {
	fctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	url := EchoURL(0)
	if strings.HasSuffix(host, "domestic.lab") {
		url = "http://" + DomesticWeb.String() + "/"
	}
	f := l.FetchHost(fctx, l.clients[0].Role, url, host)
	return echoOf(f), f
}

// tunnelRules counts the router's "fwmark 0x1 lookup 100" rules.
func (l *Lab) tunnelRules(ctx context.Context) int {
	out, err := l.Exec(ctx, RoleRouter, "ip", "-4", "rule", "show")
	if err != nil {
		return -1
	}
	return strings.Count(out, fmt.Sprintf("fwmark %#x lookup %d", MarkTunnel, TunnelTable))
}

// proxyLogSince returns what the proxy log gained after offset.
func (l *Lab) proxyLogSince(offset int64) string {
	b, err := os.ReadFile(l.Path(dirLog, "surflare-proxy.log"))
	if err != nil || int64(len(b)) < offset {
		return ""
	}
	return string(b[offset:])
}

func (l *Lab) proxyLogSize() int64 {
	fi, err := os.Stat(l.Path(dirLog, "surflare-proxy.log"))
	if err != nil {
		return 0
	}
	return fi.Size()
}

func knobRows(home Node) []knobRow {
	connectHome := []string{"--node", home.Name, "--transit", fakes.TransitAuto, "--daemon"}
	connectFails := func(want string, args ...string) func(ctx context.Context, l *Lab) (string, bool) {
		return func(ctx context.Context, l *Lab) (string, bool) {
			out, err := l.reconnectWith(ctx, args...)
			return oneLine(out, err), err != nil && strings.Contains(out, want)
		}
	}
	echoAfter := func(ok func(Echo) bool, args ...string) func(ctx context.Context, l *Lab) (string, bool) {
		return func(ctx context.Context, l *Lab) (string, bool) {
			if out, err := l.reconnectWith(ctx, args...); err != nil {
				return oneLine(out, err), false
			}
			f := clientFetch(ctx, l, 2*time.Second)
			e, err := ParseEcho(f.Body)
			return describe(f), f.Err == nil && err == nil && ok(e)
		}
	}
	login := func(ctx context.Context, l *Lab, args ...string) (string, error) {
		return l.Surflare(ctx, append([]string{"login", "-u", LabUsername}, append(args, "--remember")...)...)
	}
	withPW := []string{"-p", fakes.LabPassword}
	return []knobRow{
		// E1: exits and auto.
		{label: "exits=(default: +Tokyo)", expected: "--node Tokyo --transit Singapore: exit Tokyo JP",
			run: echoAfter(func(e Echo) bool { return ExitName(e.IP) == "Tokyo" && e.Country == "JP" }, "--node", "Tokyo", "--transit", "Singapore", "--daemon")},
		{knobs: []string{"exits=us"}, expected: "--node Tokyo: unknown node", run: connectFails("unknown node", "--node", "Tokyo", "--daemon")},
		{knobs: []string{"auto=accepted"}, expected: "--node auto: an exit (first that answers)",
			run: echoAfter(func(e Echo) bool { return ExitName(e.IP) == home.Name }, "--node", "auto", "--daemon")},
		{knobs: []string{"auto=listed"}, expected: "surflare nodes: auto first", run: func(ctx context.Context, l *Lab) (string, bool) {
			out, err := l.Surflare(ctx, "nodes")
			return oneLine(out, err), err == nil && strings.HasPrefix(out, "auto\n")
		}},
		{knobs: []string{"auto=off"}, expected: "--node auto: unknown node", run: connectFails("unknown node", "--node", "auto", "--daemon")},
		// E2: modes.
		{label: "modes=(default: +direct)", expected: "--mode direct: exit WAN CN (0xff, counted as leak)", leaky: true,
			run: echoAfter(func(e Echo) bool { return e.IP == WANRouter.String() }, append([]string{"--mode", "direct"}, connectHome...)...)},
		{knobs: []string{"modes=rule,global"}, expected: "--mode direct: unknown mode", run: connectFails("unknown mode", append([]string{"--mode", "direct"}, connectHome...)...)},
		// E3: rule-mode routing.
		{knobs: []string{"rule_routing=list"}, label: "rule_routing=list rule_list=(default)", expected: "blocked.ipecho.lab tunnel, open.ipecho.lab + domestic.lab direct", leaky: true,
			run: ruleRouting(connectHome, home, true, false)},
		{knobs: []string{"rule_routing=list", "rule_list=open.ipecho.lab"}, expected: "open.ipecho.lab tunnel, blocked.ipecho.lab + domestic.lab direct", leaky: true,
			run: ruleRouting(connectHome, home, false, true)},
		{knobs: []string{"rule_routing=legacy"}, expected: "blocked + open.ipecho.lab tunnel, domestic.lab direct",
			run: ruleRouting(connectHome, home, true, true)},
		// E4: single hop.
		{knobs: []string{"no_transit=single"}, expected: "no --transit, relays black-holed: exit still answers, transit: none",
			run: singleHop(home, true)},
		{knobs: []string{"no_transit=auto"}, expected: "no --transit, relays black-holed: fetch fails, transit: auto",
			run: singleHop(home, false)},
		// E5: descriptors.
		{knobs: []string{"inherit_fds=1"}, expected: "proxy holds the caller's planted fd", run: plantedFD(connectHome, true)},
		{knobs: []string{"inherit_fds=0"}, expected: "proxy holds none of the caller's fds", run: plantedFD(connectHome, false)},
		// E6: late proxy.
		{knobs: []string{"proxy_delay=2s"}, expected: "connect returns at once; fetch fails, then works", run: lateProxy(connectHome, home, true)},
		{knobs: []string{"proxy_delay=0"}, expected: "fetch right after connect works", run: lateProxy(connectHome, home, false)},
		// E7: disconnect and a long-lived CLI.
		{knobs: []string{"disconnect=strict"}, expected: "2 connects: 2 rules; after a crash disconnect exits 1, table+rules left", run: strictDisconnect(connectHome, true)},
		{knobs: []string{"disconnect=clean"}, expected: "2 connects: 1 rule; after a crash disconnect cleans up", run: strictDisconnect(connectHome, false)},
		{knobs: []string{"foreground=1"}, expected: "connect without --daemon holds the tunnel; kill -9 orphans table+rule+route", run: foreground(home)},
		{knobs: []string{"foreground=0"}, expected: "connect without --daemon refused", run: connectFails("only supports --daemon", "--node", home.Name)},
		// E8: UDP.
		{knobs: []string{"udp=1"}, expected: "global mode: router's UDP DNS reaches the resolver from the exit", run: udpDNS(home, true)},
		{knobs: []string{"udp=0"}, expected: "global mode: router's UDP DNS goes direct (WAN, counted as leak)", leaky: true, run: udpDNS(home, false)},
		// E9: the account API and the token.
		{knobs: []string{"api_access=tunnel"}, expected: "login works connected, fails disconnected (network error); connect on the cached token works", run: apiAccess(connectHome, withPW, true)},
		{knobs: []string{"api_access=any"}, expected: "login works connected and disconnected; connect works", run: apiAccess(connectHome, withPW, false)},
		{knobs: []string{"api_loss=100"}, expected: "login through the tunnel: network error", run: func(ctx context.Context, l *Lab) (string, bool) {
			out, err := login(ctx, l, withPW...)
			return oneLine(out, err), err != nil && strings.Contains(out, "network error")
		}},
		{knobs: []string{"api_loss=0"}, expected: "login through the tunnel works", run: func(ctx context.Context, l *Lab) (string, bool) {
			out, err := login(ctx, l, withPW...)
			return oneLine(out, err), err == nil
		}},
		{knobs: []string{"token_ttl=1s", "token_expiry=account_check"}, expected: "token 1.1 s old: status silent, connect Account check failed", run: tokenTTL(connectHome, fakes.ExpiryAccountCheck)},
		{knobs: []string{"token_ttl=1s", "token_expiry=status"}, expected: "token 1.1 s old: status session expired", run: tokenTTL(connectHome, fakes.ExpiryStatus)},
		{knobs: []string{"token_ttl=0"}, expected: "token 1.1 s old: connect works", run: tokenTTL(connectHome, "")},
		// E10: login forms.
		{knobs: []string{"login=argv"}, expected: "login without -p: -p PASSWORD is required", run: func(ctx context.Context, l *Lab) (string, bool) {
			out, err := login(ctx, l)
			return oneLine(out, err), err != nil && strings.Contains(out, "-p PASSWORD is required")
		}},
		{knobs: []string{"login=pty"}, expected: "login -p: flag not defined", run: func(ctx context.Context, l *Lab) (string, bool) {
			out, err := login(ctx, l, withPW...)
			return oneLine(out, err), err != nil && strings.Contains(out, "flag provided but not defined: -p")
		}},
		{knobs: []string{"login=both"}, expected: "login -p works", run: func(ctx context.Context, l *Lab) (string, bool) {
			out, err := login(ctx, l, withPW...)
			return oneLine(out, err), err == nil
		}},
		// Issue 19: urltest cadence and connection errors.
		{knobs: []string{"urltest_interval=2"}, expected: "Miami down: >= 2 urltest rounds in 5 s", run: urltestRounds(connectHome, 2, 99)},
		{knobs: []string{"urltest_interval=30"}, expected: "Miami down: 1 urltest round in 5 s", run: urltestRounds(connectHome, 1, 1)},
		{knobs: []string{"log_format=1.12"}, expected: "failed LAN connection: connection: open connection to … using outbound/vless[…]",
			run: connErrorLog(connectHome, home, "connection: open connection to "+EchoURLAddr(0)+" using outbound/vless["+home.Name+" via auto]")},
		{knobs: []string{"log_format=1.8"}, expected: "failed LAN connection: inbound/tproxy[tproxy-in]: process connection from …",
			run: connErrorLog(connectHome, home, "inbound/tproxy[tproxy-in]: process connection from "+LANClient[0].String()+":")},
		{knobs: []string{"log_format=none"}, expected: "failed LAN connection: not logged", run: connErrorLog(connectHome, home, "")},
	}
}

// EchoURLAddr is the address:port of EchoURL(i).
func EchoURLAddr(i int) string {
	return netip.AddrPortFrom(IPEcho[i%len(IPEcho)], 80).String()
}

// ruleRouting connects in rule mode and fetches the IP echo as
// blocked.ipecho.lab and open.ipecho.lab and the domestic web server; the
// first two should be tunnelled as the flags say, the domestic one is
// always direct.
func ruleRouting(connect []string, home Node, blockedTunnel, openTunnel bool) func(ctx context.Context, l *Lab) (string, bool) {
	return func(ctx context.Context, l *Lab) (string, bool) {
		if out, err := l.reconnectWith(ctx, append([]string{"--mode", "rule"}, connect...)...); err != nil {
			return oneLine(out, err), false
		}
		blocked, _ := l.clientEchoHost(ctx, "blocked.ipecho.lab")
		open, _ := l.clientEchoHost(ctx, "open.ipecho.lab")
		domestic, _ := l.clientEchoHost(ctx, "www.domestic.lab")
		seen := fmt.Sprintf("blocked %s, open %s, domestic %s", nameOr(blocked), nameOr(open), nameOr(domestic))
		want := func(tunnel bool) string {
			if tunnel {
				return home.Addr.String()
			}
			return WANRouter.String()
		}
		return seen, blocked == want(blockedTunnel) && open == want(openTunnel) && domestic == WANRouter.String()
	}
}

// nameOr names an echoed address: an exit's name, "direct" for the WAN
// address, or what failed.
func nameOr(ip string) string {
	switch {
	case ip == "":
		return "failed"
	case ip == WANRouter.String():
		return "direct"
	case ExitName(ip) != "":
		return ExitName(ip)
	}
	return ip
}

func singleHop(home Node, single bool) func(ctx context.Context, l *Lab) (string, bool) {
	return func(ctx context.Context, l *Lab) (string, bool) {
		if out, err := l.reconnectWith(ctx, "--node", home.Name, "--daemon"); err != nil {
			return oneLine(out, err), false
		}
		status, _ := l.Surflare(ctx, "status")
		if err := l.Fault(ctx, FaultRelayBlackhole, true, "all"); err != nil {
			return err.Error(), false
		}
		defer l.Fault(ctx, FaultRelayBlackhole, false, "all")
		f := clientFetch(ctx, l, 2*time.Second)
		transit := "transit: " + fakes.TransitAuto
		ok := f.Err != nil
		if single {
			transit = "transit: " + fakes.TransitNone
			ok = echoOf(f) == home.Addr.String()
		}
		return describe(f) + "; " + transit + " " + fmt.Sprint(strings.Contains(status, transit)), ok && strings.Contains(status, transit)
	}
}

func plantedFD(connect []string, inherit bool) func(ctx context.Context, l *Lab) (string, bool) {
	return func(ctx context.Context, l *Lab) (string, bool) {
		_, _ = l.Surflare(ctx, "disconnect")
		planted, err := os.Create(l.Path(dirRun, "planted.lock"))
		if err != nil {
			return err.Error(), false
		}
		defer planted.Close()
		cctx, cancel := context.WithTimeout(ctx, VendorTimeout)
		defer cancel()
		cmd := l.CommandContext(cctx, RoleRouter, append([]string{l.Path(dirBin, fakes.CLIName), "connect"}, connect...)...)
		cmd.ExtraFiles = []*os.File{planted} // fd 3, not close-on-exec, as a leaky caller's
		if out, err := cmd.CombinedOutput(); err != nil {
			return oneLine(string(out), err), false
		}
		shared, err := l.ProxyHoldsFDsOf(os.Getpid())
		if err != nil {
			return err.Error(), false
		}
		// Our own process may pass on more than the planted fd (what it
		// inherited itself without close-on-exec): judge the planted one.
		held, others := "", 0
		for _, s := range shared {
			switch {
			case s.HolderFD <= 2 || !s.SameFile:
			case strings.HasSuffix(s.Target, "planted.lock"):
				held = fmt.Sprintf("proxy fd %d = our fd %d (planted.lock, same open file)", s.HolderFD, s.OwnerFD)
			default:
				others++
			}
		}
		if held == "" {
			held = "planted fd not held"
		}
		return fmt.Sprintf("%s; %d other fds of ours", held, others), (held != "planted fd not held") == inherit
	}
}

func lateProxy(connect []string, home Node, late bool) func(ctx context.Context, l *Lab) (string, bool) {
	return func(ctx context.Context, l *Lab) (string, bool) {
		_, _ = l.Surflare(ctx, "disconnect")
		t0 := time.Now()
		if out, err := l.Surflare(ctx, append([]string{"connect"}, connect...)...); err != nil {
			return oneLine(out, err), false
		}
		took := time.Since(t0)
		first := clientFetch(ctx, l, 500*time.Millisecond)
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := l.WaitClientExit(wctx, 0, home.Addr.String())
		up := time.Since(t0)
		seen := fmt.Sprintf("connect %s; at once: %s; exit after %s", took.Round(10*time.Millisecond), describe(first), up.Round(100*time.Millisecond))
		if late {
			return seen, took < time.Second && first.Err != nil && err == nil && up >= 2*time.Second
		}
		return seen, echoOf(first) == home.Addr.String()
	}
}

func strictDisconnect(connect []string, strict bool) func(ctx context.Context, l *Lab) (string, bool) {
	return func(ctx context.Context, l *Lab) (string, bool) {
		if out, err := l.reconnectWith(ctx, connect...); err != nil {
			return oneLine(out, err), false
		}
		// A second connect without a disconnect: the strict client adds
		// its ip rule again.
		if out, err := l.Surflare(ctx, append([]string{"connect"}, connect...)...); err != nil {
			return oneLine(out, err), false
		}
		rules := l.tunnelRules(ctx)
		if err := l.Fault(ctx, FaultProxyCrash, true); err != nil {
			return err.Error(), false
		}
		l.Fault(ctx, FaultProxyCrash, false)
		out, derr := l.Surflare(ctx, "disconnect")
		left := l.hasTable(nftables.TableFamilyINet, "surflare")
		after := l.tunnelRules(ctx)
		seen := fmt.Sprintf("2 connects: %d rules; after a crash disconnect: %s; table left %v, %d rules", rules, oneLine(out, derr), left, after)
		if strict {
			return seen, rules == 2 && derr != nil && left && after == 2
		}
		return seen, rules == 1 && derr == nil && !left && after == 0
	}
}

func foreground(home Node) func(ctx context.Context, l *Lab) (string, bool) {
	return func(ctx context.Context, l *Lab) (string, bool) {
		_, _ = l.Surflare(ctx, "disconnect")
		pid, err := l.Start("surflare-foreground", RoleRouter, l.Path(dirBin, fakes.CLIName), "connect", "--node", home.Name, "--transit", fakes.TransitAuto)
		if err != nil {
			return err.Error(), false
		}
		// Fetch only once the CLI has the tunnel up: before, LAN traffic
		// meets no vendor rule and goes out direct (a leak of the lab's
		// set-up, not of the row).
		deadline := time.Now().Add(5 * time.Second)
		for _, err := l.ProxyPID(); err != nil && time.Now().Before(deadline); _, err = l.ProxyPID() {
			time.Sleep(50 * time.Millisecond)
		}
		l.ResetLeaks(ctx)
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, werr := l.WaitClientExit(wctx, 0, home.Addr.String())
		cancel()
		syscall.Kill(pid, syscall.SIGKILL)
		l.Stop("surflare-foreground")
		time.Sleep(300 * time.Millisecond)
		f := clientFetch(ctx, l, time.Second)
		left := l.hasTable(nftables.TableFamilyINet, "surflare")
		rules := l.tunnelRules(ctx)
		seen := fmt.Sprintf("tunnel up %v; after kill -9: %s, table left %v, rules %d", werr == nil, describe(f), left, rules)
		return seen, werr == nil && f.Err != nil && left && rules >= 1
	}
}

func udpDNS(home Node, udp bool) func(ctx context.Context, l *Lab) (string, bool) {
	return func(ctx context.Context, l *Lab) (string, bool) {
		if out, err := l.reconnectWith(ctx, "--node", home.Name, "--mode", "global", "--transit", fakes.TransitAuto, "--daemon"); err != nil {
			return oneLine(out, err), false
		}
		name := UniqueName("knob-udp", "foreign.lab")
		ans, err := l.Resolve(ctx, RoleRouter, netip.AddrPortFrom(ForeignDNS, 53), "udp", name, 2*time.Second)
		qs, _ := l.QueriesFor(name)
		from := ""
		if len(qs) > 0 {
			from = qs[len(qs)-1].From
		}
		want := WANRouter.String()
		if udp {
			want = home.Addr.String()
		}
		seen := fmt.Sprintf("answer %v err %v; resolver saw %s", ans.Addrs, err, nameOr(from))
		return seen, err == nil && from == want
	}
}

func apiAccess(connect, withPW []string, tunnelOnly bool) func(ctx context.Context, l *Lab) (string, bool) {
	return func(ctx context.Context, l *Lab) (string, bool) {
		login := func() (string, error) {
			return l.Surflare(ctx, append(append([]string{"login", "-u", LabUsername}, withPW...), "--remember")...)
		}
		_, inErr := login()
		_, _ = l.Surflare(ctx, "disconnect")
		out, outErr := login()
		// Disconnected, the token from the connected login is valid: with
		// a tunnel-only API connect goes ahead on it (E9).
		cout, cErr := l.Surflare(ctx, append([]string{"connect"}, connect...)...)
		seen := fmt.Sprintf("connected: %v; disconnected: %s; connect: %s", errOK(inErr), oneLine(out, outErr), oneLine(cout, cErr))
		if tunnelOnly {
			return seen, inErr == nil && outErr != nil && strings.Contains(out, "network error") && cErr == nil
		}
		return seen, inErr == nil && outErr == nil && cErr == nil
	}
}

func errOK(err error) string {
	if err == nil {
		return "ok"
	}
	return shortErr(err)
}

func tokenTTL(connect []string, expiry string) func(ctx context.Context, l *Lab) (string, bool) {
	return func(ctx context.Context, l *Lab) (string, bool) {
		if err := l.Login(ctx); err != nil {
			return err.Error(), false
		}
		time.Sleep(1100 * time.Millisecond)
		status, _ := l.Surflare(ctx, "status")
		out, err := l.reconnectWith(ctx, connect...)
		expired := strings.Contains(status, "session expired")
		seen := fmt.Sprintf("status expired %v; connect: %s", expired, oneLine(out, err))
		switch expiry {
		case fakes.ExpiryAccountCheck:
			return seen, !expired && err != nil && strings.Contains(out, "Account check failed")
		case fakes.ExpiryStatus:
			return seen, expired && err != nil && strings.Contains(out, "session expired")
		}
		return seen, !expired && err == nil
	}
}

// urltestRounds restarts the proxy with Miami down and counts the urltest
// rounds that logged Miami's failures within 5 s.
func urltestRounds(connect []string, min, max int) func(ctx context.Context, l *Lab) (string, bool) {
	return func(ctx context.Context, l *Lab) (string, bool) {
		if err := l.Fault(ctx, FaultNodeDown, true, "Miami"); err != nil {
			return err.Error(), false
		}
		defer l.Fault(ctx, FaultNodeDown, false, "Miami")
		time.Sleep(fakes.WatchInterval + 50*time.Millisecond)
		off := l.proxyLogSize()
		if out, err := l.reconnectWith(ctx, connect...); err != nil {
			return oneLine(out, err), false
		}
		time.Sleep(5 * time.Second)
		// Only the new proxy's lines; one round logs Miami once per
		// transit (each relay and auto).
		text := l.proxyLogSince(off)
		if i := strings.LastIndex(text, "surflare-proxy started"); i >= 0 {
			text = text[i:]
		}
		n := strings.Count(text, "outbound/urltest[Miami via Tokyo]")
		return fmt.Sprintf("%d rounds in 5 s", n), n >= min && n <= max
	}
}

func connErrorLog(connect []string, home Node, want string) func(ctx context.Context, l *Lab) (string, bool) {
	return func(ctx context.Context, l *Lab) (string, bool) {
		if out, err := l.reconnectWith(ctx, connect...); err != nil {
			return oneLine(out, err), false
		}
		if err := l.Fault(ctx, FaultNodeDown, true, home.Name); err != nil {
			return err.Error(), false
		}
		defer l.Fault(ctx, FaultNodeDown, false, home.Name)
		time.Sleep(fakes.WatchInterval + 50*time.Millisecond)
		off := l.proxyLogSize()
		f := clientFetch(ctx, l, 2*time.Second)
		time.Sleep(100 * time.Millisecond)
		var lines []string
		for _, ln := range strings.Split(l.proxyLogSince(off), "\n") {
			if strings.Contains(ln, " ERROR ") && !strings.Contains(ln, "outbound/urltest[") {
				lines = append(lines, ln)
			}
		}
		if want == "" {
			return fmt.Sprintf("%s; %d connection errors logged", describe(f), len(lines)), f.Err != nil && len(lines) == 0
		}
		for _, ln := range lines {
			if strings.Contains(ln, want) {
				_, msg, _ := strings.Cut(ln, "] ")
				return truncate(msg, 90), f.Err != nil
			}
		}
		return fmt.Sprintf("%s; no line with %q in %q", describe(f), want, lines), false
	}
}
