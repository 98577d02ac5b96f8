package lab

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"surflare-watchdog/src/lab/fakes"
)

// The scenarios of `surflare-lab scenario`. Each run starts from a fresh
// lab with the daemon healthy on its first node; T0 is the first fault
// injection as FaultLog records it.

// Scenario names.
const (
	ScenarioNodeDown         = "node-down"
	ScenarioNodeBlackhole    = "node-blackhole"
	ScenarioRelayBlackhole   = "relay-blackhole"
	ScenarioProxyCrash       = "proxy-crash"
	ScenarioDomesticExit     = "domestic-exit"
	ScenarioAuthExpired      = "auth-expired"
	ScenarioAuth429          = "auth-429"
	ScenarioSubscription     = "subscription"
	ScenarioAPIDownReconnect = "api-down-during-reconnect"
	ScenarioStorm            = "storm"
	ScenarioKill9Connect     = "kill9-during-connect"
	ScenarioProxyLoop        = "proxy-loop"
)

// Budgets inside a run.
const (
	// recoverBudget is how long a scenario that expects traffic back waits.
	recoverBudget = 60 * time.Second
	// holdObserve is how long the auth scenarios that cannot recover watch
	// the daemon hold the kill switch.
	holdObserve = 20 * time.Second
	// relayObserve is how long relay-blackhole keeps watching after
	// traffic came back.
	relayObserve = 10 * time.Second
	// stormBudget is how long storm waits for storm protection: every
	// candidate must fail its data-plane proof first (6 x 5 s in the base
	// settings, plus reconnects).
	stormBudget = 100 * time.Second
	// apiDownFor is how long the account API stays down in
	// api-down-during-reconnect.
	apiDownFor = 8 * time.Second
	// maxHoldLogins is the most logins a daemon may make while it holds
	// the kill switch on a fatal or rate-limited account before it counts
	// as a login storm: one attempt, then it must stop (the contract's
	// fatal login errors).
	maxHoldLogins = 1
)

func init() {
	for _, s := range []ScenarioSpec{
		{Name: ScenarioNodeDown, Summary: "the current exit refuses tunnels: rotate to a live node",
			Run: nodeFault(FaultNodeDown)},
		{Name: ScenarioNodeBlackhole, Summary: "the current exit silently drops everything: detect by timeout, rotate",
			Run: nodeFault(FaultNodeBlackhole)},
		{Name: ScenarioRelayBlackhole, Summary: "the first relay (the one transit auto uses) silently drops everything",
			Run: relayBlackhole},
		{Name: ScenarioProxyCrash, Summary: "surflare-proxy is killed: reconnect to the same node",
			Run: proxyCrash},
		{Name: ScenarioDomesticExit, Summary: "the proxy goes direct (exit CN) until a reconnect replaces it",
			Run: domesticExit},
		{Name: ScenarioAuthExpired, Summary: "the session expires and the tunnel drops: log in again, then traffic",
			Run: authExpired},
		{Name: ScenarioAuth429, Summary: "the session is gone and login answers 429: hold the kill switch, no login storm",
			Run: authHold(fakes.AuthRateLimited, true)},
		{Name: ScenarioSubscription, Summary: "the subscription lapses and the tunnel drops: hold the kill switch, no login",
			Run: authHold(fakes.AuthSubscription, false)},
		{Name: ScenarioAPIDownReconnect, Summary: "the account API is down while the daemon must reconnect (current exit down)",
			Run: apiDownReconnect},
		{Name: ScenarioStorm, Summary: "every exit is down until storm protection triggers, then one comes back",
			Budget: stormBudget + recoverBudget, Run: storm},
		{Name: ScenarioKill9Connect, Summary: "kill -9 the daemon while it connects, restart it: recovery, no leak",
			Run: kill9Connect},
	} {
		RegisterScenario(s)
	}
}

// nodeFault makes the current node fail with fault (node-down or
// node-blackhole) and waits for traffic through another node.
func nodeFault(fault string) func(context.Context, *Harness) error {
	return func(ctx context.Context, h *Harness) error {
		node := h.Node()
		t0, err := h.Inject(ctx, fault, true, node)
		if err != nil {
			return err
		}
		h.SetDead(node, true, t0)
		h.waitOrNote(ctx, recoverBudget)
		return nil
	}
}

// waitOrNote waits for recovery and says so in the outcome when it does
// not come.
func (h *Harness) waitOrNote(ctx context.Context, budget time.Duration) bool {
	if h.WaitRecovered(ctx, budget) {
		return true
	}
	h.Note("no LAN traffic through a live node within %s", budget)
	return false
}

func relayBlackhole(ctx context.Context, h *Harness) error {
	relay := Relays[0].Name
	if _, err := h.Inject(ctx, FaultRelayBlackhole, true, relay); err != nil {
		return err
	}
	h.Extra("relay", relay)
	if h.waitOrNote(ctx, recoverBudget) {
		// Traffic may survive the relay (transit auto falls over to the
		// next one); watch whether the daemon notices or makes it worse.
		h.Observe(ctx, relayObserve)
	}
	return nil
}

func proxyCrash(ctx context.Context, h *Harness) error {
	if _, err := h.Inject(ctx, FaultProxyCrash, true); err != nil {
		return err
	}
	h.waitOrNote(ctx, recoverBudget)
	return nil
}

// domesticExit: the proxy sends everything direct. The lab's fault is a
// switch in faults.json that every proxy instance obeys; the bug it models
// lives in one proxy instance, so it is switched off as soon as the
// daemon starts a new connect (which replaces the proxy). Packets the
// broken proxy sends direct before that are real leaks and are counted.
func domesticExit(ctx context.Context, h *Harness) error {
	t0, err := h.Inject(ctx, FaultDomesticExit, true)
	if err != nil {
		return err
	}
	_, ok := h.WaitLog(ctx, recoverBudget, "Connecting to ")
	off, err := h.Inject(ctx, FaultDomesticExit, false)
	if err != nil {
		return err
	}
	h.Extra("fault_cleared_s", seconds3(off.Sub(t0).Seconds()))
	if !ok {
		h.Note("the daemon never reconnected while the exit was domestic")
		return nil
	}
	if lc, err := h.Lab.Leaks(ctx); err == nil {
		h.Extra("leaked_before_reconnect", lc.Total())
	}
	h.waitOrNote(ctx, recoverBudget)
	return nil
}

// authExpired: the session expires and the vendor drops the tunnel (the
// lab's proxy ignores the account, so the drop is a proxy kill). The daemon
// must log in again before it can connect.
func authExpired(ctx context.Context, h *Harness) error {
	if _, err := h.Inject(ctx, FaultAuth, true, fakes.AuthExpired); err != nil {
		return err
	}
	if _, err := h.Inject(ctx, FaultProxyCrash, true); err != nil {
		return err
	}
	h.RecoveredWhen(func(r ScenarioRun) bool { return r.RecoverS != nil && r.LoginAttempts >= 1 })
	// Traffic counts as back only after the new login: a request that got
	// through the old proxy in the moment before the crash bit would
	// otherwise end the wait before the outage began (seen under load).
	if _, ok := h.WaitLog(ctx, recoverBudget, "Login succeeded"); !ok {
		h.Note("no login within %s", recoverBudget)
		return nil
	}
	h.waitOrNote(ctx, recoverBudget)
	return nil
}

// authHold: the account goes bad (kind) and the tunnel drops. Traffic
// cannot come back; the good end is the kill switch held (no leak, no
// direct exit, the killswitch table in place) without a login storm.
// loggedOut also removes the CLI's stored session, so the daemon is told
// to log in (and gets kind); otherwise status reports the problem itself.
func authHold(kind string, loggedOut bool) func(context.Context, *Harness) error {
	return func(ctx context.Context, h *Harness) error {
		if _, err := h.Inject(ctx, FaultAuth, true, kind); err != nil {
			return err
		}
		if loggedOut {
			if err := h.Lab.forgetVendorSession(); err != nil {
				return err
			}
		}
		if _, err := h.Inject(ctx, FaultProxyCrash, true); err != nil {
			return err
		}
		h.Observe(ctx, holdObserve)
		ks := slices.Contains(h.Lab.RouterTables(), "inet killswitch")
		h.Extra("killswitch_table", ks)
		direct := h.directExits()
		h.Extra("direct_client_requests", direct)
		h.RecoveredWhen(func(r ScenarioRun) bool {
			return r.LeakedPackets == 0 && ks && direct == 0 && r.LoginAttempts <= maxHoldLogins
		})
		if ks && direct == 0 {
			h.Note("kill switch held")
		}
		return nil
	}
}

// directExits counts client requests since T0 that got out without the
// tunnel (the echo host saw the household's own address).
func (h *Harness) directExits() int {
	_, _, _, clients := h.mon.snapshot()
	t0 := h.T0()
	n := 0
	for _, c := range clients {
		if c.OK && !c.Start.Before(t0) && ExitName(c.IP) == "" {
			n++
		}
	}
	return n
}

// forgetVendorSession logs the fake CLI out behind the daemon's back, as
// a server-side session revocation would.
func (l *Lab) forgetVendorSession() error {
	li := fakes.DefaultLabInfo(l.Dir, l.Prefix)
	li.StateDir = l.Path(dirState)
	st, err := fakes.LoadState(li)
	if err != nil {
		return fmt.Errorf("reading the fake CLI's session: %w", err)
	}
	st.LoggedIn, st.Token = false, ""
	if err := fakes.SaveState(li, st); err != nil {
		return fmt.Errorf("dropping the fake CLI's session: %w", err)
	}
	return nil
}

// apiDownReconnect: the account API goes down, then the current exit
// dies, so the daemon must reconnect while `surflare connect` cannot check
// the account; the API comes back after apiDownFor.
func apiDownReconnect(ctx context.Context, h *Harness) error {
	node := h.Node()
	t0, err := h.Inject(ctx, FaultAPIDown, true)
	if err != nil {
		return err
	}
	at, err := h.Inject(ctx, FaultNodeDown, true, node)
	if err != nil {
		return err
	}
	h.SetDead(node, true, at)
	h.Observe(ctx, time.Until(t0.Add(apiDownFor)))
	back, err := h.Inject(ctx, FaultAPIDown, false)
	if err != nil {
		return err
	}
	h.Extra("api_back_s", seconds3(back.Sub(t0).Seconds()))
	h.waitOrNote(ctx, recoverBudget)
	return nil
}

// storm: every exit refuses tunnels until the daemon gives up (storm
// protection), then one exit (the third candidate) comes back.
func storm(ctx context.Context, h *Harness) error {
	var t0 time.Time
	for _, n := range Nodes {
		at, err := h.Inject(ctx, FaultNodeDown, true, n.Name)
		if err != nil {
			return err
		}
		if t0.IsZero() {
			t0 = at
		}
		h.SetDead(n.Name, true, at)
	}
	if s, ok := h.WaitSample(ctx, stormBudget, func(s statusSample) bool { return s.State == "storm_cooldown" }); ok {
		h.Extra("storm_s", seconds3(s.At.Sub(t0).Seconds()))
	} else {
		h.Note("no storm protection within %s", stormBudget)
	}
	back := Nodes[2].Name
	at, err := h.Inject(ctx, FaultNodeDown, false, back)
	if err != nil {
		return err
	}
	h.SetDead(back, false, at)
	h.Extra("node_back", back)
	h.Extra("node_back_s", seconds3(at.Sub(t0).Seconds()))
	h.waitOrNote(ctx, recoverBudget)
	return nil
}

// kill9Connect: the current exit dies; while the daemon connects to the
// next one it is killed with SIGKILL (nothing cleaned up), then started
// again.
func kill9Connect(ctx context.Context, h *Harness) error {
	node := h.Node()
	t0, err := h.Inject(ctx, FaultNodeDown, true, node)
	if err != nil {
		return err
	}
	h.SetDead(node, true, t0)
	// The log line is the moment the connect starts (a status sample may
	// fall either side of a connect that takes a second).
	c, ok := h.WaitLog(ctx, recoverBudget, "Connecting to ")
	if !ok {
		h.Note("the daemon never started a connect; killed it anyway")
	}
	if err := h.Lab.KillDaemon(ctx); err != nil {
		return fmt.Errorf("kill -9 of the daemon: %w", err)
	}
	if _, done := h.WaitLog(ctx, 0, "Connected to "); ok && done {
		h.Note("the connect had finished before the kill")
	}
	h.Extra("killed_connecting_to", strings.TrimPrefix(c.Msg, "Connecting to "))
	killed := time.Now()
	h.Extra("kill_s", seconds3(killed.Sub(t0).Seconds()))
	h.Observe(ctx, time.Second) // nobody at the wheel: the kernel state must hold
	if lc, err := h.Lab.Leaks(ctx); err == nil {
		h.Extra("leaked_while_dead", lc.Total())
	}
	if _, err := h.Lab.StartDaemon(ctx); err != nil {
		return fmt.Errorf("restarting the daemon after kill -9: %w", err)
	}
	restarted := time.Now()
	h.Extra("restart_s", seconds3(restarted.Sub(t0).Seconds()))
	h.RecoverNotBefore(killed)
	h.waitOrNote(ctx, recoverBudget)
	return nil
}
