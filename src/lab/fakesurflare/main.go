// Command surflare is the lab's fake of the proprietary Surflare VPN CLI. It
// implements exactly the behaviour SURFLARE-CONTRACT.md describes — status,
// connect, disconnect, login (with a /dev/tty password prompt) and nodes —
// against the lab's account API, with the kernel state (table inet
// surflare, ip rule, table-100 route) made through netlink, the faults of
// the lab's faults.json (auth failures, login_hang, disconnect_half) and the
// vendor knobs of lab.json (fakes.Vendor: the evidence's E1-E10).
//
// It finds its lab from its own path (<labdir>/bin/surflare) or
// $SURFLARE_LAB_DIR. The account API accepts any email with the password
// fakes.LabPassword ("lab-password").
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"surflare-watchdog/src/lab"
	"surflare-watchdog/src/lab/fakes"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// env is what every command needs: where the lab is and how to talk.
type env struct {
	labDir string
	binDir string
	info   fakes.LabInfo
	faults fakes.Faults
	faultT time.Time // faults.json mtime
	stdout io.Writer
	stderr io.Writer
	now    func() time.Time
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

const usage = `usage: surflare <command> [flags]

commands:
  status                                   show connection and account state
  connect --node NODE [--mode MODE] [--transit TRANSIT] --daemon
  disconnect                               stop the tunnel
  login -u EMAIL [-p PASSWORD] [--remember] log in (prompts on the terminal without -p)
  nodes                                    list node tags
`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, usage)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	e, err := newEnv(stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "✘ %v\n", err)
		return exitFailure
	}
	recordCall(e.labDir, args)
	cmds := map[string]func(*env, []string) int{
		"status":     cmdStatus,
		"connect":    cmdConnect,
		"disconnect": cmdDisconnect,
		"login":      cmdLogin,
		"nodes":      cmdNodes,
	}
	c, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "✘ unknown command %q\n%s", args[0], usage)
		return exitUsage
	}
	return c(e, args[1:])
}

func newEnv(stdout, stderr io.Writer) (*env, error) {
	dir := os.Getenv("SURFLARE_LAB_DIR")
	if dir == "" {
		d, err := fakes.LabDirOfExecutable()
		if err != nil {
			return nil, err
		}
		dir = d
	}
	li, err := fakes.LoadLabInfo(dir)
	if err != nil {
		return nil, err
	}
	w := fakes.NewWatcher(dir, nil)
	f, mt := w.CurrentWithTime()
	return &env{
		labDir: dir, binDir: filepath.Join(dir, fakes.BinDir), info: li,
		faults: f, faultT: mt, stdout: stdout, stderr: stderr, now: time.Now,
	}, nil
}

// flags makes a flag set that prints its errors and usage to stderr.
func (e *env) flags(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "usage: surflare %s %s\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

func (e *env) fail(format string, a ...any) int {
	fmt.Fprintf(e.stderr, "✘ "+format+"\n", a...)
	return exitFailure
}

// sessionProblem says what is wrong with the stored session, from the
// state and the auth fault, without asking the network (like the real
// client, which checks its cached JWT): "" when the session is fine.
func (e *env) sessionProblem(st fakes.State) string {
	switch {
	case !st.LoggedIn:
		return "not logged in"
	case e.faults.Auth == fakes.AuthExpired && st.LoginAt.Before(expiredSince(e.faults, e.faultT)):
		return "session expired"
	case e.faults.Auth == fakes.AuthSubscription:
		return "subscription not active"
	case e.info.Vendor.TokenExpiry == fakes.ExpiryStatus && e.tokenExpired(st):
		return "session expired"
	}
	return ""
}

// tokenExpired reports whether the stored token is past the token_ttl
// knob (E9). With token_expiry=account_check only the account API knows
// (connect then fails "Account check failed"); with token_expiry=status the
// CLI reads it from its cached token, as the contract's status does.
func (e *env) tokenExpired(st fakes.State) bool {
	ttl := time.Duration(e.info.Vendor.TokenTTLS) * time.Second
	return ttl > 0 && st.LoggedIn && e.now().Sub(st.LoginAt) > ttl
}

func cmdStatus(e *env, args []string) int {
	fs := e.flags("status", "")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	st, err := fakes.LoadState(e.info)
	if err != nil {
		return e.fail("%v", err)
	}
	state := "disconnected"
	if st.Connected && proxyAlive(e.binDir, st.ProxyPID) {
		state = "connected"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "state: %s\n", state)
	if st.Node != "" {
		fmt.Fprintf(&b, "node: %s\ntransit: %s\nmode: %s\n", st.Node, st.Transit, st.Mode)
	}
	if p := e.sessionProblem(st); p != "" {
		fmt.Fprintf(&b, "account: %s\n", p)
	} else {
		fmt.Fprintf(&b, "account: %s\n", st.Email)
	}
	io.WriteString(e.stdout, b.String())
	return exitOK
}

func cmdNodes(e *env, args []string) int {
	fs := e.flags("nodes", "")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	v := e.info.Vendor
	if v.Auto == fakes.AutoListed {
		fmt.Fprintln(e.stdout, fakes.NodeAuto)
	}
	for _, n := range v.Exits {
		fmt.Fprintln(e.stdout, n)
	}
	return exitOK
}

func cmdConnect(e *env, args []string) int {
	v := e.info.Vendor
	fs := e.flags("connect", "--node NODE [--mode MODE] [--transit TRANSIT] --daemon")
	node := fs.String("node", "", "node tag (see surflare nodes)")
	mode := fs.String("mode", "rule", "routing mode: "+strings.Join(v.Modes, ", "))
	transit := fs.String("transit", fakes.TransitAuto, "transit relay name or auto")
	daemon := fs.Bool("daemon", false, "run the proxy in the background")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		return e.fail("unexpected argument %q (quote node tags with spaces)", fs.Arg(0))
	}
	if !*daemon && !v.Foreground {
		return e.fail("the lab's surflare only supports --daemon")
	}
	if !v.AcceptsNode(*node) {
		return e.fail("unknown node %q (see: surflare nodes)", *node)
	}
	transitGiven := false
	fs.Visit(func(f *flag.Flag) { transitGiven = transitGiven || f.Name == "transit" })
	if !transitGiven && v.NoTransit == fakes.NoTransitSingle {
		*transit = fakes.TransitNone // E4: single hop, no relay
	} else if *transit != fakes.TransitAuto && !isRelay(*transit) {
		return e.fail("unknown transit %q", *transit)
	}
	if !contains(v.Modes, *mode) {
		return e.fail("unknown mode %q (want %s)", *mode, strings.Join(v.Modes, ", "))
	}
	st, err := fakes.LoadState(e.info)
	if err != nil {
		return e.fail("%v", err)
	}
	if p := e.sessionProblem(st); p != "" {
		return e.fail("%s", p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if msg := e.accountCheck(ctx, st); msg != "" {
		return e.fail("%s", msg)
	}
	if err := stopProxy(e.binDir, st.ProxyPID); err != nil {
		return e.fail("%v", err)
	}
	st.Node, st.Transit, st.Mode, st.Connected, st.ProxyPID = *node, *transit, *mode, false, 0
	if err := fakes.SaveState(e.info, st); err != nil {
		return e.fail("%v", err)
	}
	if err := installKernelState(v); err != nil {
		return e.fail("%v", err)
	}
	if !*daemon {
		return e.foreground(st)
	}
	pid, err := startProxy(ctx, e.binDir, e.info, false)
	if err != nil {
		return e.fail("%v", err)
	}
	st.Connected, st.ProxyPID = true, pid
	if err := fakes.SaveState(e.info, st); err != nil {
		return e.fail("%v", err)
	}
	fmt.Fprintf(e.stdout, "✔ Connected: %s via %s (mode %s)\n", st.Node, st.Transit, st.Mode)
	return exitOK
}

func cmdDisconnect(e *env, args []string) int {
	fs := e.flags("disconnect", "")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	st, err := fakes.LoadState(e.info)
	if err != nil {
		return e.fail("%v", err)
	}
	// E7: the real client, when it was not fully connected (no live
	// proxy: crashed, never came up, a killed long-lived CLI), fails and
	// leaves its table, rule(s) and table-100 route where they are.
	fully := st.Connected && proxyAlive(e.binDir, st.ProxyPID)
	if e.info.Vendor.DisconnectStrict && !fully {
		return e.fail("Disconnect failed: not connected")
	}
	if err := stopProxy(e.binDir, st.ProxyPID); err != nil {
		return e.fail("%v", err)
	}
	st.Connected, st.ProxyPID = false, 0
	if err := fakes.SaveState(e.info, st); err != nil {
		return e.fail("%v", err)
	}
	if e.faults.DisconnectHalf {
		// Half down: the proxy is gone but its table, the table-100
		// route and (one more copy of) the ip rule stay behind.
		if err := addTunnelRule(); err != nil {
			fmt.Fprintf(e.stderr, "✘ %v\n", err)
		}
		return e.fail("Disconnect failed: timed out waiting for tunnel teardown")
	}
	if err := removeKernelState(); err != nil {
		return e.fail("%v", err)
	}
	fmt.Fprintln(e.stdout, "✔ Disconnected")
	return exitOK
}

func isRelay(name string) bool {
	for _, r := range lab.Relays {
		if r.Name == name {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
