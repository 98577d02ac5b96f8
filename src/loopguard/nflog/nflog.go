// Package nflog subscribes to one nfnetlink_log (NFLOG) group and turns the
// packets the kernel logs to it into wake-ups. The loop guard uses it so the
// kernel tells it when the router starts opening tunnel connections faster
// than anything legitimate does (an nft `limit rate over … log group G`
// rule, firewall/loopguard.go): the guard then sleeps at no cost in steady
// state and still sees a loop within milliseconds, where polling a gauge
// fast enough to catch one cost ~15 s of CPU an hour.
//
// Only the fact that packets were logged matters, so the group is bound in
// copy mode NONE (metadata only, no payload) and a packet message is never
// parsed beyond its type. It talks NETLINK_NETFILTER directly through
// x/sys/unix (include/uapi/linux/netfilter/nfnetlink_log.h): one socket,
// two config messages, a read loop.
//
// The socket lives in the network namespace of the thread that calls
// Subscribe, which must be the namespace of the nft rule.
package nflog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// nfnetlink_log's message types, config attributes and commands
// (include/uapi/linux/netfilter/nfnetlink_log.h; x/sys/unix lacks them).
const (
	msgPacket = 0 // NFULNL_MSG_PACKET
	msgConfig = 1 // NFULNL_MSG_CONFIG

	cfgCmd     = 1 // NFULA_CFG_CMD
	cfgMode    = 2 // NFULA_CFG_MODE
	cfgQThresh = 5 // NFULA_CFG_QTHRESH

	cmdBind = 1 // NFULNL_CFG_CMD_BIND

	copyNone = 0 // NFULNL_COPY_NONE: metadata only
)

// readBuf is one read's buffer: many packet messages (~100 bytes each in
// copy mode NONE) per wake-up while a loop floods the group.
const readBuf = 64 << 10

// rcvBuf is the socket's receive buffer. A flood beyond it is not lost
// information for us (the kernel reports ENOBUFS, which is itself a sign
// of packets), so it is kept small.
const rcvBuf = 256 << 10

// Sub is one bound group. C delivers a coalesced wake-up whenever packets
// were logged since the last receive; it is closed when the subscription
// ends (Close, or a socket error, which is logged).
type Sub struct {
	group  uint16
	f      *os.File
	c      chan struct{}
	events atomic.Uint64
	once   sync.Once
	closed atomic.Bool
	done   chan struct{}
}

// Subscribe binds group in the caller's network namespace and starts
// reading until ctx ends or Close. It fails if nfnetlink_log is missing
// (EPROTONOSUPPORT / ENOENT) or another socket has bound the group (EPERM).
func Subscribe(ctx context.Context, group uint16) (*Sub, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("nflog: netfilter netlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("nflog: binding the netlink socket: %w", err)
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, rcvBuf)
	f := os.NewFile(uintptr(fd), "nflog")
	s := &Sub{group: group, f: f, c: make(chan struct{}, 1), done: make(chan struct{})}
	if err := s.configure(); err != nil {
		f.Close()
		return nil, err
	}
	go s.read(ctx)
	return s, nil
}

// configure binds the group and asks for metadata only, one message per
// packet at once (queue threshold 1: the first logged packet is the one
// that matters).
func (s *Sub) configure() error {
	for i, attrs := range [][]byte{
		attr(cfgCmd, []byte{cmdBind}),
		concat(
			attr(cfgMode, []byte{0, 0, 0, 0, copyNone, 0}),
			attr(cfgQThresh, be32(1)), // the kernel's default batches 100 packets or 1 s
		),
	} {
		err := s.request(uint32(i+1), attrs)
		if errors.Is(err, unix.EPERM) {
			return fmt.Errorf("nflog: group %d is bound by another process: %w", s.group, err)
		}
		if err != nil {
			return fmt.Errorf("nflog: binding group %d: %w", s.group, err)
		}
	}
	return nil
}

// request sends one config message and waits for its ack.
func (s *Sub) request(seq uint32, attrs []byte) error {
	const hdr = unix.SizeofNlMsghdr + 4 // + struct nfgenmsg
	m := make([]byte, hdr, hdr+len(attrs))
	binary.NativeEndian.PutUint32(m[0:], uint32(hdr+len(attrs)))
	binary.NativeEndian.PutUint16(m[4:], unix.NFNL_SUBSYS_ULOG<<8|msgConfig)
	binary.NativeEndian.PutUint16(m[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	binary.NativeEndian.PutUint32(m[8:], seq)
	m[16] = unix.AF_UNSPEC
	m[17] = unix.NFNETLINK_V0
	binary.BigEndian.PutUint16(m[18:], s.group) // res_id: the group
	m = append(m, attrs...)
	rc, err := s.f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Write(func(fd uintptr) bool {
		serr = unix.Sendto(int(fd), m, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		return serr != unix.EAGAIN
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("sending: %w", serr)
	}
	buf := make([]byte, 4096)
	for {
		n, err := s.recv(rc, buf)
		if err != nil {
			return err
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return err
		}
		for _, msg := range msgs {
			if msg.Header.Seq != seq || msg.Header.Type != unix.NLMSG_ERROR {
				continue
			}
			if len(msg.Data) < 4 {
				return errors.New("short netlink ack")
			}
			if code := int32(binary.NativeEndian.Uint32(msg.Data)); code != 0 {
				return unix.Errno(-code)
			}
			return nil
		}
	}
}

func (s *Sub) recv(rc interface {
	Read(func(uintptr) bool) error
}, buf []byte) (int, error) {
	var n int
	var rerr error
	if err := rc.Read(func(fd uintptr) bool {
		n, _, rerr = unix.Recvfrom(int(fd), buf, 0)
		return rerr != unix.EAGAIN
	}); err != nil {
		return 0, err
	}
	return n, rerr
}

// read counts packet messages and wakes C until the socket is closed.
func (s *Sub) read(ctx context.Context) {
	defer close(s.done)
	defer close(s.c)
	stop := context.AfterFunc(ctx, s.closeFile)
	defer stop()
	rc, err := s.f.SyscallConn()
	if err != nil {
		return
	}
	buf := make([]byte, readBuf)
	for {
		n, err := s.recv(rc, buf)
		switch {
		case errors.Is(err, unix.ENOBUFS):
			// The kernel dropped messages for want of room: packets
			// were logged, more than we could take.
			s.wake(1)
			continue
		case err != nil:
			if !s.closed.Load() {
				slog.Default().With("subsystem", "loopguard").Warn("nflog: reading group failed; no more kernel events",
					"group", s.group, "err", err)
			}
			return
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			continue
		}
		k := 0
		for _, m := range msgs {
			if m.Header.Type == unix.NFNL_SUBSYS_ULOG<<8|msgPacket {
				k++
			}
		}
		if k > 0 {
			s.wake(uint64(k))
		}
	}
}

func (s *Sub) closeFile() {
	s.once.Do(func() {
		s.closed.Store(true)
		s.f.Close()
	})
}

func (s *Sub) wake(k uint64) {
	s.events.Add(k)
	select {
	case s.c <- struct{}{}:
	default: // one pending wake-up stands for any number of packets
	}
}

// C is the wake-up channel (closed when the subscription ends).
func (s *Sub) C() <-chan struct{} { return s.c }

// Events is how many logged packets were seen (ENOBUFS counts one).
func (s *Sub) Events() uint64 { return s.events.Load() }

// Group is the bound group.
func (s *Sub) Group() uint16 { return s.group }

// Close ends the subscription (the kernel unbinds the group with the
// socket) and waits for the reader.
func (s *Sub) Close() {
	s.closeFile()
	<-s.done
}

// attr is one netlink attribute, padded to 4 bytes.
func attr(typ uint16, payload []byte) []byte {
	l := unix.SizeofNlAttr + len(payload)
	b := make([]byte, (l+3)&^3)
	binary.NativeEndian.PutUint16(b[0:], uint16(l))
	binary.NativeEndian.PutUint16(b[2:], typ)
	copy(b[unix.SizeofNlAttr:], payload)
	return b
}

func be32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

func concat(bs ...[]byte) []byte {
	var out []byte
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}
