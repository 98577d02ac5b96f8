package lab

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"surflare-watchdog/src/lab/fakes"
	"surflare-watchdog/src/runfiles"
)

// Restarting the daemon as the init systems do (files/: procd, OpenRC,
// systemd, runit), and the scenarios that measure what a restart costs
// the LAN. A restart is meant to keep a healthy tunnel (watchdog/adopt.go).

// RestartHow is the way a restart reaches the daemon.
type RestartHow string

const (
	// RestartInit is procd's and OpenRC's restart: the init script writes
	// the handover file, the stop sends SIGTERM, the start runs the daemon
	// again (also what an opkg/apk upgrade does).
	RestartInit RestartHow = "init"
	// RestartQuit is systemd's restart (RestartKillSignal=SIGQUIT) and
	// runit's `sv quit` (runsv starts it again).
	RestartQuit RestartHow = "sigquit"
	// RestartKill9 is a crash: SIGKILL, nothing cleaned up, and the
	// supervisor's respawn.
	RestartKill9 RestartHow = "kill9"
	// RestartStop is a stop and a start: SIGTERM without the handover
	// file, which ends the tunnel on purpose.
	RestartStop RestartHow = "stop"
)

// StopDaemonFor stops the daemon the way how does, without starting it
// again (see RestartDaemon).
func (l *Lab) StopDaemonFor(ctx context.Context, how RestartHow) error {
	if l.box != nil {
		return fmt.Errorf("lab %s: restarts by hand are for the lab's own router (the OpenWrt box runs procd)", l.Prefix)
	}
	switch how {
	case RestartInit:
		if err := os.WriteFile(l.Path(dirRun, runfiles.HandoverFile), nil, 0o600); err != nil {
			return fmt.Errorf("writing the handover request: %w", err)
		}
		_, err := l.StopDaemon(ctx)
		return err
	case RestartQuit:
		_, err := l.signalDaemon(ctx, syscall.SIGQUIT)
		return err
	case RestartKill9:
		return l.KillDaemon(ctx)
	case RestartStop:
		_, err := l.StopDaemon(ctx)
		return err
	}
	return fmt.Errorf("unknown restart %q", how)
}

// RestartDaemon stops the daemon as how says and starts it again with the
// config as it is; it returns the new pid once the daemon is past
// "starting" (StartDaemon).
func (l *Lab) RestartDaemon(ctx context.Context, how RestartHow) (int, error) {
	if err := l.StopDaemonFor(ctx, how); err != nil {
		return 0, fmt.Errorf("restart (%s): %w", how, err)
	}
	return l.StartDaemon(ctx)
}

// VendorCalls are the fake CLI's invocations since t (fakes.CLICall).
func (l *Lab) VendorCalls(since time.Time) ([]fakes.CLICall, error) {
	all, err := fakes.LoadCLICalls(l.Dir)
	var out []fakes.CLICall
	for _, c := range all {
		if !c.At.Before(since) {
			out = append(out, c)
		}
	}
	return out, err
}

// CountVendorCalls counts the calls of command cmd since t.
func (l *Lab) CountVendorCalls(since time.Time, cmd string) (int, error) {
	calls, err := l.VendorCalls(since)
	n := 0
	for _, c := range calls {
		if c.Cmd == cmd {
			n++
		}
	}
	return n, err
}

// Scenario names of this file.
const (
	ScenarioRestartHealthy   = "restart-healthy"
	ScenarioRestartUnhealthy = "restart-unhealthy"
)

// restartSettle is how long a restart scenario watches the LAN after the
// daemon is healthy again, before the next restart.
const restartSettle = 2 * time.Second

func init() {
	RegisterScenario(ScenarioSpec{Name: ScenarioRestartHealthy,
		Summary: "restart the daemon over a healthy tunnel (init script, SIGQUIT, kill -9): 0 failed LAN requests, no connect",
		Run:     restartHealthy})
	RegisterScenario(ScenarioSpec{Name: ScenarioRestartUnhealthy,
		Summary: "the tunnel breaks while the daemon restarts: the new one cleans it up and connects another node",
		Run:     restartUnhealthy})
}

// markT0 makes at the run's T0 (a restart has no fault injection).
func (h *Harness) markT0(at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.t0.IsZero() {
		h.t0 = at
	}
}

// failedClientsSince counts LAN requests started at or after t that failed
// or came out of no live exit, and all that started since t.
func (h *Harness) failedClientsSince(t time.Time) (failed, total int, firstErr string) {
	_, _, _, clients := h.mon.snapshot()
	for _, c := range clients {
		if c.Start.Before(t) {
			continue
		}
		total++
		if !c.OK || !h.liveExit(c.IP, c.End) {
			failed++
			if firstErr == "" {
				firstErr = c.Err + " " + c.IP
			}
		}
	}
	return failed, total, firstErr
}

// restartHealthy restarts the daemon three ways over a healthy tunnel
// while the monitor's LAN client fetches every 100 ms. The run is recovered
// (good) when no LAN request failed, the vendor's connect and disconnect
// were never called and the proxy is the one of before.
func restartHealthy(ctx context.Context, h *Harness) error {
	l := h.Lab
	proxy0, err := l.ProxyPID()
	if err != nil {
		return err
	}
	t0 := time.Now()
	h.markT0(t0)
	ways := []RestartHow{RestartInit, RestartQuit, RestartKill9}
	downS := map[string]any{}
	starts := make([]time.Time, len(ways))
	for i, how := range ways {
		start := time.Now()
		starts[i] = start
		if _, err := l.RestartDaemon(ctx, how); err != nil {
			return err
		}
		if _, err := l.WaitDaemon(ctx, 20*time.Second, DaemonState.Healthy); err != nil {
			return fmt.Errorf("after the %s restart: %w", how, err)
		}
		downS[string(how)] = time.Since(start).Round(time.Millisecond).Seconds()
		h.Observe(ctx, restartSettle)
	}
	h.waitFor(ctx, clientTimeout+time.Second, func() bool { return h.mon.settledBefore(time.Now()) })
	failed, total, firstErr := h.failedClientsSince(t0)
	connects, _ := l.CountVendorCalls(t0, "connect")
	disconnects, _ := l.CountVendorCalls(t0, "disconnect")
	proxy1, _ := l.ProxyPID()
	h.Extra("restarts", len(ways))
	h.Extra("restart_to_healthy_s", downS)
	h.Extra("lan_requests", total)
	h.Extra("failed_lan_requests", failed)
	byWay := map[string]any{}
	for i, how := range ways {
		n, _, first := h.failedClientsSince(starts[i])
		if i+1 < len(ways) {
			m, _, _ := h.failedClientsSince(starts[i+1])
			n -= m
		}
		byWay[string(how)] = n
		if n > 0 {
			h.Note("%s restart: %d failed (%s)", how, n, first)
		}
	}
	h.Extra("failed_by_restart", byWay)
	h.Extra("vendor_connects", connects)
	h.Extra("vendor_disconnects", disconnects)
	h.Extra("proxy_kept", proxy1 == proxy0)
	if failed > 0 {
		h.Note("%d of %d LAN requests failed across the restarts (first: %s)", failed, total, firstErr)
	}
	h.RecoveredWhen(func(ScenarioRun) bool {
		return failed == 0 && total > 0 && connects == 0 && disconnects == 0 && proxy1 == proxy0
	})
	return nil
}

// restartUnhealthy: a restart for which the daemon hands the tunnel over,
// and the node dies while no daemon runs. The new instance must not adopt
// the broken tunnel: it cleans it up and connects a live node, and the
// LAN's traffic comes back through it (the default recovery rule).
func restartUnhealthy(ctx context.Context, h *Harness) error {
	l := h.Lab
	node := h.Node()
	if err := l.StopDaemonFor(ctx, RestartInit); err != nil {
		return err
	}
	t0, err := h.Inject(ctx, FaultNodeDown, true, node)
	if err != nil {
		return err
	}
	h.SetDead(node, true, t0)
	if _, err := l.StartDaemon(ctx); err != nil {
		return err
	}
	h.waitOrNote(ctx, recoverBudget)
	connects, _ := l.CountVendorCalls(t0, "connect")
	h.Extra("vendor_connects", connects)
	_, _, logs, _ := h.mon.snapshot()
	for _, ll := range logs {
		if !ll.Seen.Before(t0) && strings.HasPrefix(ll.Msg, "Adopted the running tunnel") {
			h.Note("the broken tunnel was adopted")
			h.RecoveredWhen(func(ScenarioRun) bool { return false })
		}
	}
	return nil
}
