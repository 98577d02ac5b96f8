package main

import (
	"surflare-watchdog/src/procscan"
)

// nsProcs finds processes with procscan, limited to the daemon's own
// network namespace (procscan.Scanner.InOwnNetNS). On a router that is
// every process; on a host running several labs (each a router namespace
// with its own fake proxy, all in one pid namespace) it keeps one daemon
// from seeing — or killing — another lab's proxy.
type nsProcs struct {
	scan procscan.Scanner
}

func newNSProcs() nsProcs {
	return nsProcs{scan: procscan.Scanner{}.InOwnNetNS()}
}

// Alive is health.ProcessChecker.
func (p nsProcs) Alive(name string) (bool, error) { return p.scan.Alive(name) }

// PIDs lists the pids of name in our namespace (detect.SamplerOptions.PIDs).
func (p nsProcs) PIDs(name string) func() ([]int, error) {
	return func() ([]int, error) {
		ps, err := p.scan.ByName(name)
		pids := make([]int, len(ps))
		for i, pr := range ps {
			pids[i] = pr.PID
		}
		return pids, err
	}
}

// First is the lowest pid of name in our namespace, 0 when none runs.
func (p nsProcs) First(name string) int {
	ps, _ := p.scan.ByName(name)
	pid := 0
	for _, pr := range ps {
		if pid == 0 || pr.PID < pid {
			pid = pr.PID
		}
	}
	return pid
}
