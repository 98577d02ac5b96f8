package firewall

import (
	"net/netip"

	"golang.org/x/sys/unix"
)

// probeRules are the tproxy rules for probe 7's own source addresses
// (Spec.ProbeSrc): its connections go to the proxy even while the LAN is
// tombstoned, so a connect sequence can prove the LAN path through the new
// proxy before it reopens that path for everyone. Without a tombstone the
// general tproxy rule already covers them and no rule is added.
func probeRules(s Spec, v6 bool) []rule {
	if !s.ProxyDown {
		return nil
	}
	lo := loopback4
	fam := famIP
	if v6 {
		lo, fam = loopback6, famIP6
	}
	var out []rule
	for _, a := range s.ProbeSrc {
		if a.Is6() != v6 {
			continue
		}
		out = append(out, newRule(fam, "probe-"+a.String()).addrEq(true, a).l4proto(unix.IPPROTO_TCP).
			tproxy(lo, s.ProxyPort).setMark(MarkTunnel).accept())
	}
	return out
}

// probeProblems checks Spec.ProbeSrc.
func probeProblems(s Spec) []netip.Addr {
	var bad []netip.Addr
	for _, a := range s.ProbeSrc {
		if !a.IsValid() || a.Zone() != "" {
			bad = append(bad, a)
		}
	}
	return bad
}
