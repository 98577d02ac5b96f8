package route

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// TCP states (include/net/tcp_states.h) a process's socket descriptor
// never stands for: a listener aside, these are the kernel's own mini
// sockets, with no inode.
const (
	tcpSynRecv    = 3
	tcpTimeWait   = 6
	tcpNewSynRecv = 12
)

// ownedStates is the sock_diag state mask of OwnedTCPSockets: every state
// but LISTEN, TIME_WAIT, SYN_RECV and NEW_SYN_RECV.
const ownedStates = 0xfff &^ (1<<tcpListen | 1<<tcpTimeWait | 1<<tcpSynRecv | 1<<tcpNewSynRecv)

// SockDiag is a sock_diag socket for OwnedTCPSockets. It is separate from
// Handle because the dump it sends needs a state mask, which the netlink
// library's dumps do not take.
type SockDiag struct {
	mu sync.Mutex
	sh *nl.SocketHandle
}

// OpenSockDiag opens the socket in ns (netns.None() = the caller's).
func OpenSockDiag(ns netns.NsHandle) (*SockDiag, error) {
	s, err := nl.GetNetlinkSocketAt(ns, netns.None(), unix.NETLINK_INET_DIAG)
	if err != nil {
		return nil, fmt.Errorf("opening sock_diag: %w", err)
	}
	if err := s.SetReceiveTimeout(&nl.SocketTimeoutTv); err != nil {
		s.Close()
		return nil, fmt.Errorf("sock_diag receive timeout: %w", err)
	}
	if err := s.SetSendTimeout(&nl.SocketTimeoutTv); err != nil {
		s.Close()
		return nil, fmt.Errorf("sock_diag send timeout: %w", err)
	}
	return &SockDiag{sh: &nl.SocketHandle{Socket: s}}, nil
}

// Close releases the socket.
func (d *SockDiag) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sh != nil {
		d.sh.Socket.Close()
		d.sh = nil
	}
}

// OwnedTCPSockets lists the TCP sockets of both families that a process
// can hold — every state but LISTEN, TIME_WAIT and SYN_RECV — with their
// tcp_info. It is what the early detector keeps of AllTCPSockets, asked of
// the kernel: a router's TIME_WAIT sockets outnumber its live ones by far
// (434 to 5 in the lab's router at idle), and the dump of them all, every
// 3 s, was the largest part of an idle daemon's CPU (issue 19).
func (d *SockDiag) OwnedTCPSockets(ctx context.Context) ([]Socket, error) {
	var out []Socket
	err := d.dump(ctx, ownedStates, func(s Socket) bool {
		out = append(out, s)
		return true
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// diagRequest is struct inet_diag_req_v2 for TCP with tcp_info asked.
type diagRequest struct {
	family uint8
	states uint32
}

const sizeofDiagRequest = 56

func (r diagRequest) Len() int { return sizeofDiagRequest }

func (r diagRequest) Serialize() []byte {
	b := make([]byte, sizeofDiagRequest)
	b[0] = r.family
	b[1] = unix.IPPROTO_TCP
	b[2] = 1 << (netlink.INET_DIAG_INFO - 1)
	binary.NativeEndian.PutUint32(b[4:], r.states)
	// The socket id (sports, addresses, interface, cookie) stays zero: a
	// dump matches every socket. The cookie's "none" is all ones.
	binary.NativeEndian.PutUint32(b[48:], ^uint32(0))
	binary.NativeEndian.PutUint32(b[52:], ^uint32(0))
	return b
}

// sizeofDiagMsg is struct inet_diag_msg.
const sizeofDiagMsg = 72

// parseDiagMsg reads one answer: struct inet_diag_msg and its attributes,
// of which only INET_DIAG_INFO (struct tcp_info) is kept.
func parseDiagMsg(b []byte) (Socket, error) {
	if len(b) < sizeofDiagMsg {
		return Socket{}, fmt.Errorf("short inet_diag_msg (%d bytes)", len(b))
	}
	fam, state := b[0], b[1]
	sport, dport := binary.BigEndian.Uint16(b[4:]), binary.BigEndian.Uint16(b[6:])
	var src, dst netip.Addr
	if fam == unix.AF_INET6 {
		src = netip.AddrFrom16([16]byte(b[8:24])).Unmap()
		dst = netip.AddrFrom16([16]byte(b[24:40])).Unmap()
	} else {
		src = netip.AddrFrom4([4]byte(b[8:12]))
		dst = netip.AddrFrom4([4]byte(b[24:28]))
	}
	s := Socket{
		Local:  netip.AddrPortFrom(src, sport),
		Remote: netip.AddrPortFrom(dst, dport),
		State:  state,
		Inode:  binary.NativeEndian.Uint32(b[68:]),
	}
	for a := b[sizeofDiagMsg:]; len(a) >= 4; {
		l, typ := int(binary.NativeEndian.Uint16(a)), binary.NativeEndian.Uint16(a[2:])
		if l < 4 || l > len(a) {
			return Socket{}, fmt.Errorf("bad attribute length %d", l)
		}
		if typ == netlink.INET_DIAG_INFO {
			s.Info = parseTCPInfo(a[4:l])
		}
		next := (l + 3) &^ 3
		if next > len(a) {
			break
		}
		a = a[next:]
	}
	return s, nil
}

// parseTCPInfo reads struct tcp_info up to tcpi_total_retrans (what every
// kernel since 3.x has); fields past what the kernel sent stay zero.
func parseTCPInfo(b []byte) *netlink.TCPInfo {
	var buf [104]byte
	copy(buf[:], b)
	u := func(off int) uint32 { return binary.NativeEndian.Uint32(buf[off:]) }
	return &netlink.TCPInfo{
		State: buf[0], Ca_state: buf[1], Retransmits: buf[2], Probes: buf[3], Backoff: buf[4], Options: buf[5],
		Snd_wscale: buf[6] & 0xf, Rcv_wscale: buf[6] >> 4,
		Delivery_rate_app_limited: buf[7] & 1, Fastopen_client_fail: buf[7] >> 1 & 3,
		Rto: u(8), Ato: u(12), Snd_mss: u(16), Rcv_mss: u(20),
		Unacked: u(24), Sacked: u(28), Lost: u(32), Retrans: u(36), Fackets: u(40),
		Last_data_sent: u(44), Last_ack_sent: u(48), Last_data_recv: u(52), Last_ack_recv: u(56),
		Pmtu: u(60), Rcv_ssthresh: u(64), Rtt: u(68), Rttvar: u(72), Snd_ssthresh: u(76), Snd_cwnd: u(80),
		Advmss: u(84), Reordering: u(88), Rcv_rtt: u(92), Rcv_space: u(96), Total_retrans: u(100),
	}
}
