package lab

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// LeakCounts are packet counters kept in the internet namespace on the
// router's uplink (isp0 ingress). A "leak" is any packet from the LAN or the
// router that reached an internet host other than a relay, the account API,
// the ISP link itself or the cn_direct range — i.e. anything that did not go
// through the tunnel and was not allowed to go direct.
type LeakCounts struct {
	DNS4, TCP4, Other4 uint64 // IPv4 packets to port 53 / other TCP / anything else
	DNS6, TCP6, Other6 uint64 // the same for IPv6
	Relay              uint64 // packets to relays: the tunnel itself (not a leak)
	Blackholed         uint64 // packets silently dropped by black-hole faults
	Lost               uint64 // packets dropped by the loss fault (both directions)
}

// Total is the number of leaked packets of every kind.
func (c LeakCounts) Total() uint64 { return c.DNS4 + c.TCP4 + c.Other4 + c.DNS6 + c.TCP6 + c.Other6 }

// String prints the non-zero leak kinds, for test failures and the CLI.
func (c LeakCounts) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "leaks=%d", c.Total())
	for _, f := range []struct {
		n string
		v uint64
	}{{"dns4", c.DNS4}, {"tcp4", c.TCP4}, {"other4", c.Other4}, {"dns6", c.DNS6}, {"tcp6", c.TCP6}, {"other6", c.Other6}} {
		if f.v > 0 {
			fmt.Fprintf(&b, " %s=%d", f.n, f.v)
		}
	}
	fmt.Fprintf(&b, " (relay=%d blackholed=%d lost=%d)", c.Relay, c.Blackholed, c.Lost)
	return b.String()
}

// Leaks reads the counters.
func (l *Lab) Leaks(ctx context.Context) (LeakCounts, error) { return l.readCounters(false) }

// ResetLeaks reads and zeroes the counters atomically (the returned counts
// are the values just before the reset).
func (l *Lab) ResetLeaks(ctx context.Context) (LeakCounts, error) { return l.readCounters(true) }

func (l *Lab) readCounters(reset bool) (LeakCounts, error) {
	c, err := nftConn(l.ns[RoleInternet])
	if err != nil {
		return LeakCounts{}, err
	}
	t := &nftables.Table{Family: nftables.TableFamilyINet, Name: tableObserve}
	var objs []nftables.Obj
	if reset {
		objs, err = c.ResetNamedObjects(t)
	} else {
		objs, err = c.GetNamedObjects(t)
	}
	if err != nil {
		return LeakCounts{}, fmt.Errorf("reading leak counters: %w", err)
	}
	var out LeakCounts
	dst := map[string]*uint64{
		"leak_dns4": &out.DNS4, "leak_tcp4": &out.TCP4, "leak_other4": &out.Other4,
		"leak_dns6": &out.DNS6, "leak_tcp6": &out.TCP6, "leak_other6": &out.Other6,
		counterRelay: &out.Relay, counterHole: &out.Blackholed, counterLost: &out.Lost,
	}
	for _, o := range objs {
		no, ok := o.(*nftables.NamedObj)
		if !ok {
			continue
		}
		ctr, ok := no.Obj.(*expr.Counter)
		if p := dst[no.Name]; ok && p != nil {
			*p = ctr.Packets
		}
	}
	return out, nil
}
