// Package loopguard is a circuit breaker for a proxy that connects to
// itself. When the proxy's outbound sockets lose their 0xff mark (a vendor
// bug, a rule wiped at the wrong moment), its own traffic is captured by its
// tproxy rule again, every connection spawns another, and within a quarter
// of a second (lab, 1024 descriptors) the proxy runs out of descriptors and
// takes the whole LAN down with it.
//
// The guard watches the proxy's in-flight connections (established or
// opening, from a sock_diag sample), but only when there is reason to: the
// kernel wakes it. A rule of the kill switch (firewall/loopguard.go) logs
// the router's own new tunnel connections to an NFLOG group once they come
// faster than a token bucket sized from MinActive allows — which a loop
// does within milliseconds and nothing legitimate ever does — and Run waits
// on that group (package nflog; Options.Events). Woken, it checks at once
// and then every Fast (10 ms) while events keep coming or a circuit is
// open; otherwise it sleeps, apart from a safety check every Safety (2 s).
// A check is the cheap gate: the namespace's TCP sockets in use, one read
// of /proc/net/sockstat. Below MinActive that is all it does. At or above
// it, or while a circuit is open, it takes the full sample and judges it.
// Where NFLOG cannot be had (no nfnetlink_log; OpenWrt: kmod-nfnetlink-log)
// the guard says so once and checks the gate every Interval (100 ms)
// instead, which costs CPU at idle and sees a loop later.
//
//   - if one destination holds more than Ratio percent of the in-flight
//     connections that are not already blocked ("ratio over what remains"),
//     a circuit opens for it: addr . port goes into an nft set through the
//     injected Blocker, and the firewall resets the router's new unmarked
//     connections to it (the proxy's own 0xff sockets are exempt, so a
//     healthy proxy never feels the block); the looped sockets already open
//     are destroyed (sock_diag SOCK_DESTROY, Killer; in batches) so the
//     descriptors come back at once.
//
//   - a loop to one of the proxy's relays moves on to its other relays the
//     moment that relay is blocked: the proxy fails over, and every
//     failed-over connection is captured again. So when a circuit opens
//     for a relay endpoint, circuits open for its siblings too
//     (Options.Siblings; the daemon names the other relays it learned from
//     the proxy's own connections, at the same port), logged as "circuit
//     open for HOST:PORT (sibling of HOST2:PORT2: the proxy fails over
//     between its relays)". This costs nothing legitimate: the block only
//     resets the router's own NEW connections without the proxy's 0xff
//     mark, and the proxy's healthy relay sockets carry 0xff, so a sibling
//     circuit touches nothing but a loop. The account API is no relay (the
//     daemon learns relays on the vendor's server ports only) and so never
//     a sibling, and a destination that is not a relay has none. Each
//     sibling is a circuit of its own, with the same TTL and hold: nothing
//     loops to it, so it closes by itself after its hold. Siblings are
//     blocked after the looping relay is blocked and its sockets cut: under
//     a loop's load one Block is a 5-90 ms netlink round trip, and blocking
//     the siblings first kept the loop growing on the first relay that
//     long. Without siblings, the loop grew on the next relay for another
//     sample + block cycle (20-40 ms under load) before its own circuit
//     opened.
//
//     Lab figures (surflare-lab scenario proxy-loop --runs 6, gate 200,
//     1024 descriptors, two relays learned before the fault, a 10 s bug):
//     the proxy peaked at 334-833 descriptors (888 at most in six more
//     runs; never at the limit), the first circuit and its sibling opened
//     0.12-0.38 s after the fault, 0-0.1 s after the loop showed; both
//     closed 5.1-5.5 s after the fault (5 s hold), and the bug, still
//     there, tripped them again with a 10 s hold. The peaks above ~800
//     come when the guard's first full sample already sees ~500 in-flight:
//     how fast it wakes and samples bounds them, not the siblings. Before
//     siblings: 469-1019 over six runs, 1019 (0.003 s at the limit) in one.
//     Guard off: 1024 of 1024, at the limit for 8.3 s of the 10.3 s loop.
//
//   - each open circuit closes by itself once its own looped connections
//     have drained for Hold (5 s), which doubles each time the same
//     destination trips again soon after closing, up to TTL: a bug that
//     lasts is probed less and less often, a one-off heals in seconds.
//     While open, the nft element is refreshed every TTL/3, and it carries
//     a TTL so a daemon that dies never leaves a block behind for long.
//
// Not done, on purpose: a kernel rule rejecting the router's 0x1-marked TCP
// to relay endpoints would stop this loop at its first packet, but the
// kill switch's endpoints set mixes relays with the account API (which the
// vendor CLI legitimately reaches through the tunnel, 0x1), and a rule that
// stays armed with the guard off (min_active < 0) would make the guard's
// negative control unable to fail. The guard's block is that rule, scoped
// to the destinations that actually loop.
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
	"surflare-watchdog/src/detectors/detect"
	"surflare-watchdog/src/procscan"
)

// log is the subsystem logger, looked up at each use: one taken at package
// init would keep the default handler from before the program installed
// its own (lines would lose their level and attributes).
func log() *slog.Logger { return slog.Default().With("subsystem", "loopguard") }

// Defaults; also what the zero value of each Option means.
const (
	DefaultMinActive = 1000
	DefaultRatio     = 80
	// DefaultTTL is the timeout of a blocked element and the longest a
	// circuit's hold grows to. Short, so a false positive heals by itself;
	// refreshed every TTL/3 while the circuit is open.
	DefaultTTL = 60 * time.Second
	// DefaultInterval is Run's period without kernel events: fast enough
	// to act within a few hundred milliseconds of a loop (which exhausts
	// 1024 descriptors in ~0.25 s), cheap enough below the gate (one small
	// procfs read, ~25 µs, but the wake-ups cost more than the read: the
	// bench measured ~15 s of daemon CPU an hour for a 25 ms period).
	DefaultInterval = 100 * time.Millisecond
	// DefaultFast is the pace of checks once the kernel has woken the
	// guard: a loop adds ~4000 in-flight sockets a second, so between two
	// checks it grows by ~40 — a fifth of the lab's gate of 200.
	DefaultFast = 10 * time.Millisecond
	// DefaultLinger is how long the fast pace lasts after the last
	// wake-up: the wake-up rule stops logging once new connections fall
	// back under its rate, which a loop the block has cut does at once.
	DefaultLinger = 250 * time.Millisecond
	// DefaultSafety is the period of the safety check with kernel events:
	// what the wake-up rule cannot see (in-flight connections that crept
	// up slowly, e.g. a bulk LAN workload) is judged within 2 s.
	DefaultSafety = 2 * time.Second
	// DefaultHold is how long a circuit stays open after its looped
	// connections drained, the first time; it doubles on each re-trip of
	// the same destination within TTL of closing, up to TTL.
	DefaultHold = 5 * time.Second
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

// Killer destroys one TCP socket by its tuple (sock_diag SOCK_DESTROY;
// route.SocketKiller is the real one). A socket that is already gone is not an
// error worth reporting.
type Killer interface {
	Kill(local, remote netip.AddrPort) error
}

// BatchKiller is optionally implemented by a Killer that destroys many
// sockets at once (route.SocketKiller): a loop leaves hundreds. It returns how many
// are gone (destroyed or gone already) and the first other failure.
type BatchKiller interface {
	KillAll(socks [][2]netip.AddrPort) (int, error)
}

// Sampler lists the proxy's sockets (detect.ProxySampler).
type Sampler interface {
	Sample(ctx context.Context) ([]detect.Conn, error)
}

// Gauge is the cheap count Run checks against MinActive before it takes a
// full sample; it must never be below the proxy's in-flight connections
// (SockstatGauge: every TCP socket in use in the namespace).
type Gauge func() (int, error)

// Options configure a Guard.
type Options struct {
	MinActive int           // in-flight connections before the ratio is judged (1000; 0 = default; < 0 = guard off)
	Ratio     int           // percent of the unblocked in-flight to one destination that opens a circuit (80; <= 0 = default)
	TTL       time.Duration // timeout of a blocked element, cap of the hold (60 s; 0 = default)
	Hold      time.Duration // first hold after draining (5 s; 0 = default)
	Blocker   Blocker       // required unless the guard is off
	Killer    Killer        // optional: without it looped sockets stay until the proxy's own timeout
	// Siblings names the destinations a loop moves on to once dst is
	// blocked: the other endpoints of the proxy's relays when dst is one,
	// nothing otherwise (nil = none). Their circuits open with dst's.
	Siblings func(dst netip.AddrPort) []netip.AddrPort
	// Run's inputs: the full sample, the cheap gauge (nil = SockstatGauge
	// on /proc/net/sockstat) and the period without events (100 ms; 0 =
	// default).
	Sampler  Sampler
	Gauge    Gauge
	Interval time.Duration
	// Events wakes Run when the kernel sees a flood of new tunnel
	// connections (KernelEvents; nil = none, check every Interval). Fast,
	// Linger and Safety shape the checks it wakes (10 ms, 250 ms, 2 s; 0 =
	// default).
	Events <-chan struct{}
	Fast   time.Duration
	Linger time.Duration
	Safety time.Duration
	Now    func() time.Time
	After  func(time.Duration) <-chan time.Time
}

// How Run is woken, for status output.
const (
	ModeEvents = "events" // by the kernel's NFLOG wake-ups, plus a slow safety check
	ModePoll   = "poll"   // by a timer every Interval
)

// FromConfig takes MinActive and Ratio from the config's loopguard section
// (already resolved there: -1 = off).
func FromConfig(c *config.Config, b Blocker) Options {
	return Options{MinActive: c.LoopGuard.MinActive, Ratio: c.LoopGuard.Ratio, Blocker: b}
}

// Circuit is one blocked destination.
type Circuit struct {
	Dst netip.AddrPort `json:"dst"`
	// SiblingOf is the relay endpoint whose circuit opened this one
	// (Options.Siblings); zero for a circuit its own loop opened.
	SiblingOf netip.AddrPort `json:"sibling_of,omitzero"`
	Since     time.Time      `json:"since"`
	Looped    int            `json:"looped"` // looped connections to it at the last sample
	Cut       int            `json:"cut"`    // looped sockets destroyed since it opened
	HoldS     float64        `json:"hold_s"` // how long it stays open once drained
}

// State is the guard's view, for status output.
type State struct {
	Enabled  bool           `json:"enabled"`
	Open     bool           `json:"open"`               // at least one circuit is open
	Dst      netip.AddrPort `json:"dst,omitzero"`       // the most recently opened circuit's destination
	Since    time.Time      `json:"since,omitzero"`     // when the oldest open circuit opened
	Circuits []Circuit      `json:"circuits,omitempty"` // every open circuit, oldest first
	InFlight int            `json:"in_flight"`          // at the last sample (or the gauge's count below the gate)
	Top      int            `json:"top"`                // connections to the busiest destination not yet blocked, at the last judged sample
	Blocks   int            `json:"blocks"`             // circuits opened since start
	Cut      int            `json:"cut"`                // looped sockets destroyed since start
	Err      string         `json:"error,omitempty"`    // the last Block or sample failure
	Advice   string         `json:"advice,omitempty"`   // headroom warning, if any
	Mode     string         `json:"mode,omitempty"`     // how Run is woken (ModeEvents, ModePoll); empty before Run
	Checks   uint64         `json:"checks"`             // gate checks since start (each one read of the gauge at most)
}

// circuit is an open circuit's bookkeeping (Observe's goroutine only).
type circuit struct {
	Circuit
	hold      time.Duration
	lastBlock time.Time
	drained   time.Time // since when its looped connections are below the drain level; zero = not drained
}

// history remembers a closed circuit's hold, so a destination that trips
// again soon after is held twice as long.
type history struct {
	hold   time.Duration
	closed time.Time
}

// Guard is the breaker. Run, Tick and Observe are called from one
// goroutine; State is safe from any.
type Guard struct {
	o        Options
	circuits map[netip.AddrPort]*circuit
	past     map[netip.AddrPort]history
	// sampleErr: st.Err is Tick's (cleared by its next good sample).
	sampleErr bool

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
	if o.Hold <= 0 {
		o.Hold = DefaultHold
	}
	o.Hold = min(o.Hold, o.TTL)
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Fast <= 0 {
		o.Fast = DefaultFast
	}
	if o.Linger <= 0 {
		o.Linger = DefaultLinger
	}
	if o.Safety <= 0 {
		o.Safety = DefaultSafety
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.After == nil {
		o.After = time.After
	}
	if o.Gauge == nil {
		o.Gauge = SockstatGauge(DefaultSockstat)
	}
	if o.MinActive > 0 && o.Blocker == nil {
		return nil, fmt.Errorf("loop guard: no blocker")
	}
	return &Guard{o: o, circuits: map[netip.AddrPort]*circuit{}, past: map[netip.AddrPort]history{},
		st: State{Enabled: o.MinActive > 0}}, nil
}

// State is a snapshot.
func (g *Guard) State() State {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.st
	st.Circuits = append([]Circuit(nil), g.st.Circuits...)
	return st
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
