package nodeprobe

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"surflare-watchdog/src/firewall"
)

// tcpiOptSACK is TCPI_OPT_SACK of tcp_info's options (linux/tcp.h): the
// handshake negotiated selective acknowledgements. A middlebox that strips
// SACK-permitted from SYNs is one way a path gets tampered with.
const tcpiOptSACK = 2

// tcpEstablished is TCP_ESTABLISHED in sock_diag's state field.
const tcpEstablished = 1

// NetKernel is the Kernel of the namespace the caller runs in: the moat's
// counters through package firewall, and the proxy's relay connections
// through sock_diag (netlink; TCP sockets whose remote port is one of the
// vendor's server ports).
type NetKernel struct {
	// Firewall reads the moat counters and the vendor's server ports (its
	// table's server_ports set); without those ports no socket is taken
	// for a relay connection.
	Firewall *firewall.Firewall
}

// Moat reads the moat counters.
func (k NetKernel) Moat(ctx context.Context) (firewall.Moat, error) {
	if k.Firewall == nil {
		return firewall.Moat{}, errors.New("no firewall")
	}
	return k.Firewall.MoatCounters(ctx)
}

// RelaySockets lists established TCP connections to the vendor's server
// ports, IPv4 and IPv6.
func (k NetKernel) RelaySockets(ctx context.Context) ([]Socket, error) {
	var ports map[uint16]bool
	if k.Firewall != nil {
		ports = k.Firewall.VendorServerPorts(ctx)
	}
	if len(ports) == 0 {
		return nil, errors.New("the vendor's server ports are unknown (no vendor table)")
	}
	var out []Socket
	for _, fam := range []uint8{unix.AF_INET, unix.AF_INET6} {
		resps, err := netlink.SocketDiagTCPInfo(fam)
		if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
			return out, fmt.Errorf("sock_diag: %w", err)
		}
		out = append(out, relaySockets(resps, ports)...)
	}
	return out, nil
}

// relaySockets keeps the established connections to a server port.
func relaySockets(resps []*netlink.InetDiagTCPInfoResp, ports map[uint16]bool) []Socket {
	var out []Socket
	for _, r := range resps {
		if r == nil || r.InetDiagMsg == nil || r.InetDiagMsg.State != tcpEstablished {
			continue
		}
		id := r.InetDiagMsg.ID
		if !ports[id.DestinationPort] {
			continue
		}
		a, ok := netip.AddrFromSlice(id.Destination)
		if !ok {
			continue
		}
		s := Socket{Remote: netip.AddrPortFrom(a.Unmap(), id.DestinationPort)}
		if ti := r.TCPInfo; ti != nil {
			s.SACK = ti.Options&tcpiOptSACK != 0
			s.RTT = time.Duration(ti.Rtt) * time.Microsecond
		}
		out = append(out, s)
	}
	return out
}
