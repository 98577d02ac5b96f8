package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"surflare-watchdog/src/lab"
)

// Leak checks outside the fault scenarios.
const (
	LeakRestart       = "daemon restart"
	LeakBoot          = "boot sequence (boot lock, then kill switch)"
	LeakBootNoLock    = "boot without the boot lock (control: shows the counter sees leaks)"
	bootLockTable     = "surflare_boot_lock"
	restartGap        = 2 * time.Second // daemon down between SIGTERM and start
	bootDelay         = 2 * time.Second // boot lock up, daemon not yet started
	afterHealthy      = 3 * time.Second // traffic keeps going once healthy again
	leakTrafficPeriod = 100 * time.Millisecond
)

// BootLockRelPath is the shipped boot lock ruleset, relative to the repo.
const BootLockRelPath = "files/usr/share/surflare/boot-lock.nft"

// restartLeaks restarts the healthy daemon as the init script does (the
// handover request and SIGTERM: the tunnel and the kill switch stay),
// leaves it down for restartGap and starts it again, while a LAN client and
// the router keep sending, and counts what leaked and what failed.
func restartLeaks(ctx context.Context, env labEnv, p Params) LeakCheck {
	c := LeakCheck{Name: LeakRestart, Variant: p.Variant}
	l, err := env.up(ctx)
	if err != nil {
		c.Error = err.Error()
		return c
	}
	defer l.Close()
	defer stopDaemon(l)
	if _, err := startHealthy(ctx, l, p.Sets); err != nil {
		c.Error = err.Error()
		return c
	}
	if _, err := l.ResetLeaks(ctx); err != nil {
		c.Error = err.Error()
		return c
	}
	tr := startTraffic(ctx, l, leakTrafficPeriod, true)
	// A restart as the init script does it (the handover request, then
	// SIGTERM): the old daemon leaves the tunnel to the new one.
	stopAt := time.Now()
	err = l.StopDaemonFor(ctx, lab.RestartInit)
	took := time.Since(stopAt)
	if err == nil {
		err = sleep(ctx, restartGap)
	}
	var back time.Duration
	if err == nil {
		start := time.Now()
		_, err = startHealthy(ctx, l, nil)
		back = time.Since(start)
	}
	if err == nil {
		err = sleep(ctx, afterHealthy)
	}
	tr.stop()
	lc, lerr := l.Leaks(ctx)
	if err != nil || lerr != nil {
		c.Error = firstErr(err, lerr).Error()
		return c
	}
	lanOK, lanFail, rOK, rFail := tr.counts()
	c.Packets = int64(lc.Total())
	c.Detail = fmt.Sprintf("restart: handover + SIGTERM (exit in %.1f s), %s down, healthy again %.1f s after start; LAN %d ok / %d failed, router %d ok / %d failed; %s",
		took.Seconds(), restartGap, back.Seconds(), lanOK, lanFail, rOK, rFail, lc)
	return c
}

// bootLeaks plays a router boot: the boot lock ruleset is loaded in the
// router (when withLock), LAN clients and the router start sending at once,
// the daemon starts bootDelay later and takes over with its kill switch.
// Everything that reached an internet host outside the tunnel from the
// first packet until healthy + afterHealthy is counted.
func bootLeaks(ctx context.Context, env labEnv, p Params, bootLock string, withLock bool) LeakCheck {
	c := LeakCheck{Name: LeakBoot, Variant: p.Variant}
	if !withLock {
		c.Name, c.Control = LeakBootNoLock, true
	}
	l, err := env.up(ctx)
	if err != nil {
		c.Error = err.Error()
		return c
	}
	defer l.Close()
	defer stopDaemon(l)
	if err := lab.WriteDaemonConfig(l, p.Sets); err != nil {
		c.Error = err.Error()
		return c
	}
	if withLock {
		if _, err := os.Stat(bootLock); err != nil {
			c.Error = "boot lock ruleset: " + err.Error()
			return c
		}
		if out, err := l.Exec(ctx, lab.RoleRouter, "nft", "-f", bootLock); err != nil {
			c.Error = fmt.Sprintf("loading the boot lock: %v: %s", err, out)
			return c
		}
		if !slices.Contains(l.RouterTables(), "inet "+bootLockTable) {
			c.Error = fmt.Sprintf("boot lock loaded but table inet %s not in the router (tables: %v)", bootLockTable, l.RouterTables())
			return c
		}
	}
	if _, err := l.ResetLeaks(ctx); err != nil {
		c.Error = err.Error()
		return c
	}
	tr := startTraffic(ctx, l, leakTrafficPeriod, true)
	err = sleep(ctx, bootDelay)
	start := time.Now()
	if err == nil {
		_, err = startHealthy(ctx, l, nil)
	}
	healthyAfter := time.Since(start)
	if err == nil {
		err = sleep(ctx, afterHealthy)
	}
	tr.stop()
	lc, lerr := l.Leaks(ctx)
	if err != nil || lerr != nil {
		c.Error = firstErr(err, lerr).Error()
		return c
	}
	lanOK, lanFail, rOK, rFail := tr.counts()
	c.Packets = int64(lc.Total())
	lockGone := !slices.Contains(l.RouterTables(), "inet "+bootLockTable)
	c.Detail = fmt.Sprintf("daemon started %s after the first packet, healthy %.1f s later; LAN %d ok / %d failed, router %d ok / %d failed; %s",
		bootDelay, healthyAfter.Seconds(), lanOK, lanFail, rOK, rFail, lc)
	if withLock {
		c.Detail += fmt.Sprintf("; boot lock handed over (table gone): %v", lockGone)
	}
	return c
}

// stopDaemon stops a lab's daemon if it runs (cleanup path).
func stopDaemon(l *lab.Lab) {
	if l.DaemonRunning() {
		ctx, cancel := context.WithTimeout(context.Background(), lab.DaemonStopGrace+time.Second)
		defer cancel()
		_, _ = l.StopDaemon(ctx)
	}
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
