package firewall

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"sort"

	"github.com/google/nftables"
)

// elemChunk bounds the elements per netlink message: a message's element
// list is one attribute, and attribute lengths are 16 bits.
const elemChunk = 512

// nftSet is the library object for a set of ours.
func (s setSpec) nftSet(t *nftables.Table) *nftables.Set {
	return &nftables.Set{
		Table:      t,
		Name:       s.name,
		KeyType:    s.kind.datatype(),
		Interval:   s.interval,
		HasTimeout: s.timeout > 0,
		Timeout:    s.timeout,
		// nft needs the field lengths of a concatenated key described.
		Concatenation: s.kind == kindAddrPort4,
	}
}

// elements encodes the set's content. Interval sets get a start element and
// an interval-end element (one past the last address) per range; a range
// that reaches the top of the address space has no end element, as nft does.
func (s setSpec) elements() []nftables.SetElement {
	var out []nftables.SetElement
	switch {
	case s.kind == kindEther:
		for _, m := range s.macs {
			out = append(out, nftables.SetElement{Key: []byte(m)})
		}
	case s.interval:
		for _, r := range s.ranges {
			out = append(out, nftables.SetElement{Key: r.first.AsSlice()})
			if next := r.last.Next(); next.IsValid() {
				out = append(out, nftables.SetElement{Key: next.AsSlice(), IntervalEnd: true})
			}
		}
	default:
		for _, a := range s.addrs {
			out = append(out, nftables.SetElement{Key: a.AsSlice()})
		}
	}
	return out
}

// addElements queues the elements in chunks.
func addElements(c *nftables.Conn, set *nftables.Set, elems []nftables.SetElement) error {
	for len(elems) > 0 {
		n := min(len(elems), elemChunk)
		// Never split a range's start from its end.
		if n < len(elems) && elems[n].IntervalEnd {
			n++
		}
		if err := c.SetAddElements(set, elems[:n]); err != nil {
			return fmt.Errorf("set %s: %w", set.Name, err)
		}
		elems = elems[n:]
	}
	return nil
}

func delElements(c *nftables.Conn, set *nftables.Set, elems []nftables.SetElement) error {
	for len(elems) > 0 {
		n := min(len(elems), elemChunk)
		if err := c.SetDeleteElements(set, elems[:n]); err != nil {
			return fmt.Errorf("set %s: %w", set.Name, err)
		}
		elems = elems[n:]
	}
	return nil
}

// kernelContent is a set's content read back, in the same canonical shape
// setSpec holds.
type kernelContent struct {
	ranges []addrRange
	addrs  []netip.Addr
	macs   []net.HardwareAddr
}

func readContent(kind setKind, interval bool, elems []nftables.SetElement) kernelContent {
	var kc kernelContent
	if kind == kindEther {
		var ms []net.HardwareAddr
		for _, e := range elems {
			ms = append(ms, net.HardwareAddr(bytes.Clone(e.Key)))
		}
		kc.macs = uniqueMACs(ms)
		return kc
	}
	if !interval {
		var as []netip.Addr
		for _, e := range elems {
			if a, ok := netip.AddrFromSlice(e.Key); ok {
				as = append(as, a)
			}
		}
		sort.Slice(as, func(i, j int) bool { return as[i].Less(as[j]) })
		kc.addrs = compactAddrs(as)
		return kc
	}
	// Interval: sort by key, ends before starts at the same key (adjacent
	// ranges), then pair each start with the next end.
	sort.SliceStable(elems, func(i, j int) bool {
		if c := bytes.Compare(elems[i].Key, elems[j].Key); c != 0 {
			return c < 0
		}
		return elems[i].IntervalEnd && !elems[j].IntervalEnd
	})
	var open *netip.Addr
	for _, e := range elems {
		a, ok := netip.AddrFromSlice(e.Key)
		if !ok {
			continue
		}
		if e.IntervalEnd {
			if open != nil && a.Prev().IsValid() {
				kc.ranges = append(kc.ranges, addrRange{*open, a.Prev()})
			}
			open = nil
			continue
		}
		if open != nil { // a start with no end before the next start
			continue
		}
		open = &a
	}
	if open != nil {
		top := netip.AddrFrom4([4]byte{255, 255, 255, 255})
		if open.Is6() {
			top = netip.AddrFrom16([16]byte{0: 0xff, 1: 0xff, 2: 0xff, 3: 0xff, 4: 0xff, 5: 0xff, 6: 0xff, 7: 0xff,
				8: 0xff, 9: 0xff, 10: 0xff, 11: 0xff, 12: 0xff, 13: 0xff, 14: 0xff, 15: 0xff})
		}
		kc.ranges = append(kc.ranges, addrRange{*open, top})
	}
	kc.ranges = normalizeRanges(kc.ranges)
	return kc
}

// sameContent compares a desired set with what the kernel holds.
func sameContent(s setSpec, kc kernelContent) bool {
	switch {
	case s.kind == kindEther:
		if len(s.macs) != len(kc.macs) {
			return false
		}
		for i := range s.macs {
			if !bytes.Equal(s.macs[i], kc.macs[i]) {
				return false
			}
		}
		return true
	case s.interval:
		if len(s.ranges) != len(kc.ranges) {
			return false
		}
		for i := range s.ranges {
			if s.ranges[i] != kc.ranges[i] {
				return false
			}
		}
		return true
	}
	if len(s.addrs) != len(kc.addrs) {
		return false
	}
	for i := range s.addrs {
		if s.addrs[i] != kc.addrs[i] {
			return false
		}
	}
	return true
}
