package firewall

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"time"

	"github.com/google/nftables"
)

// tableSpec is the full description of one table we own.
type tableSpec struct {
	family   nftables.TableFamily
	name     string
	sets     []setSpec
	counters []string // named counter objects
	chains   []chainSpec
}

func (t tableSpec) key() string { return tableKey(t.family, t.name) }

func tableKey(f nftables.TableFamily, name string) string { return FamilyName(f) + " " + name }

// FamilyName is a table family as nft(8) spells it.
func FamilyName(f nftables.TableFamily) string {
	switch f {
	case nftables.TableFamilyINet:
		return "inet"
	case nftables.TableFamilyIPv4:
		return "ip"
	case nftables.TableFamilyIPv6:
		return "ip6"
	case nftables.TableFamilyARP:
		return "arp"
	case nftables.TableFamilyBridge:
		return "bridge"
	case nftables.TableFamilyNetdev:
		return "netdev"
	}
	return fmt.Sprintf("family-%d", f)
}

// chainSpec is one base chain.
type chainSpec struct {
	name   string
	typ    nftables.ChainType
	hook   nftables.ChainHook
	prio   int32
	policy nftables.ChainPolicy
	rules  []rule
}

var hookNames = map[nftables.ChainHook]string{
	*nftables.ChainHookPrerouting:  "prerouting",
	*nftables.ChainHookInput:       "input",
	*nftables.ChainHookForward:     "forward",
	*nftables.ChainHookOutput:      "output",
	*nftables.ChainHookPostrouting: "postrouting",
}

// setKind is the key type of a set.
type setKind int

const (
	kindIPv4 setKind = iota
	kindIPv6
	kindEther
	kindAddrPort4 // ipv4_addr . inet_service (loopguard.go)
)

func (k setKind) datatype() nftables.SetDatatype {
	switch k {
	case kindIPv6:
		return nftables.TypeIP6Addr
	case kindEther:
		return nftables.TypeEtherAddr
	case kindAddrPort4:
		return addrPort4Type
	}
	return nftables.TypeIPAddr
}

// setSpec is one named set. An interval set holds merged, sorted ranges; a
// plain address set single addresses; an ether set MACs.
type setSpec struct {
	name     string
	kind     setKind
	interval bool
	// timeout, when set, gives the set the timeout flag and this default.
	timeout time.Duration
	ranges  []addrRange  // interval sets
	addrs   []netip.Addr // plain address sets, sorted, unique
	macs    []net.HardwareAddr
	// synced sets are filled by a sync loop (domestic_domain_ips), not from
	// the Spec: Apply creates them but leaves their elements alone.
	synced bool
}

// addrRange is an inclusive range of addresses of one family.
type addrRange struct{ first, last netip.Addr }

// String renders a range the way nft accepts it: a prefix when it is one.
func (r addrRange) String() string {
	if r.first == r.last {
		return r.first.String()
	}
	if p, ok := rangePrefix(r); ok {
		return p.String()
	}
	return r.first.String() + "-" + r.last.String()
}

func rangePrefix(r addrRange) (netip.Prefix, bool) {
	for bits := 0; bits <= r.first.BitLen(); bits++ {
		p := netip.PrefixFrom(r.first, bits)
		if p.Masked().Addr() != r.first {
			continue
		}
		if lastOf(p) == r.last {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

// lastOf returns the last address of a prefix.
func lastOf(p netip.Prefix) netip.Addr {
	p = p.Masked()
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// mergeRanges turns prefixes of one family into sorted, non-overlapping,
// non-adjacent ranges — the only shape an interval set accepts without
// auto-merge, and a canonical one to compare with the kernel.
func mergeRanges(ps []netip.Prefix, v6 bool) []addrRange {
	rs := make([]addrRange, 0, len(ps))
	for _, p := range ps {
		if !p.IsValid() || p.Addr().Is6() != v6 {
			continue
		}
		p = p.Masked()
		rs = append(rs, addrRange{p.Addr(), lastOf(p)})
	}
	return normalizeRanges(rs)
}

// normalizeRanges sorts and merges rs in place (a chnroute list is
// thousands of ranges, merged on every Apply); the result shares rs's
// array.
func normalizeRanges(rs []addrRange) []addrRange {
	sort.Slice(rs, func(i, j int) bool { return rs[i].first.Less(rs[j].first) })
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 {
			prev := &out[n-1]
			// Overlapping or adjacent (r starts at most one past prev's end);
			// an invalid Next means prev already reaches the top.
			if next := prev.last.Next(); !next.IsValid() || r.first.Compare(next) <= 0 {
				if prev.last.Less(r.last) {
					prev.last = r.last
				}
				continue
			}
		}
		out = append(out, r)
	}
	return out
}

// hostAddrs keeps the addresses of one family, sorted and unique.
func hostAddrs(as []netip.Addr, v6 bool) []netip.Addr {
	var out []netip.Addr
	for _, a := range as {
		a = a.Unmap()
		if a.IsValid() && a.Is6() == v6 {
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Less(out[j]) })
	return compactAddrs(out)
}

func compactAddrs(as []netip.Addr) []netip.Addr {
	var out []netip.Addr
	for i, a := range as {
		if i == 0 || a != as[i-1] {
			out = append(out, a)
		}
	}
	return out
}

// uniqueMACs sorts and de-duplicates MACs.
func uniqueMACs(ms []net.HardwareAddr) []net.HardwareAddr {
	seen := map[string]bool{}
	var out []net.HardwareAddr
	for _, m := range ms {
		if len(m) != 6 || seen[m.String()] {
			continue
		}
		seen[m.String()] = true
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

func shortHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:4])
}
