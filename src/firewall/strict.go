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

// directAccepts is the kill switch's accept for the proxy's own traffic:
// everything 0xff, or in strict mode only TCP to the vendor's server ports.
func directAccepts(s Spec) []rule {
	if !s.StrictDirect {
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
// rule let through (strict mode only).
func directRejects(s Spec) []rule {
	if !s.StrictDirect {
		return nil
	}
	return []rule{
		newRule(famInet, "out-direct-blocked-tcp").mark(MarkDirect).l4proto(unix.IPPROTO_TCP).
			counterNamed(CounterDirectBlocked).rejectReset(),
		newRule(famInet, "out-direct-blocked").mark(MarkDirect).counterNamed(CounterDirectBlocked).drop(),
	}
}
