package detect

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netns"

	"surflare-watchdog/src/procscan"
	"surflare-watchdog/src/route"
)

// Default ephemeral port range (net.ipv4.ip_local_port_range), used when
// the sysctl cannot be read.
const (
	defaultEphemeralLo = 32768
	defaultEphemeralHi = 60999
)

// ProxySampler lists the proxy's TCP sockets with their tcp_info through
// sock_diag (netlink, no fork of ss). A socket belongs to the proxy when its
// inode is one of the socket descriptors in /proc/PID/fd of a proxy process:
// the proxy's mark (0xff) cannot be used, because inet_diag as
// vishvananda/netlink parses it does not report marks, and a proxy caught in
// a loop is exactly the one whose sockets are unmarked.
//
// Outbound (opened by the proxy) versus accepted (a LAN client's, through
// tproxy) is told by the local port: the kernel picks a connecting socket's
// port from the ephemeral range, while a tproxy-accepted socket's local
// port is the client's original destination port (443, 80, …).
type ProxySampler struct {
	// d dumps only the sockets a process can hold (route.OwnedTCPSockets):
	// the listeners and TIME_WAIT sockets Sample drops anyway stay in the
	// kernel (issue 19: they were most of each dump).
	d              *route.SockDiag
	pids           func() ([]int, error)
	procRoot       string
	ephLo, ephHi   uint16
	ephemeralKnown bool
}

// SamplerOptions configure a ProxySampler.
type SamplerOptions struct {
	// NS is the network namespace of the proxy's sockets; netns.None() (or
	// the zero value, which is not a valid handle) means our own.
	NS netns.NsHandle
	// PIDs lists the proxy's processes; ProxyPIDs(comm) is the usual one.
	PIDs func() ([]int, error)
	// ProcRoot is procfs ("" = /proc).
	ProcRoot string
}

// ProxyPIDs finds the proxy's processes by comm in /proc (never pgrep; see
// package procscan).
func ProxyPIDs(comm string) func() ([]int, error) {
	return func() ([]int, error) {
		ps, err := procscan.Scanner{}.ByName(comm)
		if err != nil {
			return nil, err
		}
		pids := make([]int, len(ps))
		for i, p := range ps {
			pids[i] = p.PID
		}
		return pids, nil
	}
}

// NewProxySampler opens route's sock_diag handle in o.NS (which asks for
// the inet_diag socket explicitly, DESIGN §9).
func NewProxySampler(o SamplerOptions) (*ProxySampler, error) {
	if o.PIDs == nil {
		return nil, errors.New("proxy sampler: no way to find the proxy's pids")
	}
	ns := o.NS
	if ns == 0 {
		ns = netns.None()
	}
	d, err := route.OpenSockDiag(ns)
	if err != nil {
		return nil, fmt.Errorf("opening sock_diag: %w", err)
	}
	s := &ProxySampler{d: d, pids: o.PIDs, procRoot: o.ProcRoot, ephLo: defaultEphemeralLo, ephHi: defaultEphemeralHi}
	if s.procRoot == "" {
		s.procRoot = procscan.DefaultRoot
	}
	// The sysctl as seen from our own namespace; a fresh namespace has the
	// kernel default, which is also our fallback.
	if lo, hi, err := readPortRange(filepath.Join(s.procRoot, "sys/net/ipv4/ip_local_port_range")); err == nil {
		s.ephLo, s.ephHi = lo, hi
	}
	return s, nil
}

// Close releases the netlink socket.
func (s *ProxySampler) Close() { s.d.Close() }

// Sample returns the proxy's sockets (every state but LISTEN and
// TIME_WAIT). No proxy running is not an error: the sample is empty.
func (s *ProxySampler) Sample(ctx context.Context) ([]Conn, error) {
	pids, err := s.pids()
	if err != nil {
		return nil, fmt.Errorf("finding the proxy: %w", err)
	}
	inodes := map[uint32]bool{}
	for _, pid := range pids {
		procscan.Scanner{Root: s.procRoot}.SocketInodes(pid, inodes)
	}
	if len(inodes) == 0 {
		return nil, nil
	}
	socks, err := s.d.OwnedTCPSockets(ctx)
	if err != nil {
		return nil, err
	}
	var out []Conn
	for _, m := range socks {
		if !inodes[m.Inode] || m.State == StateListen || m.State == StateTimeWait {
			continue
		}
		c := Conn{
			Local:    m.Local,
			Remote:   m.Remote,
			State:    m.State,
			Outbound: m.Local.Port() >= s.ephLo && m.Local.Port() <= s.ephHi,
		}
		if i := m.Info; i != nil {
			c.HasInfo = true
			c.Cwnd = i.Snd_cwnd
			c.RTO = time.Duration(i.Rto) * time.Microsecond
			c.Backoff = i.Backoff
			c.Retrans = i.Retransmits
			c.Unacked = i.Unacked
			c.LastDataSent = time.Duration(i.Last_data_sent) * time.Millisecond
			c.LastDataRecv = time.Duration(i.Last_data_recv) * time.Millisecond
		}
		out = append(out, c)
	}
	return out, nil
}

func readPortRange(path string) (lo, hi uint16, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	f := strings.Fields(string(data))
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("%s: %q is not two ports", path, data)
	}
	a, err1 := strconv.ParseUint(f[0], 10, 16)
	b, err2 := strconv.ParseUint(f[1], 10, 16)
	if err1 != nil || err2 != nil || a > b {
		return 0, 0, fmt.Errorf("%s: %q is not a port range", path, data)
	}
	return uint16(a), uint16(b), nil
}
