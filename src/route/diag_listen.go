package route

import (
	"context"
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// listenStates is the sock_diag state mask of Listening: LISTEN alone.
// With no other state asked the kernel walks only its listening hash and
// skips the established one (inet_diag_dump_icsk), so the answer costs the
// same on a router with ten thousand LAN connections as on an idle one;
// /proc/net/tcp, read for the same question, walks every socket.
const listenStates = 1 << tcpListen

// Listening reports whether a TCP socket of either family listens on port
// in d's namespace. Health asks it before every check (E6: a proxy that
// runs but does not listen yet is not up).
func (d *SockDiag) Listening(ctx context.Context, port uint16) (bool, error) {
	found := false
	err := d.dump(ctx, listenStates, func(s Socket) bool {
		found = s.State == tcpListen && s.Local.Port() == port
		return !found
	})
	return found, err
}

// dump sends one sock_diag dump per family for the states mask and hands
// each socket to fn until fn returns false.
func (d *SockDiag) dump(ctx context.Context, states uint32, fn func(Socket) bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sh == nil {
		return errors.New("sock_diag: closed")
	}
	for _, fam := range []uint8{unix.AF_INET, unix.AF_INET6} {
		if err := ctx.Err(); err != nil {
			return err
		}
		req := nl.NewNetlinkRequest(nl.SOCK_DIAG_BY_FAMILY, unix.NLM_F_DUMP)
		req.Sockets = map[int]*nl.SocketHandle{unix.NETLINK_INET_DIAG: d.sh}
		req.AddData(diagRequest{family: fam, states: states})
		var perr error
		stopped := false
		// A false from the iterator stops the answers, not the reading:
		// the library drains the rest of the dump, so the next request
		// does not read this one's leftovers.
		err := req.ExecuteIter(unix.NETLINK_INET_DIAG, nl.SOCK_DIAG_BY_FAMILY, func(msg []byte) bool {
			s, err := parseDiagMsg(msg)
			if err != nil {
				perr = err
				return false
			}
			stopped = !fn(s)
			return !stopped
		})
		if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) && !errors.Is(err, nl.ErrDumpInterrupted) {
			return fmt.Errorf("sock_diag: %w", err)
		}
		if perr != nil {
			return fmt.Errorf("sock_diag: %w", perr)
		}
		if stopped {
			return nil
		}
	}
	return nil
}
