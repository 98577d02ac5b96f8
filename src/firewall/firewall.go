package firewall

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"github.com/mdlayher/netlink/nltest"
	"golang.org/x/sys/unix"

	"surflare-watchdog/src/clock"
)

// Runner runs an external command with a bounded context and returns its
// combined output. The firewall needs exactly one: `fw4 reload`.
type Runner func(ctx context.Context, name string, args ...string) ([]byte, error)

// Firewall applies, inspects and removes our tables in one network namespace.
// Its methods are safe for concurrent use; changes are serialised.
type Firewall struct {
	netnsFD int // -1: the caller's namespace
	clock   clock.Clock
	runner  Runner
	log     *slog.Logger

	mu sync.Mutex // serialises batches
	// noLogRules: the kernel refused the log rules (no NFLOG logger), so
	// Apply leaves them out (nflog.go). Under mu.
	noLogRules bool
	// testDial stands in for the kernel's nftables socket (tests only).
	testDial nltest.Func

	// fw4 recovery rate limit (see fw4.go).
	fw4Mu         sync.Mutex
	lastFW4Reload time.Time
	fw4MinGap     time.Duration

	guardInterval time.Duration
	lastSpec      *Spec // last Spec applied successfully (for logs and Guard)

	// Guard's nftables monitor (guard.go): events seen, whether it runs,
	// periodic passes that had nothing to read back.
	nftEvents  atomic.Uint64
	monitoring atomic.Bool
	guardSkips atomic.Int64
	nftNotify  chan struct{} // NFTChanged

	// The routing layer's part (guard_routes.go): rtnetlink changes seen,
	// whether that monitor runs, idle passes that skipped the layer too.
	rtEvents     atomic.Uint64
	rtMonitoring atomic.Bool
	routeSkips   atomic.Int64
	guardFull    int // guardFullEvery, or a test's

	readMu   sync.Mutex
	readConn *nftables.Conn // the counters' socket (counters.go)
	fastMu   sync.Mutex
	fast     *counterDump // FastCounters' socket (counterdump.go)

	wanMu   sync.Mutex
	wanSeen map[string]bool // WAN devices of default routes seen (routing layer)
}

// Option configures a Firewall.
type Option func(*Firewall)

// WithNetNS works in the network namespace referenced by fd (tests, lab).
func WithNetNS(fd int) Option { return func(f *Firewall) { f.netnsFD = fd } }

// WithClock injects the time source.
func WithClock(c clock.Clock) Option { return func(f *Firewall) { f.clock = c } }

// WithRunner injects the command runner used for `fw4 reload`.
func WithRunner(r Runner) Option { return func(f *Firewall) { f.runner = r } }

// WithGuardInterval sets how often Guard re-checks everything even without
// events (default 5 s): the domestic-set sync, fw4's masquerade, drift.
func WithGuardInterval(d time.Duration) Option { return func(f *Firewall) { f.guardInterval = d } }

// WithFW4ReloadGap sets the minimum time between two `fw4 reload`s (default 60 s).
func WithFW4ReloadGap(d time.Duration) Option { return func(f *Firewall) { f.fw4MinGap = d } }

// New returns a Firewall for the caller's namespace unless told otherwise.
func New(opts ...Option) *Firewall {
	f := &Firewall{
		netnsFD:       -1,
		clock:         clock.Real{},
		log:           slog.Default().With("subsystem", "firewall"),
		guardInterval: 5 * time.Second,
		guardFull:     guardFullEvery,
		fw4MinGap:     time.Minute,
		nftNotify:     make(chan struct{}, 1),
	}
	for _, o := range opts {
		o(f)
	}
	return f
}

// batchBuffer is the socket buffer for our batches: a full chnroute load is
// several hundred kB, more than the default netlink buffers take.
const batchBuffer = 16 << 20

// conn opens a lasting nftables connection; callers CloseLasting it.
func (f *Firewall) conn() (*nftables.Conn, error) {
	opts := []nftables.ConnOption{nftables.AsLasting(), nftables.WithSockOptions(bigBuffers)}
	if f.netnsFD >= 0 {
		opts = append(opts, nftables.WithNetNSFd(f.netnsFD))
	}
	if f.testDial != nil {
		opts = append(opts, nftables.WithTestDial(f.testDial))
	}
	c, err := nftables.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("opening nftables netlink socket: %w", err)
	}
	return c, nil
}

// bigBuffers raises the socket buffers (forced, as root) and asks the kernel
// not to echo each request in its ack.
func bigBuffers(c *netlink.Conn) error {
	_ = c.SetOption(netlink.CapAcknowledge, true)
	rc, err := c.SyscallConn()
	if err != nil {
		return nil
	}
	var serr error
	_ = rc.Control(func(fd uintptr) {
		for _, o := range []int{unix.SO_SNDBUFFORCE, unix.SO_RCVBUFFORCE} {
			if e := unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, o, batchBuffer); e != nil {
				serr = e
			}
		}
	})
	if serr != nil { // not privileged: take what we may
		_ = c.SetWriteBuffer(batchBuffer)
		_ = c.SetReadBuffer(batchBuffer)
	}
	return nil
}
