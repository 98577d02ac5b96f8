// Package loopguard is a circuit breaker for a proxy that connects to
// itself. When the proxy's outbound sockets lose their 0xff mark (a vendor
// bug, a rule wiped at the wrong moment), its own traffic is captured by its
// tproxy rule again, every connection spawns another, and within seconds the
// proxy runs out of descriptors and takes the whole LAN down with it.
//
// The guard watches the proxy's in-flight connections (established or
// opening, as the early detector's sock_diag sample lists them). While there
// are fewer than MinActive it costs one integer comparison. Above that, if
// one destination holds more than Ratio percent of them, it opens the
// circuit: that addr . port goes into an nft set with a timeout through the
// injected Blocker (the firewall owns nft), which breaks the loop. While the
// condition lasts the element is refreshed; once in-flight drains below the
// gate or the ratio, the circuit closes and the element times out (or is
// removed at once when the Blocker can Unblock).
//
// The guard only works if the loop hits MinActive before the proxy hits its
// descriptor limit: CheckHeadroom compares the two (each looped connection
// costs the proxy two descriptors, the outbound half and the accepted half).
package loopguard

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"surflare-watchdog/src/config"
	"surflare-watchdog/src/detect"
	"surflare-watchdog/src/procscan"
)

// log is the subsystem logger, looked up at each use: one taken at package
// init would keep the default handler from before the program installed
// its own (lines would lose their level and attributes).
func log() *slog.Logger { return slog.Default().With("subsystem", "loopguard") }

// Defaults; also what MinActive 0 and Ratio <= 0 mean.
const (
	DefaultMinActive = 1000
	DefaultRatio     = 80
	// DefaultTTL is the timeout of the blocked element. Short, so a false
	// positive heals by itself; refreshed every TTL/3 while the loop lasts.
	DefaultTTL = 60 * time.Second
)

// Blocker adds addr . port to the loop guard's nft set with a timeout; the
// firewall package implements it. Adding an element that is there already
// must refresh its timeout.
type Blocker interface {
	Block(ctx context.Context, dst netip.AddrPort, ttl time.Duration) error
}

// Unblocker is optionally implemented by a Blocker that can remove an
// element before it times out.
type Unblocker interface {
	Unblock(ctx context.Context, dst netip.AddrPort) error
}

// Options configure a Guard.
type Options struct {
	MinActive int           // in-flight connections before the ratio is judged (1000; 0 = default; < 0 = guard off)
	Ratio     int           // percent of in-flight to one destination that opens the circuit (80; <= 0 = default)
	TTL       time.Duration // timeout of the blocked element (60 s; 0 = default)
	Blocker   Blocker       // required unless the guard is off
	Now       func() time.Time
}

// FromConfig takes MinActive and Ratio from the config's loopguard section
// (already resolved there: -1 = off).
func FromConfig(c *config.Config, b Blocker) Options {
	return Options{MinActive: c.LoopGuard.MinActive, Ratio: c.LoopGuard.Ratio, Blocker: b}
}

// State is the guard's view, for status output.
type State struct {
	Enabled  bool           `json:"enabled"`
	Open     bool           `json:"open"`
	Dst      netip.AddrPort `json:"dst,omitzero"`     // the blocked destination while open
	Since    time.Time      `json:"since,omitzero"`   // when it opened
	InFlight int            `json:"in_flight"`        // at the last sample
	Top      int            `json:"top"`              // connections to the busiest destination at the last judged sample
	Blocks   int            `json:"blocks"`           // circuits opened since start
	Err      string         `json:"error,omitempty"`  // the last Block failure
	Advice   string         `json:"advice,omitempty"` // headroom warning, if any
}

// Guard is the breaker. Observe is called from one goroutine (the
// detector's); State is safe from any.
type Guard struct {
	o         Options
	lastBlock time.Time

	mu sync.Mutex
	st State
}

// New checks o and fills defaults.
func New(o Options) (*Guard, error) {
	if o.MinActive == 0 {
		o.MinActive = DefaultMinActive
	}
	if o.Ratio <= 0 {
		o.Ratio = DefaultRatio
	}
	if o.Ratio > 100 {
		return nil, fmt.Errorf("loop guard: ratio %d%% is above 100", o.Ratio)
	}
	if o.TTL <= 0 {
		o.TTL = DefaultTTL
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MinActive > 0 && o.Blocker == nil {
		return nil, fmt.Errorf("loop guard: no blocker")
	}
	return &Guard{o: o, st: State{Enabled: o.MinActive > 0}}, nil
}

// Observe judges one sample of the proxy's sockets.
func (g *Guard) Observe(ctx context.Context, conns []detect.Conn) {
	// The cheap gate: sockets of every state are at least the in-flight
	// ones, so below MinActive nothing else needs looking at.
	if g.o.MinActive < 0 {
		return
	}
	if len(conns) < g.o.MinActive {
		g.settle(ctx, len(conns), 0, netip.AddrPort{})
		return
	}
	per := make(map[netip.AddrPort]int)
	inflight := 0
	var top netip.AddrPort
	for _, c := range conns {
		if !c.InFlight() {
			continue
		}
		inflight++
		d := c.Dst()
		per[d]++
		if per[d] > per[top] {
			top = d
		}
	}
	g.settle(ctx, inflight, per[top], top)
}

// settle opens, refreshes or closes the circuit for one judged sample.
func (g *Guard) settle(ctx context.Context, inflight, topN int, top netip.AddrPort) {
	now := g.o.Now()
	tripped := inflight >= g.o.MinActive && topN*100 > g.o.Ratio*inflight

	g.mu.Lock()
	st := g.st
	g.st.InFlight = inflight
	if inflight >= g.o.MinActive {
		g.st.Top = topN
	}
	g.mu.Unlock()

	if st.Open && (!tripped || st.Dst != top) {
		g.close(ctx, st.Dst, inflight)
		st.Open = false
	}
	if !tripped {
		return
	}
	if st.Open && now.Sub(g.lastBlock) < g.o.TTL/3 {
		return
	}
	err := g.o.Blocker.Block(ctx, top, g.o.TTL)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err != nil {
		first := g.st.Err == ""
		g.st.Err = err.Error()
		if first {
			log().Error(fmt.Sprintf("loopguard: cannot block %s: %v", top, err))
		}
		return
	}
	g.st.Err = ""
	g.lastBlock = now
	if !st.Open {
		g.st.Open, g.st.Dst, g.st.Since = true, top, now
		g.st.Blocks++
		log().Warn(fmt.Sprintf("loopguard: circuit open for %s (in-flight %d/%d, suspected proxy loop)", top, topN, inflight))
	}
}

func (g *Guard) close(ctx context.Context, dst netip.AddrPort, inflight int) {
	g.mu.Lock()
	g.st.Open, g.st.Dst, g.st.Since = false, netip.AddrPort{}, time.Time{}
	g.mu.Unlock()
	log().Info(fmt.Sprintf("loopguard: circuit closed for %s (in-flight %d)", dst, inflight))
	if u, ok := g.o.Blocker.(Unblocker); ok {
		if err := u.Unblock(ctx, dst); err != nil {
			log().Warn(fmt.Sprintf("loopguard: removing %s early failed (it times out by itself): %v", dst, err))
		}
	}
}

// State is a snapshot.
func (g *Guard) State() State {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.st
}

// CheckHeadroom says whether MinActive leaves the proxy enough descriptors:
// a loop costs two per connection, and the guard must trip while the proxy
// still has at least half of its limit free. nofile is the proxy's soft
// RLIMIT_NOFILE (-1 = unlimited). On a shortfall, advice says what to do.
func CheckHeadroom(minActive, nofile int) (ok bool, advice string) {
	if minActive < 0 || nofile < 0 {
		return true, ""
	}
	if minActive == 0 {
		minActive = DefaultMinActive
	}
	if 2*minActive <= nofile/2 {
		return true, ""
	}
	suggest := nofile / 5 / 50 * 50
	if suggest == 0 {
		suggest = max(1, nofile/5)
	}
	return false, fmt.Sprintf("loopguard: min_active %d needs ~%d descriptors but the proxy may open only %d: "+
		"a loop would exhaust them before the guard trips; set surflare.loopguard.min_active=%d or raise the proxy's nofile limit",
		minActive, 2*minActive, nofile, suggest)
}

// CheckProxyHeadroom reads the proxy's RLIMIT_NOFILE from /proc/PID/limits,
// logs a warning on a shortfall and keeps the advice in State.
func (g *Guard) CheckProxyHeadroom(pid int) (ok bool, err error) {
	u, err := procscan.Scanner{}.FDs(pid)
	if err != nil {
		return true, fmt.Errorf("loop guard headroom: %w", err)
	}
	ok, advice := CheckHeadroom(g.o.MinActive, u.Limit)
	g.mu.Lock()
	g.st.Advice = advice
	g.mu.Unlock()
	if !ok {
		log().Warn(advice)
	}
	return ok, nil
}
