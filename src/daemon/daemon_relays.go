package daemon

import (
	"context"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/ti-mo/conntrack"

	"surflare-watchdog/src/detect"
)

// relayLearner finds the relays the vendor uses — they are not in the
// config, the vendor picks them — from the router's own connections to the
// vendor's server ports (the vendor table's set server_ports), and adds them
// to the firewall Spec, so the moat counts SYNs, RSTs and FINs on the real
// relay paths. Two sources: the early detector's samples of the proxy's
// sockets (a proxy that keeps its relay connections open), and conntrack,
// which remembers short connections for minutes after they closed.
type relayLearner struct {
	fw  *fwAdapter
	log *slog.Logger

	mu        sync.Mutex
	known     map[netip.Addr]bool
	ports     map[uint16]bool
	portsRead time.Time
}

// maxRelays bounds what is learned (a vendor uses a handful).
const maxRelays = 64

// serverPortsTTL: how long the vendor's server ports are trusted before
// they are read again.
const serverPortsTTL = time.Minute

func newRelayLearner(fw *fwAdapter, log *slog.Logger) *relayLearner {
	return &relayLearner{fw: fw, log: log, known: map[netip.Addr]bool{}}
}

// observe is fed every early-detector sample.
func (r *relayLearner) observe(ctx context.Context, conns []detect.Conn) {
	var dsts []netip.AddrPort
	for _, c := range conns {
		if c.Outbound && c.State == detect.StateEstablished {
			dsts = append(dsts, c.Remote)
		}
	}
	r.learn(ctx, dsts)
}

// relayScanEvery is how often conntrack is read for relay flows.
const relayScanEvery = 10 * time.Second

// run reads conntrack every relayScanEvery until ctx ends.
func (r *relayLearner) run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(relayScanEvery / 5):
		}
		if local, err := localAddrs(); err == nil {
			r.learn(ctx, conntrackDsts(local))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(relayScanEvery):
		}
	}
}

// conntrackDsts are the original destinations of TCP flows the router
// itself opened (the source is one of its addresses).
func conntrackDsts(local map[netip.Addr]bool) []netip.AddrPort {
	c, err := conntrack.Dial(nil)
	if err != nil {
		return nil
	}
	defer c.Close()
	flows, err := c.Dump(nil)
	if err != nil {
		return nil
	}
	var out []netip.AddrPort
	for _, f := range flows {
		o := f.TupleOrig
		if o.Proto.Protocol == 6 && local[o.IP.SourceAddress.Unmap()] {
			out = append(out, netip.AddrPortFrom(o.IP.DestinationAddress.Unmap(), o.Proto.DestinationPort))
		}
	}
	return out
}

// learn adds the destinations on a vendor server port to the moat.
func (r *relayLearner) learn(ctx context.Context, dsts []netip.AddrPort) {
	r.mu.Lock()
	if len(r.ports) == 0 || time.Since(r.portsRead) > serverPortsTTL {
		r.ports, r.portsRead = r.fw.fw.VendorServerPorts(context.Background()), time.Now()
	}
	var fresh []netip.Addr
	for _, d := range dsts {
		a := d.Addr().Unmap()
		if !r.ports[d.Port()] || r.known[a] || a.IsLoopback() || !a.IsGlobalUnicast() {
			continue
		}
		if len(r.known) >= maxRelays {
			break
		}
		r.known[a] = true
		fresh = append(fresh, a)
	}
	r.mu.Unlock()
	if len(fresh) == 0 {
		return
	}
	s := r.fw.Base()
	for _, a := range fresh {
		p := netip.PrefixFrom(a, a.BitLen())
		if !slices.Contains(s.Relays, p) {
			s.Relays = append(s.Relays, p)
		}
	}
	r.log.Info("Relays learned from the proxy's connections", "new", fresh, "total", len(s.Relays))
	if err := r.fw.SetBase(ctx, s); err != nil {
		r.log.Warn("Adding learned relays to the moat failed", "err", err)
	}
}
