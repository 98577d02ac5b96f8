package firewall

import (
	"fmt"
	"slices"

	"golang.org/x/sys/unix"
)

// Strict direct (issue 10, Spec.StrictDirect): the kill switch used to
// accept every packet marked 0xff, the proxy's own bypass mark. A proxy
// that goes direct for everything (a domestic exit) then leaks every LAN
// connection through the ISP until the daemon notices and reconnects. In
// strict mode 0xff buys nothing by itself: the proxy's own packets fall
// through to the rules every router packet meets — relays and the account
// API (endpoints4/6, which include the relays the daemon learns), private
// ranges, DHCP/NTP, the domestic DNS upstreams, cn_direct and the
// domestic_domain_ips SmartDNS fills — plus one thing only the proxy gets:
// TCP to the vendor's server ports, so a relay the daemon has not learned
// yet (it learns them from established connections, which a dropped SYN
// never becomes) is reachable from the first SYN. What is left with 0xff is
// counted in direct_blocked and refused: TCP with a reset, so the proxy's
// dial fails at once and the fault shows up as failing probes within a
// probe's time, not after a connect timeout; the rest is dropped.

// CounterDirectBlocked counts the proxy's own packets strict direct refused.
const CounterDirectBlocked = "direct_blocked"

// DirectScope is what the kill switch lets the proxy's own (0xff) traffic
// reach.
type DirectScope int

const (
	// DirectAny: every 0xff packet is accepted; the vendor decides what
	// leaves direct.
	DirectAny DirectScope = iota
	// DirectNarrow: 0xff buys nothing by itself; the proxy gets what every
	// router packet gets, plus TCP to the vendor's server ports (above).
	DirectNarrow
)

func (d DirectScope) String() string {
	if d == DirectNarrow {
		return "narrow"
	}
	return "any"
}

// StrictDirectScope is the one place strict direct is decided: a pure
// function of the vendor's mode and the strict_direct option.
//
//   - global: the vendor tunnels everything, so a 0xff packet to a foreign
//     address is the proxy exiting domestically: narrow, as strict_direct
//     asks.
//   - rule: the vendor tunnels only its list and sends every other
//     destination direct with 0xff, foreign ones included, TCP and UDP,
//     DNS too (E3, E8). Nothing in a packet tells a legitimate direct
//     connection from a leaking one (the vendor's list is not ours to
//     read), and narrowing to what the kill switch knows (cn_direct) would
//     cut most foreign sites of a household on the default mode. So
//     nothing is narrowed; a proxy that sends listed sites direct is the
//     health check's to find (listed probes, docs/modes.md).
//     A user whose client's rule mode sends nothing foreign direct (the
//     original contract: only cn_direct) can ask for the narrowing there
//     too (inRule, strict_direct_rule '1').
//   - direct: the user chose to send everything direct: nothing to narrow.
//
// strict_direct '0' never narrows.
func StrictDirectScope(m Mode, strict, inRule bool) DirectScope {
	if strict && (m == ModeGlobal || m == ModeRule && inRule) {
		return DirectNarrow
	}
	return DirectAny
}

// narrowsDirect reports whether s's kill switch narrows the proxy's 0xff
// traffic (StrictDirectScope).
func (s Spec) narrowsDirect() bool {
	return StrictDirectScope(s.Mode, s.StrictDirect, s.StrictDirectRule) == DirectNarrow
}

// directAccepts is the kill switch's accept for the proxy's own traffic:
// everything 0xff, or when strict direct narrows only TCP to the vendor's
// server ports.
func directAccepts(s Spec) []rule {
	if !s.narrowsDirect() {
		return []rule{newRule(famInet, "out-mark-direct").mark(MarkDirect).accept()}
	}
	ports := slices.Clone(s.ServerPorts)
	slices.Sort(ports)
	var out []rule
	for _, p := range slices.Compact(ports) {
		out = append(out, newRule(famInet, fmt.Sprintf("out-direct-server-port-%d", p)).
			mark(MarkDirect).port(unix.IPPROTO_TCP, false, p).accept())
	}
	return out
}

// directRejects refuse and count the proxy's own traffic that no earlier
// rule let through (only when strict direct narrows).
func directRejects(s Spec) []rule {
	if !s.narrowsDirect() {
		return nil
	}
	return []rule{
		newRule(famInet, "out-direct-blocked-tcp").mark(MarkDirect).l4proto(unix.IPPROTO_TCP).
			counterNamed(CounterDirectBlocked).rejectReset(),
		newRule(famInet, "out-direct-blocked").mark(MarkDirect).counterNamed(CounterDirectBlocked).drop(),
	}
}
