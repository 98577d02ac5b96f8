// Package relays learns which relays the vendor uses. They are in no
// config — the vendor picks them — yet the moat must count SYNs, RSTs and
// FINs on the real relay paths and the loop guard must know them as
// siblings. The learner finds them in the router's own connections to the
// vendor's server ports (the vendor table's set server_ports), from two
// sources: the early detector's samples of the proxy's sockets (a proxy
// that keeps its relay connections open), and conntrack, which remembers
// short connections for minutes after they closed.
package relays

import (
	"context"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"surflare-watchdog/src/clock"
)

// Flow is one tracked connection, by its original direction.
type Flow struct {
	TCP      bool
	Src, Dst netip.AddrPort
}

// Conntrack is the kernel's connection tracking table as the learner reads
// it; KernelConntrack is the real one.
type Conntrack interface {
	Flows(ctx context.Context) ([]Flow, error)
}

// Options are a Learner's dependencies.
type Options struct {
	Conntrack Conntrack
	// ServerPorts reads the vendor's server ports
	// (firewall.Firewall.VendorServerPorts).
	ServerPorts func(ctx context.Context) map[uint16]bool
	// LocalAddrs are the router's own addresses (route.LocalAddrs): a flow
	// from one of them is the router's own, the proxy's.
	LocalAddrs func() (map[netip.Addr]bool, error)
	// Add puts newly learned relays into the firewall Spec.
	Add   func(ctx context.Context, relays []netip.Addr) error
	Log   *slog.Logger
	Clock clock.Clock // nil = the real one
}

// Learner remembers the relays it has seen and hands each new one to Add
// once.
type Learner struct {
	o Options

	poke chan struct{}

	mu        sync.Mutex
	known     map[netip.Addr]bool
	ports     map[uint16]bool
	portsRead time.Time
	learned   int // relays handed to Add, for Run's back-off
}

// maxRelays bounds what is learned (a vendor uses a handful).
const maxRelays = 64

// serverPortsTTL: how long the vendor's server ports are trusted before
// they are read again.
const serverPortsTTL = time.Minute

// ScanEvery is how often Run reads conntrack for relay flows while the
// tunnel is new. A dump returns every tracked flow of the router (LAN
// traffic included) and was a sixth of an idle daemon's CPU (issue 19), so
// while scans find nothing new Run doubles the wait up to ScanIdleMax; a
// learned relay or a Poke (the engine changed state: a connect, a
// rotation) brings it back to ScanEvery. ScanIdleMax stays under
// conntrack's TIME_WAIT (120 s), so a short relay connection that closed
// cleanly is still in the table at the next scan; the proxy's open
// connections are learned from the early detector's samples (Observe)
// every few seconds whatever this wait.
const (
	ScanEvery   = 10 * time.Second
	ScanIdleMax = 80 * time.Second
)

// New returns a Learner that knows no relay yet.
func New(o Options) *Learner {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Log == nil {
		o.Log = slog.Default().With("subsystem", "relays")
	}
	return &Learner{o: o, known: map[netip.Addr]bool{}, poke: make(chan struct{}, 1)}
}

// Observe is fed the destinations of the proxy's established outbound
// connections (every early-detector sample).
func (l *Learner) Observe(ctx context.Context, dsts []netip.AddrPort) {
	l.learn(ctx, dsts)
}

// Run reads conntrack until ctx ends: ScanEvery at first and after a
// Poke or a scan that learned something, then backing off to ScanIdleMax
// (see ScanEvery).
func (l *Learner) Run(ctx context.Context) error {
	wait := ScanEvery
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-l.o.Clock.After(ScanEvery / 5):
		}
		before := l.learnedCount()
		l.Scan(ctx)
		if l.learnedCount() != before {
			wait = ScanEvery
		}
		select {
		case <-ctx.Done():
			return nil
		case <-l.o.Clock.After(wait):
			wait = min(2*wait, ScanIdleMax)
		case <-l.poke:
			wait = ScanEvery
		}
	}
}

// Poke tells Run that the tunnel changed (a connect, a rotation): it
// scans soon and at ScanEvery again. It never blocks.
func (l *Learner) Poke() {
	select {
	case l.poke <- struct{}{}:
	default:
	}
}

func (l *Learner) learnedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.learned
}

// Scan reads conntrack once and learns the original destinations of the
// TCP flows the router itself opened.
func (l *Learner) Scan(ctx context.Context) {
	local, err := l.o.LocalAddrs()
	if err != nil {
		return
	}
	flows, err := l.o.Conntrack.Flows(ctx)
	if err != nil {
		return
	}
	var dsts []netip.AddrPort
	for _, f := range flows {
		if f.TCP && local[f.Src.Addr().Unmap()] {
			dsts = append(dsts, netip.AddrPortFrom(f.Dst.Addr().Unmap(), f.Dst.Port()))
		}
	}
	l.learn(ctx, dsts)
}

// learn adds the destinations on a vendor server port that are new.
func (l *Learner) learn(ctx context.Context, dsts []netip.AddrPort) {
	l.mu.Lock()
	if now := l.o.Clock.Now(); len(l.ports) == 0 || now.Sub(l.portsRead) > serverPortsTTL {
		l.ports, l.portsRead = l.o.ServerPorts(ctx), now
	}
	var fresh []netip.Addr
	for _, d := range dsts {
		a := d.Addr().Unmap()
		if !l.ports[d.Port()] || l.known[a] || a.IsLoopback() || !a.IsGlobalUnicast() {
			continue
		}
		if len(l.known) >= maxRelays {
			break
		}
		l.known[a] = true
		fresh = append(fresh, a)
	}
	l.learned += len(fresh)
	l.mu.Unlock()
	if len(fresh) == 0 {
		return
	}
	l.o.Log.Info("Relays learned from the proxy's connections", "new", fresh, "total", len(l.known))
	if err := l.o.Add(ctx, fresh); err != nil {
		l.o.Log.Warn("Adding learned relays to the moat failed", "err", err)
	}
}
