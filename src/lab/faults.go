package lab

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"surflare-watchdog/src/lab/fakes"
)

// Fault names, as used by (*Lab).Fault and `surflare-lab fault NAME on|off`.
const (
	FaultNodeDown       = "node-down"       // ARG node (or relay): refuses tunnels
	FaultNodeBlackhole  = "node-blackhole"  // ARG node: silently dropped at the internet edge
	FaultRelayBlackhole = "relay-blackhole" // [ARG relay|all]: silently dropped (default all)
	FaultLoss           = "loss"            // [ARG percent]: random drop on the WAN link (default 100)
	FaultLatency        = "latency"         // ARG node|relay MS: extra round-trip time in the fake relay/exit
	Fault503            = "503"             // ARG node: the exit answers the urltest target (/generate_204) with 503
	FaultDomesticExit   = "domestic-exit"   // the proxy goes direct: echo hosts see the CN address
	FaultProxyCrash     = "proxy-crash"     // on: SIGKILL surflare-proxy (off: nothing to undo)
	FaultProxyLoop      = "proxy-loop"      // the proxy stops marking its sockets 0xff
	FaultAuth           = "auth"            // ARG 429|invalid|subscription|expired|device_limit|account_check
	FaultLoginHang      = "login-hang"      // `surflare login` hangs
	FaultDisconnectHalf = "disconnect-half" // `surflare disconnect` leaves table, rules and route behind
	FaultAPIDown        = "api-down"        // the account API resets every connection
	FaultTableWipe      = "table-wipe"      // on: delete every router table, like fw4 restart (off: nothing)
	FaultWANDown        = "wan-down"        // pppoe-wan down (off: up again, default routes restored)
)

// FaultSpec describes one fault for help texts and the selftest.
type FaultSpec struct {
	Name    string
	Args    string // usage of the arguments, "" if none
	Summary string
}

// Faults lists every fault the lab can inject.
var Faults = []FaultSpec{
	{FaultNodeDown, "NODE", "an exit (or relay) refuses tunnels"},
	{FaultNodeBlackhole, "NODE", "an exit's address silently drops everything"},
	{FaultRelayBlackhole, "[RELAY|all]", "relays silently drop everything (default all)"},
	{FaultLoss, "[PERCENT]", "random loss on the WAN link, both directions (default 100)"},
	{FaultLatency, "NODE MS", "added round-trip time at an exit or relay"},
	{Fault503, "NODE", "an exit answers the urltest target (/generate_204) with 503; other traffic still works"},
	{FaultDomesticExit, "", "the proxy sends traffic direct (exit country CN)"},
	{FaultProxyCrash, "", "SIGKILL surflare-proxy (one-shot)"},
	{FaultProxyLoop, "", "the proxy stops marking its sockets 0xff (same-host loop)"},
	{FaultAuth, "KIND", "account failures: 429 invalid subscription expired device_limit account_check"},
	{FaultLoginHang, "", "surflare login hangs"},
	{FaultDisconnectHalf, "", "surflare disconnect leaves rules behind and fails"},
	{FaultAPIDown, "", "the account API is down"},
	{FaultTableWipe, "", "delete every nftables table in the router, like fw4 restart (one-shot)"},
	{FaultWANDown, "", "pppoe-wan down; off brings it back up"},
}

// FaultEvent is one injection or removal. Time is when the change was in
// place: at once for kernel and process faults; for faults.json ones, when
// the file was written (the fakes see it within fakes.WatchInterval).
type FaultEvent struct {
	Time   time.Time `json:"time"`
	Name   string    `json:"name"`
	On     bool      `json:"on"`
	Args   []string  `json:"args,omitempty"`
	Detail string    `json:"detail,omitempty"`
}

// faultLogFile is where every lab process (tests, CLI) appends FaultEvents.
const faultLogFile = "faults.jsonl"

// Fault switches a fault on or off. Kernel and process faults act at once;
// the others are written to faults.json, which the fakes re-read within
// fakes.WatchInterval. Each call is recorded in FaultLog with the time it
// was applied.
func (l *Lab) Fault(ctx context.Context, name string, on bool, args ...string) error {
	l.faultMu.Lock()
	defer l.faultMu.Unlock()
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return fmt.Errorf("fault %s: lab %s is closed", name, l.Prefix)
	}
	// The injection time is taken before the fault is applied: measured
	// detection times then include the time the fault took to bite.
	at := time.Now().UTC()
	detail, err := l.applyFault(ctx, name, on, args)
	if err != nil {
		return fmt.Errorf("fault %s %s: %w", name, onOff(on), err)
	}
	ev := FaultEvent{Time: at, Name: name, On: on, Args: args, Detail: detail}
	l.log.Info("fault", "name", name, "on", on, "args", args, "detail", detail)
	return l.appendFaultLog(ev)
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

func (l *Lab) applyFault(ctx context.Context, name string, on bool, args []string) (string, error) {
	arg := func(i int, def string) string {
		if i < len(args) {
			return args[i]
		}
		return def
	}
	switch name {
	case FaultNodeDown, Fault503:
		n, err := lookupName(arg(0, ""), name == FaultNodeDown)
		if err != nil {
			return "", err
		}
		return n, l.updateFaults(func(f *fakes.Faults) {
			list := &f.NodeDown
			if name == Fault503 {
				list = &f.Node503
			}
			*list = toggle(*list, n, on)
		})
	case FaultNodeBlackhole:
		n, err := lookupName(arg(0, ""), false)
		if err != nil {
			return "", err
		}
		a, _ := addrOf(n)
		return n + " " + a.String(), setBlackholed(l.ns[RoleInternet], a, on)
	case FaultRelayBlackhole:
		var targets []Relay
		which := arg(0, "all")
		for _, r := range Relays {
			if which == "all" || normName(which) == normName(r.Name) || which == r.Addr.String() {
				targets = append(targets, r)
			}
		}
		if len(targets) == 0 {
			return "", fmt.Errorf("unknown relay %q (relays: %s, or all)", which, relayNames())
		}
		var names []string
		for _, r := range targets {
			if err := setBlackholed(l.ns[RoleInternet], r.Addr, on); err != nil {
				return "", err
			}
			names = append(names, r.Name)
		}
		return strings.Join(names, ","), nil
	case FaultLoss:
		pct, err := strconv.Atoi(arg(0, "100"))
		if err != nil || pct < 0 || pct > 100 {
			return "", fmt.Errorf("loss percent %q: want 0..100", arg(0, ""))
		}
		if !on {
			pct = 0
		}
		return fmt.Sprintf("%d%%", pct), setLoss(l.ns[RoleInternet], pct)
	case FaultLatency:
		n, err := lookupName(arg(0, ""), true)
		if err != nil {
			return "", err
		}
		ms, err := strconv.Atoi(arg(1, "0"))
		if on && (err != nil || ms < 0) {
			return "", fmt.Errorf("latency ms %q: want a number >= 0", arg(1, ""))
		}
		return fmt.Sprintf("%s %dms", n, ms), l.updateFaults(func(f *fakes.Faults) {
			if f.LatencyMS == nil {
				f.LatencyMS = map[string]int{}
			}
			if on {
				f.LatencyMS[n] = ms
			} else {
				delete(f.LatencyMS, n)
			}
		})
	case FaultDomesticExit:
		return "", l.updateFaults(func(f *fakes.Faults) { f.DomesticExit = on })
	case FaultProxyLoop:
		return "", l.updateFaults(func(f *fakes.Faults) { f.ProxyLoop = on })
	case FaultAPIDown:
		return "", l.updateFaults(func(f *fakes.Faults) { f.APIDown = on })
	case FaultLoginHang:
		return "", l.updateFaults(func(f *fakes.Faults) { f.LoginHang = on })
	case FaultDisconnectHalf:
		return "", l.updateFaults(func(f *fakes.Faults) { f.DisconnectHalf = on })
	case FaultAuth:
		kind := arg(0, "")
		if on && (kind == "" || !slices.Contains(fakes.AuthValues, kind)) {
			return "", fmt.Errorf("auth kind %q: want one of 429 invalid subscription expired device_limit account_check", kind)
		}
		if !on {
			kind = fakes.AuthOK
		}
		return kind, l.updateFaults(func(f *fakes.Faults) { f.Auth = kind })
	case FaultProxyCrash:
		if !on {
			return "nothing to undo: reconnect with surflare connect", nil
		}
		pids := l.ProcsByComm(RoleRouter, fakes.ProxyName)
		if len(pids) == 0 {
			return "", fmt.Errorf("no %s running in the router", fakes.ProxyName)
		}
		for _, p := range pids {
			killReap(p)
		}
		return fmt.Sprintf("killed pid %v", pids), nil
	case FaultTableWipe:
		if !on {
			return "nothing to undo", nil
		}
		names, err := wipeTables(l.ns[RoleRouter])
		if err != nil {
			return "", err
		}
		// fw4 restart brings fw4 back; its stand-in is the lab's masquerade.
		if err := addFW4(l.ns[RoleRouter]); err != nil {
			return "", err
		}
		return "deleted " + strings.Join(names, ", "), nil
	case FaultWANDown:
		if err := setLinkUp(l.ns[RoleRouter], IfWAN, !on); err != nil {
			return "", err
		}
		if !on {
			return "", l.restoreWANRoutes()
		}
		return "", nil
	}
	return "", fmt.Errorf("unknown fault %q (see surflare-lab fault --help)", name)
}

// restoreWANRoutes re-adds the default routes a link-down flushed, as
// netifd does on ifup.
func (l *Lab) restoreWANRoutes() error {
	hr, err := netlinkHandle(l.ns[RoleRouter])
	if err != nil {
		return err
	}
	defer hr.Close()
	if err := defaultRoutes(hr, IfWAN, WANGateway, WANGw6); err != nil && !isExist(err) {
		return err
	}
	return nil
}

// updateFaults applies change to faults.json under a cross-process lock
// (the CLI and a test may both inject).
func (l *Lab) updateFaults(change func(*fakes.Faults)) error {
	lk, err := os.OpenFile(l.Path("faults.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("faults lock: %w", err)
	}
	defer lk.Close()
	if err := unix.Flock(int(lk.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("faults lock: %w", err)
	}
	if _, err = fakes.Update(l.Dir, time.Now().UTC(), change); err != nil {
		return err
	}
	// The fakes re-read faults.json at most every WatchInterval: return only
	// once every reader has seen the change, so "Fault returned" means "the
	// fault is in effect" (a probe started right after must see it).
	time.Sleep(fakes.WatchInterval + 50*time.Millisecond)
	return nil
}

func (l *Lab) appendFaultLog(ev FaultEvent) error {
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(l.Path(dirLog, faultLogFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("fault log: %w", err)
	}
	defer f.Close()
	_, err = f.Write(append(b, '\n'))
	return err
}

// FaultLog returns every fault event of this lab in order, including those
// injected by other processes (the CLI) against it.
func (l *Lab) FaultLog() []FaultEvent {
	f, err := os.Open(l.Path(dirLog, faultLogFile))
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []FaultEvent
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var ev FaultEvent
		if json.Unmarshal(sc.Bytes(), &ev) == nil {
			out = append(out, ev)
		}
	}
	return out
}

// ProcsByComm lists the pids of processes named comm inside a role's
// namespace (found through /proc, as the watchdog does).
func (l *Lab) ProcsByComm(role, comm string) []int {
	ino, err := nsInode(filepath.Join(netnsDir, l.NSName(role)))
	if err != nil {
		return nil
	}
	var out []int
	for _, pid := range pidsIn(map[uint64]bool{ino: true}) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err == nil && strings.TrimSpace(string(b)) == comm {
			out = append(out, pid)
		}
	}
	return out
}

// lookupName resolves a node (or, if relays, also a relay) name loosely:
// case, spaces, '-' and '_' are ignored ("los-angeles" = "Los Angeles"),
// and an address works too.
func lookupName(s string, relays bool) (string, error) {
	if s == "" {
		return "", fmt.Errorf("which node? (%s)", nodeNames())
	}
	for _, n := range Exits {
		if normName(n.Name) == normName(s) || n.Addr.String() == s {
			return n.Name, nil
		}
	}
	if relays {
		for _, r := range Relays {
			if normName(r.Name) == normName(s) || r.Addr.String() == s {
				return r.Name, nil
			}
		}
	}
	return "", fmt.Errorf("unknown node %q (nodes: %s)", s, nodeNames())
}

// addrOf is the plan address of a node or relay name.
func addrOf(name string) (netip.Addr, bool) {
	for _, n := range Exits {
		if n.Name == name {
			return n.Addr, true
		}
	}
	for _, r := range Relays {
		if r.Name == name {
			return r.Addr, true
		}
	}
	return netip.Addr{}, false
}

func normName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '-' || r == '_' {
			return -1
		}
		return r
	}, strings.ToLower(s))
}

func nodeNames() string {
	var s []string
	for _, n := range Nodes {
		s = append(s, n.Name)
	}
	return strings.Join(s, ", ")
}

func relayNames() string {
	var s []string
	for _, r := range Relays {
		s = append(s, r.Name)
	}
	return strings.Join(s, ", ")
}

func toggle(list []string, v string, on bool) []string {
	i := slices.Index(list, v)
	switch {
	case on && i < 0:
		return append(list, v)
	case !on && i >= 0:
		return slices.Delete(list, i, i+1)
	}
	return list
}
