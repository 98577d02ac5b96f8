// Package firewall owns every nftables table the watchdog installs: the kill
// switch, the LAN transparent-proxy and DNS-enforcement tables, the moat
// counters, on-demand tracing, the extension of the vendor's table in global
// mode, and the clean-up of what a crash leaves behind.
//
// Each table is described by pure builders (tables.go and the files named
// after each table's job: dns.go, loopguard.go, strict.go, vendor.go…)
// that turn a declarative Spec into chains, sets and rules; the same
// description is rendered as nft text for `firewall plan` and compiled into
// google/nftables expressions for Apply, which diffs it against the kernel and
// sends one atomic batch. Nothing here forks nft: the CLI is only used by
// tests, to check what the kernel holds.
package firewall

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"surflare-watchdog/src/route"
)

// Table names. The first group is ours; TableVendor belongs to the vendor's
// surflare binary: we only inspect it, and in global mode extend it.
const (
	TableKillSwitch = "killswitch"         // inet
	TableTProxy     = "sw_lan_tproxy"      // ip
	TableTProxy6    = "sw_lan_tproxy6"     // ip6, only with IPv6Proxy
	TableDNS        = "dns_enforce"        // ip
	TableMoat       = "surflare_moat"      // inet
	TableTrace      = "watchdog_trace"     // inet, on demand
	TableBootLock   = "surflare_boot_lock" // inet, loaded at boot by the init script
	TableVendor     = "surflare"           // inet, the vendor's
	TableFW4        = "fw4"                // inet, OpenWrt's firewall4
)

// Marks (see package route for why these values).
const (
	MarkTunnel = route.MarkTunnel
	MarkDirect = route.MarkDirect
)

// Chain priorities, relative to the hook's standard ones.
const (
	// PrioKillSwitch: after the vendor's route chain (-150) has marked the
	// router's own traffic, so the kill switch sees the final mark.
	PrioKillSwitch = 0
	// PrioTProxy: the mangle slot, after conntrack (-200), before routing.
	PrioTProxy = -150
	// PrioDNS: the dstnat slot, where redirect must run.
	PrioDNS = -100
	// PrioMoat: raw, so the counters see packets any later chain drops.
	PrioMoat = -300
	// PrioTrace: just ahead of raw, so a trace shows every chain, moat included.
	PrioTrace = -301
)

// Defaults for the ports the proxy and the local resolver listen on.
const (
	DefaultProxyPort         = 10800
	DefaultLocalResolverPort = 53
	// DomesticTimeout is how long a SmartDNS-resolved domestic address stays
	// in domestic_domain_ips without being refreshed.
	DomesticTimeout = time.Hour
)

// Role says whether the host routes a LAN (router) or only itself (laptop).
type Role int

// Roles.
const (
	RoleRouter Role = iota
	RoleLaptop
)

// String is the config spelling of the role.
func (r Role) String() string {
	if r == RoleLaptop {
		return "laptop"
	}
	return "router"
}

// Mode is the vendor's routing mode the watchdog runs the tunnel in.
type Mode int

// Modes (the vendor's --mode, SURFLARE-CONTRACT E2/E3). In global mode the
// vendor proxies everything; the watchdog adds the cn_direct sets and accept
// rules to the vendor's table so domestic destinations still go direct. In
// rule mode the vendor tunnels only its own list and sends the rest direct
// itself; in direct mode it sends everything direct. What strict direct
// narrows in each is StrictDirectScope (strict.go).
const (
	ModeRule Mode = iota
	ModeGlobal
	ModeDirect
)

// String is the config spelling of the mode.
func (m Mode) String() string {
	switch m {
	case ModeGlobal:
		return "global"
	case ModeDirect:
		return "direct"
	}
	return "rule"
}

// IPv6Policy says what happens to IPv6: it never leaks either way.
type IPv6Policy int

// IPv6 policies. Block (the default, safe for a tunnel with no IPv6 exit) drops
// all IPv6 leaving through the WAN except link-local control traffic; Proxy
// sends LAN IPv6 TCP to the proxy like IPv4 and lets the router's marked IPv6
// traffic through.
const (
	IPv6Block IPv6Policy = iota
	IPv6Proxy
)

// String is the config spelling of the policy.
func (p IPv6Policy) String() string {
	if p == IPv6Proxy {
		return "proxy"
	}
	return "block"
}

// Device is a LAN device that bypasses the tunnel. MAC is what the user
// configures; IPs are its current addresses (from DHCP leases or the
// neighbour table), the fallback where a MAC cannot be matched.
type Device struct {
	Name string
	MAC  net.HardwareAddr
	IPs  []netip.Addr
}

// Spec is everything the tables are built from: a pure value, so the same
// Spec always yields the same ruleset and Apply can be called with it again
// and again.
type Spec struct {
	Role Role
	Mode Mode
	IPv6 IPv6Policy

	// LANIf is the router's LAN interface (br-lan); unused for laptops.
	LANIf string

	// Relays are the tunnel's relay (transit) addresses: allowed through the
	// kill switch and watched by the moat counters.
	Relays []netip.Prefix
	// APIEndpoints are the account API's addresses, allowed through the
	// kill switch so login and status work while the tunnel is down.
	APIEndpoints []netip.Prefix
	// DNSDirect are domestic upstream resolvers the router's own resolver
	// queries directly (plain DNS on UDP/TCP 53, DoT 853, DoH 443): never
	// marked into the tunnel, allowed by the kill switch.
	DNSDirect []netip.Addr
	// ForeignDNS are the public resolvers the router's own resolver asks for
	// foreign names (UDP/TCP 53), and TunnelDoH the DoH endpoints it uses
	// (TCP 443): both are marked into the tunnel (dns.go).
	ForeignDNS, TunnelDoH []netip.Addr

	// Private destinations never go to the proxy (both families).
	Private []netip.Prefix
	// CNDirect4 and CNDirect6 are the chnroute prefixes: direct, not proxied.
	CNDirect4, CNDirect6 []netip.Prefix
	// BlockedDoH are DNS-over-HTTPS endpoints LAN clients may not reach
	// (TCP 443 is reset), so they fall back to plain DNS, which is enforced.
	BlockedDoH []netip.Prefix

	// Bypass devices go direct: no proxy, no DNS redirection, no kill switch.
	Bypass []Device

	// ProxyPort is the proxy's tproxy listener (127.0.0.1 / ::1).
	ProxyPort uint16
	// LocalResolverPort is where LAN DNS is redirected (on the router).
	LocalResolverPort uint16
	// ProxyDown tombstones the tproxy rule: LAN TCP is reset instead of being
	// handed to a proxy that is not listening, so clients fail fast while the
	// watchdog reconnects. The kill switch stays as it is.
	ProxyDown bool
	// StrictDirect narrows what the proxy's own (0xff) traffic may reach
	// to where a proxy legitimately goes direct (strict.go), in the modes
	// where that can be told (StrictDirectScope: global only); ServerPorts
	// are the vendor's server ports (its table's server_ports), accepted
	// for 0xff TCP to any address so a relay the daemon has not learned
	// yet is never cut.
	StrictDirect bool
	ServerPorts  []uint16
	// StrictDirectRule makes strict direct narrow in rule mode too
	// (StrictDirectScope): for a vendor whose rule mode sends nothing
	// foreign direct, as the original contract has it.
	StrictDirectRule bool

	// LoopGuardGate is the loop guard's min_active: it sets the rate of the
	// rule that wakes the guard (loopguard.go). 0 = the guard's default
	// gate; < 0 = the guard is off, no event rule.
	LoopGuardGate int

	// RouteLayer adds the kill switch's routing layer (permit.go, package
	// route's layer.go): ip rules that keep unmarked traffic off the WAN
	// while every nftables table is gone (`fw4 flush`), and the two chains
	// of the kill switch that release what it judges.
	RouteLayer bool

	// ProbeSrc are the source addresses of the daemon's LAN probe (probe 7
	// runs from a namespace on the LAN bridge): their TCP goes to the proxy
	// even while ProxyDown tombstones everyone else's (probe.go).
	ProbeSrc []netip.Addr
}

// DefaultPrivate lists the special-purpose ranges that never go through the
// tunnel. 198.18.0.0/15 (benchmarking) is deliberately absent: the lab uses it.
var DefaultPrivate = mustPrefixes(
	"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
	"172.16.0.0/12", "192.168.0.0/16", "224.0.0.0/4", "240.0.0.0/4",
	"::1/128", "fc00::/7", "fe80::/10", "ff00::/8",
)

// DefaultSpec is a router in rule mode with IPv6 blocked and the standard ports.
func DefaultSpec() Spec {
	return Spec{
		Role:              RoleRouter,
		Mode:              ModeRule,
		IPv6:              IPv6Block,
		LANIf:             "br-lan",
		Private:           append([]netip.Prefix(nil), DefaultPrivate...),
		ProxyPort:         DefaultProxyPort,
		LocalResolverPort: DefaultLocalResolverPort,
	}
}

func mustPrefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// Validate reports every problem of the Spec at once.
func (s Spec) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if s.Role != RoleRouter && s.Role != RoleLaptop {
		bad("role %d is neither router nor laptop", s.Role)
	}
	if s.Mode != ModeRule && s.Mode != ModeGlobal && s.Mode != ModeDirect {
		bad("mode %d is not rule, global or direct", s.Mode)
	}
	if s.IPv6 != IPv6Block && s.IPv6 != IPv6Proxy {
		bad("ipv6 policy %d is neither block nor proxy", s.IPv6)
	}
	if s.Role == RoleRouter {
		if s.LANIf == "" {
			bad("router role needs the LAN interface (lan_interface)")
		} else if len(s.LANIf) >= 16 || strings.ContainsAny(s.LANIf, "\" \t\n/") {
			bad("LAN interface %q is not a valid interface name", s.LANIf)
		}
	}
	if s.ProxyPort == 0 {
		bad("proxy port is 0")
	}
	if s.LocalResolverPort == 0 {
		bad("local resolver port is 0")
	}
	if slices.Contains(s.ServerPorts, 0) {
		bad("vendor server port 0")
	}
	checkPrefixes := func(what string, ps []netip.Prefix, want4, want6 bool) {
		for _, p := range ps {
			switch {
			case !p.IsValid():
				bad("%s: invalid prefix", what)
			case p.Addr().Is4() && !want4, p.Addr().Is6() && !want6:
				bad("%s: %s is of the wrong address family", what, p)
			case p.Addr().Zone() != "":
				bad("%s: %s has a zone", what, p)
			}
		}
	}
	checkPrefixes("relays", s.Relays, true, true)
	checkPrefixes("api endpoints", s.APIEndpoints, true, true)
	checkPrefixes("private", s.Private, true, true)
	checkPrefixes("cn_direct v4", s.CNDirect4, true, false)
	checkPrefixes("cn_direct v6", s.CNDirect6, false, true)
	checkPrefixes("blocked DoH", s.BlockedDoH, true, true)
	for _, a := range s.DNSDirect {
		if !a.IsValid() || a.Zone() != "" {
			bad("domestic DNS upstream %v is not a plain address", a)
		}
	}
	if err := dnsProblems(s); err != nil {
		errs = append(errs, err)
	}
	for _, a := range probeProblems(s) {
		bad("probe source %v is not a plain address", a)
	}
	for i, d := range s.Bypass {
		name := d.Name
		if name == "" {
			name = fmt.Sprintf("#%d", i+1)
		}
		if d.MAC != nil && len(d.MAC) != 6 {
			bad("bypass device %s: MAC %s is not a 48-bit Ethernet address", name, d.MAC)
		}
		if d.MAC == nil && len(d.IPs) == 0 {
			bad("bypass device %s has neither a MAC nor an address", name)
		}
	}
	return errors.Join(errs...)
}

func (s Spec) router() bool { return s.Role == RoleRouter }
