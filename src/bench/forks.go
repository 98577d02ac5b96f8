package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The kernel's process events connector (linux/cn_proc.h): every fork in
// the system is reported to listeners in the initial network namespace.
// Counting the forks whose parent is the daemon is exact — a /proc scan
// misses a `surflare status` that lives for a few milliseconds — and costs
// the daemon nothing.
const (
	cnIdxProc         = 0x1 // CN_IDX_PROC
	cnValProc         = 0x1 // CN_VAL_PROC
	procCnMcastListen = 1   // PROC_CN_MCAST_LISTEN
	procEventFork     = 0x00000001
	cnMsgLen          = 20 // struct cn_msg without data
	procEventHdrLen   = 16 // what, cpu, timestamp_ns
)

// ForkCounter counts the processes a set of roots (and, transitively, their
// descendants) start, from the proc connector's fork events. Threads are
// not processes and are not counted.
type ForkCounter struct {
	fd int

	mu          sync.Mutex
	roots       map[uint32]bool
	tracked     map[uint32]bool // roots and their descendants
	children    int             // forks whose parent is a root
	descendants int             // forks whose parent is tracked
	lost        int             // receive errors (ENOBUFS: events dropped)
}

// NewForkCounter subscribes to the proc connector (needs root or
// CAP_NET_ADMIN, and a kernel with CONFIG_PROC_EVENTS). Call Run to
// consume events and Close when done.
func NewForkCounter() (*ForkCounter, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_CONNECTOR)
	if err != nil {
		return nil, fmt.Errorf("proc connector socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: cnIdxProc, Pid: 0}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("proc connector bind: %w", err)
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20)
	// nlmsghdr + cn_msg + u32 op.
	msg := make([]byte, unix.NLMSG_HDRLEN+cnMsgLen+4)
	le := binary.NativeEndian
	le.PutUint32(msg[0:], uint32(len(msg)))
	le.PutUint16(msg[4:], unix.NLMSG_DONE)
	le.PutUint32(msg[12:], uint32(unix.Getpid()))
	cn := msg[unix.NLMSG_HDRLEN:]
	le.PutUint32(cn[0:], cnIdxProc)
	le.PutUint32(cn[4:], cnValProc)
	le.PutUint16(cn[16:], 4)
	le.PutUint32(cn[cnMsgLen:], procCnMcastListen)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("proc connector listen: %w", err)
	}
	return &ForkCounter{fd: fd, roots: map[uint32]bool{}, tracked: map[uint32]bool{}}, nil
}

// Watch adds a root process to count forks for.
func (f *ForkCounter) Watch(pid int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.roots[uint32(pid)] = true
	f.tracked[uint32(pid)] = true
}

// Reset zeroes the counts (the tracked set stays).
func (f *ForkCounter) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.children, f.descendants, f.lost = 0, 0, 0
}

// Counts returns the forks seen since the last Reset: by a root, by a root
// or any descendant, and how many receive errors may have lost events.
func (f *ForkCounter) Counts() (children, descendants, lost int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.children, f.descendants, f.lost
}

// Run reads events until ctx ends or the socket fails.
func (f *ForkCounter) Run(ctx context.Context) error {
	tv := unix.NsecToTimeval((200 * time.Millisecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(f.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return fmt.Errorf("proc connector timeout: %w", err)
	}
	buf := make([]byte, 64<<10)
	for ctx.Err() == nil {
		n, _, err := unix.Recvfrom(f.fd, buf, 0)
		switch {
		case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ENOBUFS):
			f.mu.Lock()
			f.lost++
			f.mu.Unlock()
			continue
		case err != nil:
			return fmt.Errorf("proc connector receive: %w", err)
		}
		f.parse(buf[:n])
	}
	return nil
}

// parse handles one datagram of netlink messages.
func (f *ForkCounter) parse(b []byte) {
	le := binary.NativeEndian
	for len(b) >= unix.NLMSG_HDRLEN {
		l := int(le.Uint32(b[0:]))
		if l < unix.NLMSG_HDRLEN || l > len(b) {
			return
		}
		f.event(b[unix.NLMSG_HDRLEN:l])
		b = b[min(nlmAlign(l), len(b)):]
	}
}

// event handles one cn_msg carrying a proc_event.
func (f *ForkCounter) event(cn []byte) {
	le := binary.NativeEndian
	const forkLen = procEventHdrLen + 16
	if len(cn) < cnMsgLen+forkLen || le.Uint32(cn[0:]) != cnIdxProc {
		return
	}
	ev := cn[cnMsgLen:]
	if le.Uint32(ev[0:]) != procEventFork {
		return
	}
	d := ev[procEventHdrLen:]
	parentTgid, childPid, childTgid := le.Uint32(d[4:]), le.Uint32(d[8:]), le.Uint32(d[12:])
	f.fork(parentTgid, childPid, childTgid)
}

// fork records that parentTgid started childPid (a thread when childPid is
// not its own thread group leader).
func (f *ForkCounter) fork(parentTgid, childPid, childTgid uint32) {
	if childPid != childTgid {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.tracked[parentTgid] {
		return
	}
	f.tracked[childTgid] = true
	f.descendants++
	if f.roots[parentTgid] {
		f.children++
	}
}

// Close ends the subscription.
func (f *ForkCounter) Close() error { return unix.Close(f.fd) }

func nlmAlign(n int) int { return (n + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1) }
