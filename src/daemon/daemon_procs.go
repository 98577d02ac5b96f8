package daemon

import (
	"surflare-watchdog/src/procscan"
)

// nsProcs finds processes with procscan, limited to the daemon's own
// network namespace (procscan.Scanner.InOwnNetNS). On a router that is
// every process; on a host running several labs (each a router namespace
// with its own fake proxy, all in one pid namespace) it keeps one daemon
// from seeing — or killing — another lab's proxy.
//
// Questions about the proxy are answered from the proxy tracker's cache
// (proxyCache, daemon_fast.go) once it runs: the proxy watch, the early
// detector and the loop guard ask every second or faster, and a /proc scan
// reads three files per process.
type nsProcs struct {
	scan  procscan.Scanner
	proxy *proxyCache // shared by every copy; empty until the tracker runs
	// listen answers health's "does the proxy listen yet" (proxyPort),
	// shared by every checker a reload builds.
	listen *listenDiag
}

func newNSProcs() nsProcs {
	return nsProcs{scan: procscan.Scanner{}.InOwnNetNS(), proxy: &proxyCache{}, listen: &listenDiag{}}
}

// Alive is health.ProcessChecker.
func (p nsProcs) Alive(name string) (bool, error) {
	if alive, known := p.proxy.alive(name); known {
		return alive, nil
	}
	return p.scan.Alive(name)
}

// PIDs lists the pids of name in our namespace (detect.SamplerOptions.PIDs).
func (p nsProcs) PIDs(name string) func() ([]int, error) {
	return func() ([]int, error) {
		if pids, known := p.proxy.pids(name); known {
			return pids, nil
		}
		return p.scanPIDs(name)
	}
}

// scanPIDs is PIDs by a /proc scan, never from the cache.
func (p nsProcs) scanPIDs(name string) ([]int, error) {
	ps, err := p.scan.ByName(name)
	pids := make([]int, len(ps))
	for i, pr := range ps {
		pids[i] = pr.PID
	}
	return pids, err
}

// First is the lowest pid of name in our namespace, 0 when none runs.
func (p nsProcs) First(name string) int {
	pids, _ := p.PIDs(name)()
	pid := 0
	for _, pr := range pids {
		if pid == 0 || pr < pid {
			pid = pr
		}
	}
	return pid
}

// socketsOf lists the socket inodes of name's first process in our
// namespace: the current proxy's, which the connection killer keeps.
func (p nsProcs) socketsOf(name string) func() map[uint32]bool {
	return func() map[uint32]bool {
		out := map[uint32]bool{}
		if pid := p.First(name); pid > 0 {
			p.scan.SocketInodes(pid, out)
		}
		return out
	}
}
