// Package health decides whether the VPN works, in two layers.
//
// Layer 1 (local) checks the plumbing without touching the network: the
// vendor proxy process is alive (a /proc scan by comm), the vendor's nftables
// table exists and the fwmark policy rule exists. Each comes through a small
// interface so the daemon plugs in procscan, firewall and route, and tests
// plug in fakes; nothing here forks a process.
//
// Layer 2 (network) runs the tunnel probes (by default 6: search, 2 CDN
// traces, 3 IP echoes) in parallel through the tunnel path — the first
// success proves the tunnel, and the first success that names an exit gives
// the exit IP and country — and, independently and at the same time, probe 7
// on the LAN/proxy path. Every probe dials through the Dialer of the path it
// claims to test, so a fault only one path has is seen only by that path's
// probe. HTTP clients ignore proxy environment variables and never reuse
// connections between checks.
//
// Evaluation, in order (the result's Reason says which rule fired):
//
//	layer 1 failed                                  -> LOCAL_FAIL
//	probe 7 failed (or, with no probe 7, the tunnel probes failed):
//	  run the egress check (3 targets x 2 retries, TCP connects straight out of
//	  the WAN, bypassing the tunnel) and then
//	  tunnel probes succeeded                       -> PROXY_BROKEN (only the LAN path is broken)
//	  tunnel probes failed, egress works            -> PROXY_BROKEN (node/relay/proxy broken)
//	  tunnel probes failed, egress fails too        -> LOCAL_FAIL with WANDown (the ISP link is down;
//	                                                   rotating nodes cannot help)
//	probe 7 succeeded, every tunnel probe failed    -> TUNNEL_OK (LAN clients are served; the
//	                                                   router's own probes are not)
//	both succeeded, exit is domestic (country equals the domestic country, or the
//	exit IP is our ISP address): wait ConfirmDelay (3 s), ask the exit again,
//	  still domestic                                -> DOMESTIC_EXIT
//	  otherwise                                     -> OK
//
// Which tunnel probes count and whether the exit is judged at all depends on
// the vendor's mode (Judging): in rule mode only probes on the vendor's list
// prove the tunnel and judge the exit, since the vendor sends everything else
// direct; in direct mode nothing is judged. Result.ExitCheck says which.
//
// OK and TUNNEL_OK are healthy; the watchdog counts the others as failures.
package health

import (
	"context"
	"net"
	"net/netip"
	"time"
)

// Outcome is the verdict of one check.
type Outcome string

// The five verdicts.
const (
	OK           Outcome = "OK"
	TunnelOK     Outcome = "TUNNEL_OK"
	DomesticExit Outcome = "DOMESTIC_EXIT"
	ProxyBroken  Outcome = "PROXY_BROKEN"
	LocalFail    Outcome = "LOCAL_FAIL"
)

// Healthy reports whether LAN clients are being served through the tunnel.
func (o Outcome) Healthy() bool { return o == OK || o == TunnelOK }

// Kind is what a probe target answers and how its answer is read.
type Kind string

// Probe kinds, as written in the config's `probe` sections.
const (
	KindSearch    Kind = "search"     // any 2xx (generate_204)
	KindCDNTrace  Kind = "cdn-trace"  // /cdn-cgi/trace: ip= and loc= lines
	KindIPEcho    Kind = "ip-echo"    // JSON with ip and country, or a bare IP
	KindProxyPath Kind = "proxy-path" // probe 7: any 2xx through the proxy path
)

// Path is the route a probe's packets take.
type Path string

// The three paths.
const (
	PathTunnel Path = "tunnel" // the router's own traffic, marked into the tunnel
	PathProxy  Path = "proxy"  // the LAN clients' path into the proxy (probe 7)
	PathEgress Path = "egress" // straight out of the WAN, bypassing the tunnel
)

// Target is one probe.
type Target struct {
	Name string `json:"name"`
	URL  string `json:"url"`
	Kind Kind   `json:"kind"`
	// Listed: the vendor's rule-mode list covers this target, so in rule
	// mode it goes through the tunnel (see Judging).
	Listed bool `json:"listed,omitempty"`
}

// Judging says which tunnel probes prove the tunnel and whose exit is
// judged, by the vendor's mode (JudgingFor). Every probe still runs and is
// reported; a probe that does not prove the tunnel is shown, not counted.
type Judging int

const (
	// JudgeAll (mode global): the vendor tunnels everything, so every
	// tunnel probe proves the tunnel and a domestic exit is a fault.
	JudgeAll Judging = iota
	// JudgeListed (mode rule): the vendor tunnels only its own list and
	// sends the rest direct, foreign sites included (E3), so a probe off
	// the list exits domestically by design. Only Listed probes prove the
	// tunnel and have their exit judged; with none listed every probe
	// proves only that the proxy serves, and the exit is not judged (the
	// result's ExitCheck says so).
	JudgeListed
	// JudgeNone (mode direct): the vendor sends everything direct; every
	// probe proves the proxy serves, the exit is the ISP's by choice and
	// is not judged.
	JudgeNone
)

// JudgingFor is the one place the exit check is decided per mode: the
// vendor's --mode as the config spells it ("" and unknown = global's
// strictness, which never hides a fault).
func JudgingFor(mode string) Judging {
	switch mode {
	case "rule":
		return JudgeListed
	case "direct":
		return JudgeNone
	}
	return JudgeAll
}

// ProbeResult is one probe's answer.
type ProbeResult struct {
	Name      string `json:"name"`
	Kind      Kind   `json:"kind"`
	Path      Path   `json:"path"`
	Target    string `json:"target"`
	OK        bool   `json:"ok"`
	Status    int    `json:"status,omitempty"`
	Error     string `json:"error,omitempty"`
	LatencyMS int64  `json:"latency_ms"`
	ExitIP    string `json:"exit_ip,omitempty"`
	Country   string `json:"country,omitempty"`
	// Skipped: cancelled because the check already had its answer.
	Skipped bool `json:"skipped,omitempty"`
}

// Local is the layer-1 verdict.
type Local struct {
	ProxyAlive bool `json:"proxy_alive"`
	// ProxyNotListening: the proxy runs but nothing listens on its port
	// yet (E6: `connect --daemon` may return before the proxy is up).
	ProxyNotListening bool     `json:"proxy_not_listening,omitempty"`
	VendorTable       bool     `json:"vendor_table"`
	FwmarkRule        bool     `json:"fwmark_rule"`
	Errors            []string `json:"errors,omitempty"`
}

// OK reports whether every local check passed.
func (l Local) OK() bool {
	return l.ProxyAlive && !l.ProxyNotListening && l.VendorTable && l.FwmarkRule
}

// Result is one full check.
type Result struct {
	Outcome     Outcome       `json:"outcome"`
	Reason      string        `json:"reason"`
	At          time.Time     `json:"at"`
	DurationMS  int64         `json:"duration_ms"`
	Local       Local         `json:"local"`
	Tunnel      []ProbeResult `json:"tunnel,omitempty"`
	Proxy       *ProbeResult  `json:"proxy,omitempty"`
	Egress      []ProbeResult `json:"egress,omitempty"`
	TunnelUp    bool          `json:"tunnel_up"`
	WANDown     bool          `json:"wan_down,omitempty"`
	ExitIP      string        `json:"exit_ip,omitempty"`
	ExitCountry string        `json:"exit_country,omitempty"`
	// Confirmed: a domestic exit was seen and checked again.
	Confirmed bool `json:"confirmed,omitempty"`
	// ExitCheck says how the exit was judged in this mode (Judging):
	// which probes judged it, or why it was not judged. Empty when the
	// check did not get that far.
	ExitCheck string `json:"exit_check,omitempty"`
}

// Dialer opens connections along one path; *net.Dialer satisfies it.
type Dialer interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// ProcessChecker tells whether a process by that name is alive
// (procscan.Scanner satisfies it).
type ProcessChecker interface {
	Alive(name string) (bool, error)
}

// TableChecker tells whether the vendor's nftables table exists.
type TableChecker interface {
	VendorTableExists(ctx context.Context) (bool, error)
}

// ListenChecker tells whether the proxy's port has a listener.
type ListenChecker interface {
	ProxyListening(ctx context.Context) (bool, error)
}

// RuleChecker tells whether the fwmark policy rule exists.
type RuleChecker interface {
	FwmarkRuleExists(ctx context.Context) (bool, error)
}

// Config holds what the checks probe. Zero durations and counts take the
// defaults below.
type Config struct {
	// Targets are the tunnel probes (search, cdn-trace, ip-echo) and at most
	// one proxy-path probe (probe 7).
	Targets []Target
	// EgressTargets are host:port TCP endpoints reachable straight out of
	// the WAN (for example domestic DNS servers on :53).
	EgressTargets   []string
	EgressRetries   int           // attempts per egress target; default 2
	ProbeTimeout    time.Duration // default 5 s
	EgressTimeout   time.Duration // default 3 s
	ConfirmDelay    time.Duration // default 3 s
	DomesticCountry string        // default "CN"
	ProxyName       string        // comm of the vendor proxy; default "surflare-proxy"
	// Judging is how the vendor's mode shapes the exit check (JudgingFor);
	// the zero value judges every probe, as mode global does.
	Judging Judging
}

// Defaults.
const (
	DefaultProbeTimeout    = 5 * time.Second
	DefaultEgressTimeout   = 3 * time.Second
	DefaultConfirmDelay    = 3 * time.Second
	DefaultEgressRetries   = 2
	DefaultDomesticCountry = "CN"
	DefaultProxyName       = "surflare-proxy"
)

// Deps are the paths and local views a Checker uses. A nil local checker is
// skipped (counted as passing); a nil Tunnel or Egress dialer is a plain
// net.Dialer; a nil Proxy dialer means there is no probe 7 (laptop role).
type Deps struct {
	Tunnel, Proxy, Egress Dialer
	Procs                 ProcessChecker
	Table                 TableChecker
	Rule                  RuleChecker
	Listen                ListenChecker // nil: not checked
	// ISPAddr returns the WAN address found at startup (invalid if unknown):
	// an exit equal to it is our own ISP, whatever a geo database says.
	ISPAddr func() netip.Addr
	// After is the clock used for the domestic-exit confirmation delay.
	After func(time.Duration) <-chan time.Time
	// Now stamps results.
	Now func() time.Time
}
