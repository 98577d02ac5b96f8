// Package config is the typed model of /etc/config/surflare: every knob the
// watchdog has, with its default, parsed from UCI and validated so that a user
// sees every mistake at once as FILE:LINE: section.option: message.
//
// The Go structure mirrors the UCI file one to one: the UCI path
// surflare.SECTION.OPTION is Config.Section.Option in Go (for example
// surflare.main.check_interval is Config.Main.CheckInterval and
// surflare.loopguard.ratio is Config.LoopGuard.Ratio). Repeated sections
// (config probe, config bypass) become slices. Durations are time.Duration,
// addresses netip types, MACs net.HardwareAddr, so callers never parse strings.
//
// The option tables in schema.go are the single description of the file:
// parsing, the canonical text written by Format and the JSON of MarshalJSON
// are all driven by them.
package config

import (
	"net"
	"net/netip"
	"os"
	"regexp"
	"time"
)

// DefaultPath is where OpenWrt keeps the watchdog's UCI file.
const DefaultPath = "/etc/config/surflare"

// OpenWrtRelease exists on every OpenWrt system; role "auto" resolves to
// router when it is there.
const OpenWrtRelease = "/etc/openwrt_release"

// Mode is the vendor's routing mode, passed as `surflare connect --mode`
// (SURFLARE-CONTRACT E2). It is the vendor's split, not ours: in every mode
// the watchdog itself sends private, bypassed and domestic (cn_direct)
// destinations direct and hands the rest to the proxy; the mode says what
// the proxy then does with it (docs/modes.md has the table).
type Mode string

// Modes.
const (
	// ModeRule ("Smart Routing"): the proxy tunnels only the destinations on
	// the vendor's own list and sends everything else direct through its
	// 0xff sockets, foreign sites included (E3).
	ModeRule Mode = "rule"
	// ModeGlobal: the proxy tunnels everything it gets.
	ModeGlobal Mode = "global"
	// ModeDirect: the proxy sends everything direct; the tunnel carries
	// nothing (E2). Chosen by a user who wants the vendor's client running
	// without using it.
	ModeDirect Mode = "direct"
)

// Role says whether the watchdog guards a router's LAN or only its own host.
type Role string

// Roles.
const (
	RoleRouter Role = "router" // LAN tables (tproxy, DNS enforcement) and a forward kill switch
	RoleLaptop Role = "laptop" // only the host's own traffic: no LAN tables
	RoleAuto   Role = "auto"   // router when /etc/openwrt_release exists, else laptop
)

// Resolve turns RoleAuto into router or laptop by looking for the OpenWrt
// release file (pass OpenWrtRelease; tests pass their own path).
func (r Role) Resolve(releaseFile string) Role {
	if r != RoleAuto {
		return r
	}
	if _, err := os.Stat(releaseFile); err == nil {
		return RoleRouter
	}
	return RoleLaptop
}

// IPv6Policy says what happens to IPv6 that would bypass the tunnel. Either
// way it never leaks.
type IPv6Policy string

// IPv6 policies.
const (
	IPv6Block IPv6Policy = "block" // the kill switch drops it (safe default)
	IPv6Proxy IPv6Policy = "proxy" // it is sent through the tunnel like IPv4
)

// LoginMode is how the password reaches `surflare login`.
type LoginMode string

// Login modes.
const (
	LoginPTY  LoginMode = "pty"  // answer the Password: prompt on a pseudo-terminal: never in argv
	LoginArgv LoginMode = "argv" // pass -p PASSWORD (visible in /proc while it runs; fallback only)
)

// ProbeKind is what a probe target answers and which path it tests.
type ProbeKind string

// Probe kinds.
const (
	ProbeSearch    ProbeKind = "search"     // any 2xx through the tunnel
	ProbeCDNTrace  ProbeKind = "cdn-trace"  // Cloudflare-style ip=/loc= lines: exit IP and country
	ProbeIPEcho    ProbeKind = "ip-echo"    // JSON with the caller's address and country
	ProbeProxyPath ProbeKind = "proxy-path" // fetched through the LAN/proxy path (probe 7)
)

// Tunnel reports whether the probe is one of the parallel tunnel probes
// (first success wins), as opposed to the independent proxy-path probe.
func (k ProbeKind) Tunnel() bool { return k != ProbeProxyPath }

// Config is the whole /etc/config/surflare.
type Config struct {
	Main       Main       // config surflare 'main'
	Storm503   Storm503   // config storm503 'storm503'
	Auth       Auth       // config auth 'auth'
	Detector   Detector   // config detector 'detector'
	LogHealth  LogHealth  // config loghealth 'loghealth'
	FastSignal FastSignal // config fastsignal 'fastsignal'
	Probes     []Probe    // config probe (repeated; the file's list replaces the defaults)
	Bypass     []Bypass   // config bypass (repeated)
	LoopGuard  LoopGuard  // config loopguard 'loopguard'
	Paths      Paths      // config paths 'paths'
	Web        Web        // config web 'web'
	DNS        DNS        // config dns 'dns'
	Keepalive  Keepalive  // config keepalive 'keepalive'
	Vendor     Vendor     // config vendor 'vendor'
}

// Main holds the supervisor's own settings: section `config surflare 'main'`.
type Main struct {
	Enabled    bool
	Mode       Mode
	Role       Role
	Node       string   // preferred node; the one connected at start
	Candidates []string // rotation order (list candidate)
	Transit    string   // relay choice passed to connect; "auto" lets the vendor pick

	CheckInterval     time.Duration // between health checks while healthy
	DegradedInterval  time.Duration // between health checks after a failure
	FailThreshold     int           // consecutive failed checks before a reconnect
	HeartbeatInterval time.Duration // "VPN healthy: exit=US" log line; 0 = never
	IdleProbeInterval time.Duration // one request through an idle tunnel this often; 0 = never (docs/idle-probe.md)

	StormCooldown   time.Duration // pause after every candidate failed
	ReconnectWindow time.Duration // reconnect rate limit: the longest backoff (its 1/20 is the first)
	ReconnectLimit  int           // automatic attempts in a row before the backoff; 0 = no limit
	CascadeAfter    int           // failed reconnects before fast rotation

	ConnectLocalTimeout     time.Duration // connect phase 1: local state up
	ConnectDataplaneTimeout time.Duration // connect phase 2: probes succeed
	DomesticConfirm         time.Duration // delay before a DOMESTIC_EXIT is confirmed
	ProbeTimeout            time.Duration // one probe request

	// LoginRefresh is how often the login is renewed while the tunnel is
	// healthy (0 = never). Behind the GFW the account API answers only
	// through the tunnel (E9), so a token that expires while connected
	// cannot be renewed after the tunnel is lost: refresh it before.
	LoginRefresh time.Duration

	FailOpen        bool // after repeated login failure, open the kill switch (default: stay closed)
	StrictDirect    bool // mode global: the proxy's 0xff traffic only to relays, API, private, domestic, DNS upstreams, server ports (default on; firewall/strict.go); rule/direct: nothing narrowed (docs/modes.md)
	RouteLayer      bool // ip rules that keep unmarked traffic off the WAN while nftables is empty (fw4 flush; default on; docs/killswitch-layers.md)
	IPv6            IPv6Policy
	ExpectedCountry string // exit country of a healthy tunnel (informational: exits such as Tokyo/JP are valid, E1; nothing rotates on it)
	DomesticCountry string // exit country that means traffic left without the tunnel

	// StrictDirectRule narrows in mode rule too (default off): only for a
	// client whose rule mode sends nothing foreign direct (the original
	// contract); with one that does (E3) foreign sites off its list fail.
	StrictDirectRule bool

	Username     string // account e-mail for login (the password lives elsewhere)
	LANInterface string // router LAN bridge
	WANDevice    string // "" = detect from the default route
	// TransitCandidates are the vendor's relay (transit) names the engine may
	// switch to before giving up on a node; empty = learn them from the
	// proxy log.
	TransitCandidates []string
	// WANInterfaces are the logical netifd interfaces (hotplug INTERFACE)
	// that are the uplink: their ifdown/ifup pause and resume supervision.
	WANInterfaces []string

	LANSubnets []netip.Prefix // "" = taken from the LAN interface
	Private    []netip.Prefix // never proxied, never blocked
	Endpoints  []netip.Prefix // extra addresses allowed through the kill switch while reconnecting
}

// Storm503 is the 503 override: a burst of HTTP 503 from the exit means the
// node is overloaded even when probes pass.
type Storm503 struct {
	Enabled      bool          // 0 = no monitor: 503s never trigger a check or veto a passing probe
	Count        int           // 503s within Window that trigger it
	Window       time.Duration // counting window
	ActiveWindow time.Duration // how recent the last 503 must be for the storm to count as ongoing
	// ProbeInterval is the 503 probe's cadence (0 = off): our own request
	// for ProbeURL through the tunnel, so a storm is seen whatever the
	// vendor's urltest cadence (issue 19; docs/storm503-probe.md).
	ProbeInterval time.Duration
	ProbeURL      string // the connectivity endpoint the vendor's urltest asks for
}

// Auth controls reactive login.
type Auth struct {
	LoginRetries         int           // attempts per episode
	LoginBackoffMin      time.Duration // first retry delay; doubles each time
	LoginBackoffMax      time.Duration // cap of the delay
	FailOpenAfter        int           // global login failures before fail-open (if Main.FailOpen)
	SubscriptionCooldown time.Duration // no login attempts after "subscription not active"
	LoginMode            LoginMode
	LoginTimeout         time.Duration // one login call, killed after this

	// Substrings of vendor output (SURFLARE-CONTRACT.md) that classify it.
	AuthNeeded           []string // `surflare status`: login required
	SubscriptionInactive []string // `surflare status`: no subscription, cool down
	LoginFatal           []string // `surflare login`: stop retrying
}

// Detector is the early detector: TCP health of tunnel sockets (tcp_info)
// that notices a black-holed path before the probes do.
type Detector struct {
	Enabled   bool
	Interval  time.Duration // sampling period
	Threshold int           // score that triggers an early check
	Cooldown  time.Duration // after a trigger, before the next one
}

// LogHealth reads the proxy's urltest errors per node/transit from
// Paths.ProxyLog.
type LogHealth struct {
	Enabled   bool
	Window    time.Duration  // errors counted over this window
	Threshold int            // more errors than this in Window = node dead
	Tail      int64          // bytes read from the end of the log, at most
	Stale     time.Duration  // older health data is ignored (all healthy)
	Pattern   *regexp.Regexp // an urltest error line; named groups node and transit
}

// FastSignal switches the fast signals (package fastsignal): cheap events
// that ask the engine for a check at once instead of waiting for the next
// interval, and whose evidence lets a single failed check rotate. They are
// on by default; the switches exist so that a signal that misbehaves on
// some router can be turned off alone, and so that the benchmark's baseline
// can run without any early signal. Enabled = false turns off all three.
type FastSignal struct {
	Enabled   bool // 0 = none of the three runs, whatever they say
	ProxyExit bool // the proxy's exit, watched through a pidfd (else found by the next check)
	NodeLog   bool // the current node's urltest errors of the last seconds (fed by log health: needs loghealth.enabled)
	Counters  bool // jumps of the kill switch's drop, strict direct's refusal and the moat's relay RST counters
	// ConnFail: failed LAN connections the proxy logs at ERROR (stock
	// sing-box does; package detectors/connfail), read by log health's
	// reader: a dead node shows within one connection timeout of LAN
	// traffic, whatever the vendor's urltest cadence. Needs loghealth.
	ConnFail bool
	// ConnFailPatterns replace the stock sing-box patterns (named groups
	// error, and optionally outbound and dest).
	ConnFailPatterns []string
}

// ConnFailOn reports whether failed proxied connections are a fast signal.
func (f FastSignal) ConnFailOn() bool { return f.Enabled && f.ConnFail }

// ProxyExitOn reports whether the proxy exit watch runs.
func (f FastSignal) ProxyExitOn() bool { return f.Enabled && f.ProxyExit }

// NodeLogOn reports whether the current node's urltest errors are a fast
// signal (log health must run too: it reads the lines).
func (f FastSignal) NodeLogOn() bool { return f.Enabled && f.NodeLog }

// CountersOn reports whether the counter jump watch runs.
func (f FastSignal) CountersOn() bool { return f.Enabled && f.Counters }

// Probe is one health-check target (section `config probe`).
type Probe struct {
	Name string // section name; "" for anonymous sections
	Kind ProbeKind
	URL  string // absolute http(s) URL
	// Listed says the vendor's rule-mode list covers this target, so in
	// mode rule the vendor tunnels it. In rule mode only listed probes
	// prove the tunnel and name its exit; a target off the list goes
	// direct by the vendor's design and its domestic exit is no fault (E3).
	Listed bool
}

// Bypass is a LAN device that never goes through the tunnel (section
// `config bypass`).
type Bypass struct {
	Section string // section name; "" for anonymous sections
	Name    string // a label for people
	MAC     net.HardwareAddr
	IPs     []netip.Addr // optional fixed addresses, for when matching by MAC is impossible
}

// LoopGuard is the circuit breaker for the proxy's in-flight connections
// (same-host loop protection).
type LoopGuard struct {
	MinActive int // connections before the ratio is checked; < 0 = guard off (0 in the file = default)
	Ratio     int // percent of connections to one destination that trips it (1..100; <= 0 in the file = default)
}

// Enabled reports whether the loop guard is on.
func (l LoopGuard) Enabled() bool { return l.MinActive > 0 }

// Paths are the files and sockets the watchdog uses.
type Paths struct {
	SurflareBin     string        // the vendor CLI
	ProxyLog        string        // the proxy's log (read by log health and the web log view)
	RunDir          string        // state files, the control socket, the pid/lock files
	UbusSocket      string        // ubusd
	ChnrouteV4      string        // cn_direct IPv4 prefixes, one a line
	ChnrouteV6      string        // cn_direct IPv6 prefixes
	ChnrouteURL     string        // APNIC delegated-format source for `routes update`
	ChnrouteRefresh time.Duration // how often the daemon refreshes it; 0 = never
}

// Web is the live-view web server.
type Web struct {
	Enabled   bool
	Listen    netip.Addr // invalid (unset) = the LAN address on a router, 127.0.0.1 on a laptop
	Port      uint16
	TokenFile string // bearer token for changes through the API
}

// DNS holds the resolvers the firewall steers DNS to and from.
type DNS struct {
	ForeignResolvers  []netip.Addr // reached through the tunnel by the local resolver
	DoHEndpoints      []netip.Addr // DoH servers the local resolver uses, through the tunnel
	DomesticUpstreams []netip.Addr // domestic resolvers, reached directly
	BlockedDoH        []netip.Addr // DoH servers LAN clients may not reach directly
	LocalResolverPort uint16       // where LAN DNS is redirected on the router
}

// Keepalive is the TCP keepalive imposed on tunnel sockets, so dead paths
// are noticed by the kernel too.
type Keepalive struct {
	Enabled  bool
	Idle     time.Duration
	Interval time.Duration
	Count    int
}

// Vendor bounds the vendor CLI calls and names its proxy.
type Vendor struct {
	StatusTimeout     time.Duration
	ConnectTimeout    time.Duration // `surflare connect --daemon` until it returns
	DisconnectTimeout time.Duration
	NodesTimeout      time.Duration
	ProxyComm         string // the proxy's /proc comm
	ProxyPort         uint16 // its tproxy listener on 127.0.0.1
}

// Default returns the built-in configuration: what an empty file means, and
// what files/etc/config/surflare spells out.
func Default() *Config {
	return &Config{
		Main: Main{
			Enabled:                 true,
			Mode:                    ModeRule,
			Role:                    RoleAuto,
			Node:                    "Dallas",
			Candidates:              []string{"Dallas", "Los Angeles", "Chicago", "New York", "Atlanta", "Miami"},
			Transit:                 "auto",
			CheckInterval:           30 * time.Second,
			DegradedInterval:        10 * time.Second,
			FailThreshold:           4,
			HeartbeatInterval:       600 * time.Second,
			LoginRefresh:            30 * time.Minute,
			IdleProbeInterval:       10 * time.Second,
			StormCooldown:           600 * time.Second,
			ReconnectWindow:         600 * time.Second,
			ReconnectLimit:          6,
			CascadeAfter:            2,
			ConnectLocalTimeout:     20 * time.Second,
			ConnectDataplaneTimeout: 60 * time.Second,
			DomesticConfirm:         3 * time.Second,
			ProbeTimeout:            5 * time.Second,
			FailOpen:                false,
			StrictDirect:            true,
			RouteLayer:              true,
			IPv6:                    IPv6Block,
			ExpectedCountry:         "US",
			DomesticCountry:         "CN",
			LANInterface:            "br-lan",
			WANInterfaces:           []string{"wan", "wan6"},
			Private: mustPrefixes(
				"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
				"172.16.0.0/12", "192.168.0.0/16", "224.0.0.0/4", "240.0.0.0/4",
				"::1/128", "fc00::/7", "fe80::/10", "ff00::/8"),
		},
		Storm503: Storm503{Enabled: true, Count: 10, Window: 300 * time.Second, ActiveWindow: 60 * time.Second,
			ProbeInterval: 2 * time.Second, ProbeURL: "https://www.gstatic.com/generate_204"},
		Auth: Auth{
			LoginRetries:         5,
			LoginBackoffMin:      3 * time.Second,
			LoginBackoffMax:      60 * time.Second,
			FailOpenAfter:        5,
			SubscriptionCooldown: 3600 * time.Second,
			LoginMode:            LoginPTY,
			LoginTimeout:         30 * time.Second,
			AuthNeeded:           []string{"not logged in", "session expired"},
			SubscriptionInactive: []string{"subscription not active"},
			LoginFatal: []string{"Too Many Requests", "429", "invalid username/password",
				"Subscription expired", "Device limit", "Account check failed"},
		},
		Detector: Detector{Enabled: true, Interval: 3 * time.Second, Threshold: 16, Cooldown: 300 * time.Second},
		LogHealth: LogHealth{
			Enabled:   true,
			Window:    10 * time.Minute,
			Threshold: 10,
			Tail:      2 << 20,
			Stale:     20 * time.Minute,
			Pattern:   regexp.MustCompile(DefaultLogPattern),
		},
		FastSignal: FastSignal{Enabled: true, ProxyExit: true, NodeLog: true, Counters: true, ConnFail: true},
		Probes: []Probe{
			// Google is the site every rule-mode list tunnels (it is what the
			// list is for, E3): listed, so in rule mode it proves the tunnel.
			// Assumed, not measured; docs/modes.md says how to change it.
			{Name: "search", Kind: ProbeSearch, URL: "https://www.google.com/generate_204", Listed: true},
			{Name: "cdn1", Kind: ProbeCDNTrace, URL: "https://www.cloudflare.com/cdn-cgi/trace"},
			{Name: "cdn2", Kind: ProbeCDNTrace, URL: "https://1.1.1.1/cdn-cgi/trace"},
			{Name: "echo1", Kind: ProbeIPEcho, URL: "https://ipinfo.io/json"},
			{Name: "echo2", Kind: ProbeIPEcho, URL: "https://api.ip.sb/geoip"},
			{Name: "echo3", Kind: ProbeIPEcho, URL: "http://ip-api.com/json"},
			{Name: "lan", Kind: ProbeProxyPath, URL: "https://www.gstatic.com/generate_204"},
		},
		LoopGuard: LoopGuard{MinActive: defaultMinActive, Ratio: defaultRatio},
		Paths: Paths{
			SurflareBin:     "/usr/bin/surflare",
			ProxyLog:        "/var/log/surflare/surflare-proxy.log",
			RunDir:          "/run",
			UbusSocket:      "/var/run/ubus/ubus.sock",
			ChnrouteV4:      "/etc/surflare/chnroute.txt",
			ChnrouteV6:      "/etc/surflare/chnroute6.txt",
			ChnrouteURL:     "https://ftp.apnic.net/stats/apnic/delegated-apnic-latest",
			ChnrouteRefresh: 7 * 24 * time.Hour,
		},
		Web: Web{Enabled: true, Port: 9099, TokenFile: "/etc/surflare/web.token"},
		DNS: DNS{
			ForeignResolvers:  mustAddrs("8.8.8.8", "1.1.1.1"),
			DoHEndpoints:      mustAddrs("8.8.4.4", "1.0.0.1"),
			DomesticUpstreams: mustAddrs("223.5.5.5", "119.29.29.29"),
			BlockedDoH: mustAddrs("8.8.8.8", "8.8.4.4", "1.1.1.1", "1.0.0.1", "9.9.9.9",
				"149.112.112.112", "208.67.222.222", "208.67.220.220"),
			LocalResolverPort: 53,
		},
		Keepalive: Keepalive{Enabled: true, Idle: 30 * time.Second, Interval: 10 * time.Second, Count: 3},
		Vendor: Vendor{
			StatusTimeout:     10 * time.Second,
			ConnectTimeout:    30 * time.Second,
			DisconnectTimeout: 15 * time.Second,
			NodesTimeout:      10 * time.Second,
			ProxyComm:         "surflare-proxy",
			ProxyPort:         10800,
		},
	}
}

// DefaultLogPattern matches an urltest failure of the proxy log
// (SURFLARE-CONTRACT.md), e.g.
//
//	+0000 2026-11-29 14:03:11 ERROR [1820334452 2.1s] outbound/urltest[Dallas via Tokyo]: Get "…": context deadline exceeded
//
// The groups node and transit are required; error is optional.
const DefaultLogPattern = `ERROR .*outbound/urltest\[(?P<node>.+?) via (?P<transit>[^\]]+)\]: ?(?P<error>.*)$`

// Loop guard defaults, also what 0 (min_active) and <= 0 (ratio) in the file mean.
const (
	defaultMinActive = 1000
	defaultRatio     = 80
)

func mustPrefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

func mustAddrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}
