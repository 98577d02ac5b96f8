package firewall

import (
	"context"
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// readCounters returns the packet counts of a table's named counters.
func (f *Firewall) readCounters(ctx context.Context, fam nftables.TableFamily, table string) (map[string]uint64, error) {
	objs, err := f.getCounters(&nftables.Table{Family: fam, Name: table})
	if err != nil {
		return nil, fmt.Errorf("reading counters of %s: %w", tableKey(fam, table), err)
	}
	out := map[string]uint64{}
	for _, o := range objs {
		n, ok := o.(*nftables.NamedObj)
		if !ok || n.Type != nftables.ObjTypeCounter {
			continue
		}
		if cnt, ok := n.Obj.(*expr.Counter); ok {
			out[n.Name] = cnt.Packets
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("table %s has no counters (not installed?)", tableKey(fam, table))
	}
	return out, nil
}

// KillSwitchCounters returns, per reason, how many packets the kill switch
// blocked (CounterBlockedOut, CounterBlockedFwd, CounterBlockedV6,
// CounterUnroutedMark): the lab's leak count, and a diagnostic for users.
func (f *Firewall) KillSwitchCounters(ctx context.Context) (map[string]uint64, error) {
	return f.readCounters(ctx, famInet, TableKillSwitch)
}

// Moat is the relay-path counters (packets).
type Moat struct {
	SynOut, SynAckIn, SynIn, RstIn, FinIn uint64
}

// SynRatio is SYN-ACKs received per SYN sent (1 on a healthy path); 0 when
// nothing was sent.
func (m Moat) SynRatio() float64 {
	if m.SynOut == 0 {
		return 0
	}
	return float64(m.SynAckIn) / float64(m.SynOut)
}

// MoatCounters reads the moat counters.
func (f *Firewall) MoatCounters(ctx context.Context) (Moat, error) {
	cs, err := f.readCounters(ctx, famInet, TableMoat)
	if err != nil {
		return Moat{}, err
	}
	return Moat{SynOut: cs[CounterSynOut], SynAckIn: cs[CounterSynAckIn], SynIn: cs[CounterSynIn],
		RstIn: cs[CounterRstIn], FinIn: cs[CounterFinIn]}, nil
}

// getCounters reads a table's named objects over one netlink socket kept
// for these reads: the fast signals read the counters every second, and
// opening a socket for each read was a tenth of an idle daemon's CPU
// (issue 19). A failed read closes it; the next read opens a fresh one.
func (f *Firewall) getCounters(t *nftables.Table) ([]nftables.Obj, error) {
	f.readMu.Lock()
	defer f.readMu.Unlock()
	if f.readConn == nil {
		c, err := f.conn()
		if err != nil {
			return nil, err
		}
		f.readConn = c
	}
	objs, err := f.readConn.GetNamedObjects(t)
	if err != nil {
		f.readConn.CloseLasting()
		f.readConn = nil
	}
	return objs, err
}
