package nodeprobe

import (
	"context"
	"errors"
	"time"

	"surflare-watchdog/src/firewall"
	"surflare-watchdog/src/route"
)

// tcpiOptSACK is TCPI_OPT_SACK of tcp_info's options (linux/tcp.h): the
// handshake negotiated selective acknowledgements. A middlebox that strips
// SACK-permitted from SYNs is one way a path gets tampered with.
const tcpiOptSACK = 2

// NetKernel is the Kernel of the namespace the caller runs in: the moat's
// counters through package firewall, and the proxy's relay connections
// through route's sock_diag (TCP sockets whose remote port is one of the
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
	socks, err := route.HostTCPSockets(ctx)
	if err != nil {
		return nil, err
	}
	return relaySockets(socks, ports), nil
}

// relaySockets keeps the (established) connections to a server port.
func relaySockets(socks []route.Socket, ports map[uint16]bool) []Socket {
	var out []Socket
	for _, rs := range socks {
		if !ports[rs.Remote.Port()] {
			continue
		}
		s := Socket{Remote: rs.Remote}
		if ti := rs.Info; ti != nil {
			s.SACK = ti.Options&tcpiOptSACK != 0
			s.RTT = time.Duration(ti.Rtt) * time.Microsecond
		}
		out = append(out, s)
	}
	return out
}
