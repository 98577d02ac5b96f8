package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"

	"surflare-watchdog/src/procscan"
)

// nsProcs finds processes like procscan, but only those in the daemon's own
// network namespace. On a router that is every process; on a host running
// several labs (each a router namespace with its own fake proxy, all in one
// pid namespace) it keeps one daemon from seeing — or killing — another
// lab's proxy.
type nsProcs struct {
	scan procscan.Scanner
	self string // readlink /proc/self/ns/net; "" = no filtering possible
}

func newNSProcs() nsProcs {
	self, _ := os.Readlink("/proc/self/ns/net")
	return nsProcs{self: self}
}

func (p nsProcs) ours(pid int) bool {
	if p.self == "" {
		return true
	}
	ns, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/net")
	return err == nil && ns == p.self
}

// ByName is procscan's ByName limited to our namespace.
func (p nsProcs) ByName(name string) ([]procscan.Process, error) {
	all, err := p.scan.ByName(name)
	var out []procscan.Process
	for _, pr := range all {
		if p.ours(pr.PID) {
			out = append(out, pr)
		}
	}
	return out, err
}

// Alive is health.ProcessChecker.
func (p nsProcs) Alive(name string) (bool, error) {
	ps, err := p.ByName(name)
	return len(ps) > 0, err
}

// PIDs lists the pids of name in our namespace (detect.SamplerOptions.PIDs).
func (p nsProcs) PIDs(name string) func() ([]int, error) {
	return func() ([]int, error) {
		ps, err := p.ByName(name)
		pids := make([]int, len(ps))
		for i, pr := range ps {
			pids[i] = pr.PID
		}
		return pids, err
	}
}

// First is the lowest pid of name in our namespace, 0 when none runs.
func (p nsProcs) First(name string) int {
	ps, _ := p.ByName(name)
	pid := 0
	for _, pr := range ps {
		if pid == 0 || pr.PID < pid {
			pid = pr.PID
		}
	}
	return pid
}

// killStaleProxy is the first crash-cleanup step, namespace-aware: at
// startup no proxy of ours runs yet, so one by that name in our namespace,
// or anything listening on the tproxy port (/proc/net/tcp is already our
// namespace's), is a leftover of a crashed daemon.
func (p nsProcs) killStaleProxy(name string, port int) func(context.Context) error {
	return func(context.Context) error {
		ps, err := p.ByName(name)
		var pids []int
		for _, pr := range ps {
			pids = append(pids, pr.PID)
		}
		ls, lerr := p.scan.ListenerPIDs(port)
		pids = append(pids, ls...)
		slices.Sort(pids)
		pids = slices.Compact(pids)
		if len(pids) == 0 {
			return errors.Join(err, lerr)
		}
		killed, kerr := p.scan.Kill(pids...)
		if len(killed) > 0 {
			slog.Default().With("subsystem", "cleanup").Warn(fmt.Sprintf("Killed stale proxy processes %v (port %d)", killed, port))
		}
		return errors.Join(err, lerr, kerr)
	}
}
