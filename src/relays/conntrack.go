package relays

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/ti-mo/conntrack"
)

// KernelConntrack reads the caller's namespace's conntrack table through
// ctnetlink (~5 ms a dump, DESIGN §9).
type KernelConntrack struct{}

// Flows dumps the table.
func (KernelConntrack) Flows(ctx context.Context) ([]Flow, error) {
	c, err := conntrack.Dial(nil)
	if err != nil {
		return nil, fmt.Errorf("conntrack: %w", err)
	}
	defer c.Close()
	flows, err := c.Dump(nil)
	if err != nil {
		return nil, fmt.Errorf("conntrack dump: %w", err)
	}
	out := make([]Flow, 0, len(flows))
	for _, f := range flows {
		o := f.TupleOrig
		out = append(out, Flow{
			TCP: o.Proto.Protocol == 6,
			Src: netip.AddrPortFrom(o.IP.SourceAddress.Unmap(), o.Proto.SourcePort),
			Dst: netip.AddrPortFrom(o.IP.DestinationAddress.Unmap(), o.Proto.DestinationPort),
		})
	}
	return out, nil
}

// Stats is the table's fill: entries and the limit, for the daemon's
// status (a full table drops new connections, the tunnel's among them).
type Stats struct {
	Entries uint32 `json:"entries"`
	Max     uint32 `json:"max"`
	Error   string `json:"error,omitempty"`
}

// Stats reads the global counters; a failure is carried in Error.
func (KernelConntrack) Stats() Stats {
	c, err := conntrack.Dial(nil)
	if err != nil {
		return Stats{Error: err.Error()}
	}
	defer c.Close()
	st, err := c.StatsGlobal()
	if err != nil {
		return Stats{Error: err.Error()}
	}
	return Stats{Entries: st.Entries, Max: st.MaxEntries}
}
