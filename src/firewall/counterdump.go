package firewall

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// FastCounters puts the packet counts of the named counters of the kill
// switch and the moat into into (their names do not overlap): what the
// fast counter signal reads every second (fastsignal.CounterWatch). It
// returns an error when neither table could be read; into then holds
// nothing new.
//
// It does not go through google/nftables: that read allocated about 20 KB
// per table (a page-sized receive buffer per message, the objects'
// decoding) and cost 50–100 µs of CPU even with a warm cache; at one read
// a second that was a tenth of an idle daemon's CPU and most of its
// garbage (issue 19). This is one dump request per table, filtered to
// counters by the kernel, over one kept socket, into one reused buffer,
// decoding only the name and the packet count (8 µs warm for both
// tables, measured in a test namespace). A failed read closes the socket;
// the next read opens a fresh one.
func (f *Firewall) FastCounters(ctx context.Context, into map[string]uint64) error {
	f.fastMu.Lock()
	defer f.fastMu.Unlock()
	if f.fast == nil {
		d, err := dialCounterDump(f.netnsFD)
		if err != nil {
			return err
		}
		f.fast = d
	}
	var errs []error
	for _, table := range []string{TableKillSwitch, TableMoat} {
		n, err := f.fast.dump(ctx, table, into)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("reading counters of %s: %w", tableKey(famInet, table), err))
			if !errors.Is(err, unix.ENOENT) { // a missing table is an answer, not a broken socket
				f.fast.close()
				f.fast = nil
				return errors.Join(errs...)
			}
		case n == 0:
			errs = append(errs, fmt.Errorf("table %s has no counters (not installed?)", tableKey(famInet, table)))
		}
	}
	if len(errs) == 2 {
		return errors.Join(errs...)
	}
	return nil
}

// nftObjectCounter is NFT_OBJECT_COUNTER, the counter object type.
const nftObjectCounter = 1

// counterDumpTimeout bounds one dump when ctx has no earlier deadline: the
// kernel answers a dump at once, so only a broken socket waits.
const counterDumpTimeout = 2 * time.Second

// counterDumpBuffer is the receive buffer. The kernel sizes a dump's
// datagrams to the largest buffer a reader offered (at least a page), so
// they fit; a counter object is about 100 bytes.
const counterDumpBuffer = 16 << 10

// counterDump is the kept socket of FastCounters.
type counterDump struct {
	c   *netlink.Conn
	rc  syscall.RawConn
	buf []byte
	seq uint32
}

func dialCounterDump(netnsFD int) (*counterDump, error) {
	cfg := &netlink.Config{}
	if netnsFD >= 0 {
		cfg.NetNS = netnsFD
	}
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, cfg) // enters the namespace on a locked thread
	if err != nil {
		return nil, fmt.Errorf("opening nftables netlink socket: %w", err)
	}
	rc, err := c.SyscallConn()
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("opening nftables netlink socket: %w", err)
	}
	return &counterDump{c: c, rc: rc, buf: make([]byte, counterDumpBuffer)}, nil
}

func (d *counterDump) close() { d.c.Close() }

// dump asks for table's counter objects and adds each one's packet count
// to into; n is how many it found.
func (d *counterDump) dump(ctx context.Context, table string, into map[string]uint64) (n int, err error) {
	deadline := time.Now().Add(counterDumpTimeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	if err := d.c.SetDeadline(deadline); err != nil {
		return 0, err
	}
	d.seq++
	req := counterDumpRequest(d.buf[:0], table, d.seq)
	var serr error
	if err := d.rc.Write(func(fd uintptr) bool {
		serr = unix.Sendto(int(fd), req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		return serr != unix.EAGAIN
	}); err != nil {
		return 0, err
	}
	if serr != nil {
		return 0, serr
	}
	for {
		var m int
		var rerr error
		if err := d.rc.Read(func(fd uintptr) bool {
			m, _, rerr = unix.Recvfrom(int(fd), d.buf, unix.MSG_DONTWAIT|unix.MSG_TRUNC)
			return rerr != unix.EAGAIN
		}); err != nil {
			return n, err
		}
		if rerr != nil {
			return n, rerr
		}
		if m > len(d.buf) {
			return n, fmt.Errorf("a %d-byte netlink datagram does not fit the %d-byte buffer", m, len(d.buf))
		}
		done, k, err := parseCounterDump(d.buf[:m], d.seq, into)
		n += k
		if err != nil || done {
			return n, err
		}
	}
}

// counterDumpRequest is a NFT_MSG_GETOBJ dump of table's counters (inet
// family), appended to b.
func counterDumpRequest(b []byte, table string, seq uint32) []byte {
	name := len(table) + 1
	size := unix.SizeofNlMsghdr + 4 + nlaAlign(4+name) + 4 + 4
	b = binary.NativeEndian.AppendUint32(b, uint32(size))
	b = binary.NativeEndian.AppendUint16(b, uint16(unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_GETOBJ))
	b = binary.NativeEndian.AppendUint16(b, unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	b = binary.NativeEndian.AppendUint32(b, seq)
	b = binary.NativeEndian.AppendUint32(b, 0) // port id: the kernel fills it
	b = append(b, unix.NFPROTO_INET, unix.NFNETLINK_V0, 0, 0)
	b = binary.NativeEndian.AppendUint16(b, uint16(4+name))
	b = binary.NativeEndian.AppendUint16(b, unix.NFTA_OBJ_TABLE)
	b = append(b, table...)
	b = append(b, 0)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	b = binary.NativeEndian.AppendUint16(b, 8)
	b = binary.NativeEndian.AppendUint16(b, unix.NFTA_OBJ_TYPE)
	b = binary.BigEndian.AppendUint32(b, nftObjectCounter)
	return b
}

// nlaTypeMask strips NLA_F_NESTED and NLA_F_NET_BYTEORDER from an
// attribute's type.
const nlaTypeMask = 0x3fff

func nlaAlign(n int) int { return (n + 3) &^ 3 }

// parseCounterDump reads one datagram of the dump: done at NLMSG_DONE,
// the kernel's error at NLMSG_ERROR. Messages of another sequence (a
// reply to an earlier dump that failed half way) are skipped.
func parseCounterDump(b []byte, seq uint32, into map[string]uint64) (done bool, n int, err error) {
	for len(b) >= unix.SizeofNlMsghdr {
		l := int(binary.NativeEndian.Uint32(b[0:4]))
		typ := binary.NativeEndian.Uint16(b[4:6])
		mseq := binary.NativeEndian.Uint32(b[8:12])
		if l < unix.SizeofNlMsghdr || l > len(b) {
			return true, n, fmt.Errorf("malformed netlink message (%d bytes of %d)", l, len(b))
		}
		body := b[unix.SizeofNlMsghdr:l]
		b = b[min(nlaAlign(l), len(b)):]
		if mseq != seq {
			continue
		}
		switch typ {
		case unix.NLMSG_DONE:
			// A dump that failed half way says so here.
			if len(body) >= 4 {
				if code := int32(binary.NativeEndian.Uint32(body)); code < 0 {
					return true, n, unix.Errno(-code)
				}
			}
			return true, n, nil
		case unix.NLMSG_ERROR:
			if len(body) < 4 {
				return true, n, errors.New("short netlink error")
			}
			if code := int32(binary.NativeEndian.Uint32(body)); code != 0 {
				return true, n, unix.Errno(-code)
			}
			return true, n, nil
		case unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_NEWOBJ:
			if len(body) < 4 {
				continue
			}
			if name, packets, ok := counterObject(body[4:]); ok {
				into[name] = packets
				n++
			}
		}
	}
	return false, n, nil
}

// counterObject decodes a counter object's attributes: its name and
// NFTA_OBJ_DATA's packet count.
func counterObject(b []byte) (name string, packets uint64, ok bool) {
	var isCounter, havePackets bool
	for a := range nlAttrs(b) {
		switch a.typ {
		case unix.NFTA_OBJ_NAME:
			name = string(trimNUL(a.data))
		case unix.NFTA_OBJ_TYPE:
			isCounter = len(a.data) == 4 && binary.BigEndian.Uint32(a.data) == nftObjectCounter
		case unix.NFTA_OBJ_DATA:
			for c := range nlAttrs(a.data) {
				if c.typ == unix.NFTA_COUNTER_PACKETS && len(c.data) == 8 {
					packets, havePackets = binary.BigEndian.Uint64(c.data), true
				}
			}
		}
	}
	return name, packets, isCounter && havePackets && name != ""
}

type nlAttr struct {
	typ  uint16
	data []byte
}

// nlAttrs iterates over netlink attributes, their type without the nested
// and byte-order flags; a truncated attribute ends it.
func nlAttrs(b []byte) func(yield func(nlAttr) bool) {
	return func(yield func(nlAttr) bool) {
		for len(b) >= 4 {
			l := int(binary.NativeEndian.Uint16(b[0:2]))
			typ := binary.NativeEndian.Uint16(b[2:4]) & nlaTypeMask
			if l < 4 || l > len(b) {
				return
			}
			if !yield(nlAttr{typ: typ, data: b[4:l]}) {
				return
			}
			b = b[min(nlaAlign(l), len(b)):]
		}
	}
}

func trimNUL(b []byte) []byte {
	for len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	return b
}
