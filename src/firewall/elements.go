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

// addSetContent queues the whole content of s into set. An interval set's
// elements are built one message at a time into a reused buffer: a
// chnroute-sized set has some 17,000 elements, and building them all
// before encoding was the largest allocation of a daemon start (18 MB of
// SetElements and keys for the three cn_direct sets). The library encodes
// each chunk into its message at once and keeps no reference to it.
func addSetContent(c *nftables.Conn, set *nftables.Set, s setSpec) error {
	if !s.interval || s.kind == kindEther {
		return addElements(c, set, s.elements())
	}
	buf := make([]nftables.SetElement, 0, elemChunk)
	keys := make([]byte, 0, elemChunk*net.IPv6len)
	key := func(a netip.Addr) []byte {
		n := len(keys)
		keys = append(keys, a.AsSlice()...)
		return keys[n:len(keys):len(keys)]
	}
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		if err := c.SetAddElements(set, buf); err != nil {
			return fmt.Errorf("set %s: %w", set.Name, err)
		}
		buf, keys = buf[:0], keys[:0]
		return nil
	}
	for _, r := range s.ranges {
		if len(buf)+2 > elemChunk { // a range's start and end share a message
			if err := flush(); err != nil {
				return err
			}
		}
		buf = append(buf, nftables.SetElement{Key: key(r.first)})
		if next := r.last.Next(); next.IsValid() {
			buf = append(buf, nftables.SetElement{Key: key(next), IntervalEnd: true})
		}
	}
	return flush()
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

func readContent(kind setKind, interval bool, elems []setKey) kernelContent {
	var kc kernelContent
	if kind == kindEther {
		var ms []net.HardwareAddr
		for _, e := range elems {
			ms = append(ms, net.HardwareAddr(bytes.Clone(e.key)))
		}
		kc.macs = uniqueMACs(ms)
		return kc
	}
	if !interval {
		var as []netip.Addr
		for _, e := range elems {
			if a, ok := netip.AddrFromSlice(e.key); ok {
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
		if c := bytes.Compare(elems[i].key, elems[j].key); c != 0 {
			return c < 0
		}
		return elems[i].end && !elems[j].end
	})
	var open *netip.Addr
	for _, e := range elems {
		a, ok := netip.AddrFromSlice(e.key)
		if !ok {
			continue
		}
		if e.end {
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
