package daemon

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"time"

	"surflare-watchdog/src/firewall"
)

// serverPortsWatch copies the vendor's server ports (its table's set
// server_ports) into the firewall Spec for strict direct: the kill switch
// then lets the proxy's 0xff TCP to those ports through to any address, so
// a relay the daemon has not learned yet is reachable from the first SYN
// (firewall/strict.go). The vendor creates the set at connect and removes
// it at disconnect; ports once seen are kept (they do not change between
// connects), so the next connect never waits for this loop. A reload
// replaces the Spec from the config; the next poll puts the ports back.
type serverPortsWatch struct {
	fw   *fwAdapter
	log  *slog.Logger
	seen map[uint16]bool

	// read: the set was read while the guard's nftables monitor ran, after
	// it had counted readAt events. While the count stays there no
	// nftables transaction has been committed, so the set is as read and
	// the poll costs no netlink round trip (issue 19: this poll was a
	// tenth of an idle daemon's CPU).
	read   bool
	readAt uint64
}

// serverPortsPoll: how often the vendor's set is read (two small netlink
// requests). A connect's first relay SYN that comes before the copy is
// refused; the proxy's retry a moment later passes.
const serverPortsPoll = 500 * time.Millisecond

// serverPortsIdlePoll is the poll while the guard's nftables monitor
// runs: the vendor's set changes only in an nftables transaction, which
// wakes the watch at once (Firewall.NFTChanged), so the poll is a safety
// net and no longer two wake-ups a second on an idle router (issue 19).
const serverPortsIdlePoll = 10 * time.Second

func (w *serverPortsWatch) run(ctx context.Context) error {
	changed := w.fw.fw.NFTChanged()
	for {
		w.once(ctx)
		wait := serverPortsPoll
		if _, ok := w.fw.fw.NFTEvents(); ok {
			wait = serverPortsIdlePoll
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		case <-changed:
		}
	}
}

func (w *serverPortsWatch) once(ctx context.Context) {
	if n, ok := w.fw.fw.NFTEvents(); !ok || !w.read || n != w.readAt {
		for p := range w.fw.fw.VendorServerPorts(ctx) {
			w.seen[p] = true
		}
		w.read, w.readAt = ok, n
	}
	if len(w.seen) == 0 {
		return
	}
	want := slices.Sorted(maps.Keys(w.seen))
	changed, err := w.fw.updateBase(ctx, func(s *firewall.Spec) bool {
		if slices.Equal(s.ServerPorts, want) {
			return false
		}
		s.ServerPorts = want
		return true
	})
	if err != nil {
		w.log.Warn("Strict direct: adding the vendor's server ports failed", "err", err)
	} else if changed {
		w.log.Info("Strict direct: the proxy may reach the vendor's server ports", "ports", want)
	}
}

// updateBase changes the config part of the Spec in place (f reports
// whether it changed anything) and applies it, as SetBase does; the change
// is made under the adapter's lock, so it is not lost to a concurrent
// update made the same way.
func (a *fwAdapter) updateBase(ctx context.Context, f func(*firewall.Spec) bool) (bool, error) {
	a.mu.Lock()
	s := a.base
	s.ServerPorts = slices.Clone(s.ServerPorts)
	if !f(&s) {
		a.mu.Unlock()
		return false, nil
	}
	a.base = s
	skip := a.tablesDownLocked()
	a.mu.Unlock()
	if skip {
		return true, nil
	}
	return true, a.apply(ctx)
}
