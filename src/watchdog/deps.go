package watchdog

import (
	"context"
	"net/netip"
	"time"

	"surflare-watchdog/src/clock"
	"surflare-watchdog/src/health"
	"surflare-watchdog/src/surflare"
)

// Vendor is the Surflare CLI (surflare.Client satisfies it).
type Vendor interface {
	Status(ctx context.Context) (surflare.Status, error)
	Connect(ctx context.Context, node, mode, transit string) error
	Disconnect(ctx context.Context) error
	Login(ctx context.Context) error
}

// Firewall is the kernel side of the engine's firewall mode.
type Firewall interface {
	// Set makes the tables match mode (firewallmode.go); calling it again
	// with the same mode re-applies it.
	Set(ctx context.Context, mode FirewallMode) error
	// FlushVendor removes what the vendor left: its table, its fwmark
	// rule(s) and the table-100 route (a half-up disconnect leaves them).
	FlushVendor(ctx context.Context) error
}

// Prober runs health checks (health.Checker satisfies it).
type Prober interface {
	// Local is layer 1 only, polled quickly during connect phase 1.
	Local(ctx context.Context) health.Result
	// Check is both layers.
	Check(ctx context.Context) health.Result
}

// NodeHealth is the proxy log's per node/transit urltest error count (the
// signals package's log-health reader). updated is when the data was
// produced; ok is false when there is no entry.
type NodeHealth interface {
	Errors(node, transit string) (count int, updated time.Time, ok bool)
}

// ConnKiller cuts the connections still pinned to the node we just left
// (conntrack delete or sock_destroy), so LAN clients reconnect at once
// through the new node instead of hanging on a dead path.
type ConnKiller interface {
	CutConnections(ctx context.Context, oldNode string) error
}

// Network answers questions about the router's own uplink.
type Network interface {
	// ISPAddr is the WAN address the ISP gave us: an exit equal to it is a
	// domestic exit.
	ISPAddr(ctx context.Context) (netip.Addr, error)
}

// DetectorState is one detector's current view (early detector, log health,
// 503 monitor), shown in Status.
type DetectorState struct {
	Name   string    `json:"name"`
	State  string    `json:"state"`
	Detail string    `json:"detail,omitempty"`
	Since  time.Time `json:"since,omitempty"`
}

// DetectorSource reports detector states for Status.
type DetectorSource interface {
	DetectorStates() []DetectorState
}

// Override can veto a check the probes passed: the 503 storm monitor
// (storm503.Monitor behind an adapter in cmd) knows the exit is overloaded
// while a cached or lighter path still answers the probes. While it is
// active, a healthy check counts as failed and the watchdog reconnects
// ("G2: 503 storm override"); the reconnect rate limit bounds how often.
type Override interface {
	// Override reports whether a healthy check is to be overridden now,
	// with a short reason for the log.
	Override(now time.Time) (reason string, active bool)
}

// NodeResolver turns a node name as a person typed it into the vendor's
// tag, checked against `surflare nodes` and the candidates (a
// surflare.NodeCache satisfies it). An unknown name is a
// *surflare.UnknownNodeError.
type NodeResolver interface {
	Resolve(ctx context.Context, input string, candidates []string) (string, error)
}

// Releaser is the instance lock and pid file (runfiles.Lock satisfies it),
// released as the very last step of a stop.
type Releaser interface {
	Release() error
}

// Step is one crash-cleanup step run at startup, in order; a failing step
// is logged and the next one still runs.
type Step struct {
	Name string
	Run  func(ctx context.Context) error
}

// Deps are the watchdog's collaborators. Vendor, Firewall and Prober are
// required; the rest may be nil.
type Deps struct {
	Vendor     Vendor
	Firewall   Firewall
	Prober     Prober
	NodeHealth NodeHealth
	ConnKiller ConnKiller
	Network    Network
	Detectors  DetectorSource
	// Inbox, if set, carries the detectors' requests for a check.
	Inbox    *Inbox
	Override Override
	// Corroborator, if set, lets a failed check below the threshold rotate
	// when a strong signal names the current node (see "Fast recovery").
	Corroborator Corroborator
	// Nodes, if set, checks the node a user rotates to; without it the
	// name must be a candidate (or auto).
	Nodes NodeResolver
	Lock  Releaser
	Clock clock.Clock
	// Cleanup is the crash cleanup run before the kill switch is armed.
	Cleanup []Step
	// Preflight, if set, finds local causes that stop every node
	// (preflight.go); without it nothing is ever blocked.
	Preflight Preflighter
	// LoadSettings re-reads the config for SIGHUP / Reload without args.
	LoadSettings func() (Settings, error)
	// TunnelIntact, if set, reports whether the kernel holds the whole
	// tunnel a previous instance verified (the vendor's table, its
	// routing, a listening proxy, the LAN tproxy live), with why in a few
	// words; a restart adopts such a tunnel when it proves healthy
	// (adopt.go). Without it every start reconnects.
	TunnelIntact func(ctx context.Context) (bool, string)
}
