package watchdog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"syscall"

	"surflare-watchdog/src/procscan"
	"surflare-watchdog/src/runfiles"
)

// CleanupHooks are the kernel-side crash-cleanup actions, supplied by cmd
// from packages firewall and route; a nil hook skips its step.
type CleanupHooks struct {
	// Procs finds processes; its zero value reads /proc.
	Procs procscan.Scanner
	// ProxyName and ProxyPort identify a stale vendor proxy: any process by
	// that name, or any process listening on the tproxy port.
	ProxyName string
	ProxyPort int
	// RunDir holds the IPC files a dead daemon left.
	RunDir string

	TombstonedTProxy func(ctx context.Context) error // tproxy table left in its "reject" state
	OrphanedTrace    func(ctx context.Context) error // inet watchdog_trace left on
	FlushVendor      func(ctx context.Context) error // inet surflare of a dead proxy
	DNSEnforce       func(ctx context.Context) error // ip dns_enforce pointing at a dead resolver setup
	StaleFwmarkRules func(ctx context.Context) error // fwmark rules and table-100 routes, duplicates included
}

// CrashCleanup returns the seed's crash-cleanup steps, in its order, for
// Deps.Cleanup. The stale pid/lock step has no action here: the kernel drops
// a dead holder's flock and runfiles.AcquireLock rewrote the pid file before
// Run. The kill switch, the seed's last step, is Run's own next step.
func CrashCleanup(h CleanupHooks) []Step {
	log := slog.Default().With("subsystem", "cleanup")
	steps := []Step{
		{"stale proxy holding the proxy port", func(ctx context.Context) error { return killStaleProxy(h, log) }},
		{"zombies", func(ctx context.Context) error { return reapZombies(h, log) }},
	}
	add := func(name string, f func(context.Context) error) {
		if f != nil {
			steps = append(steps, Step{name, f})
		}
	}
	add("tombstoned tproxy", h.TombstonedTProxy)
	add("orphaned trace table", h.OrphanedTrace)
	if h.RunDir != "" {
		steps = append(steps, Step{"stale IPC files", func(ctx context.Context) error {
			removed, err := runfiles.RemoveStale(h.RunDir, runfiles.IPCFiles...)
			if len(removed) > 0 {
				log.Info("Removed stale IPC files", "files", removed)
			}
			return err
		}})
	}
	add("flush vendor table", h.FlushVendor)
	add("dns_enforce", h.DNSEnforce)
	add("stale fwmark rules", h.StaleFwmarkRules)
	return steps
}

// killStaleProxy kills a proxy nobody manages: at startup no proxy of ours
// exists yet, so any process by its name or on its port is a leftover.
func killStaleProxy(h CleanupHooks, log *slog.Logger) error {
	var pids []int
	var errs []error
	if h.ProxyName != "" {
		ps, err := h.Procs.ByName(h.ProxyName)
		errs = append(errs, err)
		for _, p := range ps {
			pids = append(pids, p.PID)
		}
	}
	if h.ProxyPort > 0 {
		ls, err := h.Procs.ListenerPIDs(h.ProxyPort)
		errs = append(errs, err)
		pids = append(pids, ls...)
	}
	slices.Sort(pids)
	pids = slices.Compact(pids)
	if len(pids) == 0 {
		return errors.Join(errs...)
	}
	killed, err := h.Procs.Kill(pids...)
	if len(killed) > 0 {
		log.Warn(fmt.Sprintf("Killed stale proxy processes %v (port %d)", killed, h.ProxyPort))
	}
	return errors.Join(append(errs, err)...)
}

// reapZombies collects exited vendor processes (the CLI or the proxy) that
// are our own children and were never waited for. It waits for those pids
// only, never for any child, so it cannot steal a child another part of the
// daemon is waiting on.
func reapZombies(h CleanupHooks, log *slog.Logger) error {
	all, err := h.Procs.All()
	if err != nil {
		return err
	}
	self := os.Getpid()
	var reaped []int
	for _, p := range all {
		if !p.Zombie() || p.PPID != self || (p.Comm != h.ProxyName && p.Comm != vendorCLIComm) {
			continue
		}
		var ws syscall.WaitStatus
		if pid, err := syscall.Wait4(p.PID, &ws, syscall.WNOHANG, nil); err == nil && pid == p.PID {
			reaped = append(reaped, pid)
		}
	}
	if len(reaped) > 0 {
		log.Info(fmt.Sprintf("Reaped zombie vendor processes %v", reaped))
	}
	return nil
}

// vendorCLIComm is the vendor CLI's comm.
const vendorCLIComm = "surflare"
