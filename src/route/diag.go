package route

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// TCP states as sock_diag reports them (include/net/tcp_states.h).
const (
	tcpEstablished = 1
	tcpListen      = 10
)

// Socket is one TCP socket seen through sock_diag.
type Socket struct {
	Local, Remote netip.AddrPort
	State         uint8
	Inode         uint32
	// Info is nil for sockets in TIME_WAIT or SYN_RECV (DESIGN §9).
	Info *netlink.TCPInfo
}

// TCPSockets lists established TCP sockets of both families with their
// tcp_info, for the early detector and the moat diagnostics.
func (h *Handle) TCPSockets(ctx context.Context) ([]Socket, error) {
	return h.sockets(ctx, func(state uint8) bool { return state == tcpEstablished })
}

// AllTCPSockets lists the TCP sockets of both families in every state,
// with their tcp_info where the kernel has one (DESIGN §9: none in
// TIME_WAIT or SYN_RECV).
func (h *Handle) AllTCPSockets(ctx context.Context) ([]Socket, error) {
	return h.sockets(ctx, func(uint8) bool { return true })
}

// sockets is the one sock_diag dump: both families, the states keep takes.
func (h *Handle) sockets(ctx context.Context, keep func(state uint8) bool) ([]Socket, error) {
	var out []Socket
	for _, fam := range []uint8{unix.AF_INET, unix.AF_INET6} {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		resp, err := h.h.SocketDiagTCPInfo(fam)
		if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
			return nil, fmt.Errorf("sock_diag: %w", err)
		}
		for _, r := range resp {
			s := r.InetDiagMsg
			if s == nil || !keep(s.State) {
				continue
			}
			src, _ := netip.AddrFromSlice(s.ID.Source)
			dst, _ := netip.AddrFromSlice(s.ID.Destination)
			out = append(out, Socket{
				Local:  netip.AddrPortFrom(src.Unmap(), s.ID.SourcePort),
				Remote: netip.AddrPortFrom(dst.Unmap(), s.ID.DestinationPort),
				State:  s.State,
				Inode:  s.INode,
				Info:   r.TCPInfo,
			})
		}
	}
	return out, nil
}
