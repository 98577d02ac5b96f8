package loopguard

import (
	"fmt"
	"net/netip"
)

// siblingsOf are the destinations to block together with dst: what
// Options.Siblings names, less dst itself, invalid or repeated entries and
// destinations whose circuit is open already.
func (g *Guard) siblingsOf(dst netip.AddrPort) []netip.AddrPort {
	if g.o.Siblings == nil {
		return nil
	}
	var out []netip.AddrPort
	seen := map[netip.AddrPort]bool{dst: true}
	for _, s := range g.o.Siblings(dst) {
		s = netip.AddrPortFrom(s.Addr().Unmap(), s.Port())
		if !s.IsValid() || seen[s] || g.circuits[s] != nil {
			continue
		}
		seen[s] = true
		out = append(out, s)
	}
	return out
}

// logSibling announces a circuit opened as a sibling.
func (g *Guard) logSibling(c *circuit) {
	log().Warn(fmt.Sprintf("loopguard: circuit open for %s (sibling of %s: the proxy fails over between its relays; hold %s)",
		c.Dst, c.SiblingOf, c.hold))
}
