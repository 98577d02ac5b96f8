package firewall

import (
	"encoding/binary"
	"fmt"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Reading a set back is the firewall's biggest memory cost once the
// chnroute lists are in it: about 8,500 IPv4 and 3,000 IPv6 prefixes, two
// elements each (start and interval end), in up to three sets. The
// library's GetSetElements decodes every element into a SetElement of
// about 150 bytes with three attribute decoders of its own, and keeps the
// whole reply besides; one Apply read ~50 MB that way and a daemon start
// with a real chnroute list peaked 8 MB above one without
// (bench/README.md, "Footprint profile"). dumpSetKeys reads the same dump
// and keeps only what Apply looks at, each element's key and whether it
// ends an interval, in two allocations of the exact size;
// countSetElements, for status, keeps nothing.

// setKey is one element of a dumped set: its key and the interval-end flag.
type setKey struct {
	key []byte
	end bool
}

// dumpSet dumps the elements of set (table, name, family as set says).
// It opens its own netlink socket in c's network namespace, as the
// library does for a dump without a lasting connection.
func dumpSet(c *nftables.Conn, set *nftables.Set) ([]netlink.Message, error) {
	conn, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: c.NetNS})
	if err != nil {
		return nil, fmt.Errorf("opening nftables netlink socket: %w", err)
	}
	defer conn.Close()
	attrs, err := netlink.MarshalAttributes([]netlink.Attribute{
		{Type: unix.NFTA_SET_ELEM_LIST_TABLE, Data: []byte(set.Table.Name + "\x00")},
		{Type: unix.NFTA_SET_ELEM_LIST_SET, Data: []byte(set.Name + "\x00")},
	})
	if err != nil {
		return nil, err
	}
	// nfgenmsg: family, version 0, resource id 0.
	data := append([]byte{byte(set.Table.Family), unix.NFNETLINK_V0, 0, 0}, attrs...)
	msgs, err := conn.Execute(netlink.Message{
		Header: netlink.Header{
			Type:  netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_GETSETELEM),
			Flags: netlink.Request | netlink.Dump,
		},
		Data: data,
	})
	if err != nil {
		return nil, fmt.Errorf("reading set %s: %w", set.Name, err)
	}
	return msgs, nil
}

// eachElem calls fn with every element of a dump; the key aliases msgs.
func eachElem(msgs []netlink.Message, fn func(setKey)) {
	for _, m := range msgs {
		if len(m.Data) < 4 {
			continue
		}
		for typ, b := range attrsOf(m.Data[4:]) {
			if typ != unix.NFTA_SET_ELEM_LIST_ELEMENTS {
				continue
			}
			for typ, elem := range attrsOf(b) {
				if typ != unix.NFTA_LIST_ELEM {
					continue
				}
				if k, ok := elemKey(elem); ok {
					fn(k)
				}
			}
		}
	}
}

// dumpSetKeys is set's content, keys only: counted first, so the
// elements and their keys are two allocations of the exact size, and the
// dump itself is garbage once it returns.
func dumpSetKeys(c *nftables.Conn, set *nftables.Set) ([]setKey, error) {
	msgs, err := dumpSet(c, set)
	if err != nil {
		return nil, err
	}
	n, size := 0, 0
	eachElem(msgs, func(k setKey) { n, size = n+1, size+len(k.key) })
	out := make([]setKey, 0, n)
	keys := make([]byte, 0, size)
	eachElem(msgs, func(k setKey) {
		at := len(keys)
		keys = append(keys, k.key...)
		out = append(out, setKey{key: keys[at:len(keys):len(keys)], end: k.end})
	})
	return out, nil
}

// countSetElements is how many elements set holds (status's table sizes).
func countSetElements(c *nftables.Conn, set *nftables.Set) (int, error) {
	msgs, err := dumpSet(c, set)
	if err != nil {
		return 0, err
	}
	n := 0
	eachElem(msgs, func(setKey) { n++ })
	return n, nil
}

// elemKey decodes one NFTA_LIST_ELEM: the key's value and the flags.
func elemKey(b []byte) (setKey, bool) {
	var k setKey
	found := false
	for typ, a := range attrsOf(b) {
		switch typ {
		case unix.NFTA_SET_ELEM_KEY:
			for t, v := range attrsOf(a) {
				if t == unix.NFTA_DATA_VALUE {
					k.key, found = v, true
				}
			}
		case unix.NFTA_SET_ELEM_FLAGS:
			if len(a) >= 4 {
				k.end = binary.BigEndian.Uint32(a)&unix.NFT_SET_ELEM_INTERVAL_END != 0
			}
		}
	}
	return k, found
}

// attrsOf walks netlink attributes in b without allocating: the type
// (nested and byte-order flags cleared) and the payload of each; it stops
// at the first malformed header.
func attrsOf(b []byte) func(yield func(uint16, []byte) bool) {
	return func(yield func(uint16, []byte) bool) {
		for len(b) >= unix.NLA_HDRLEN {
			l := int(binary.NativeEndian.Uint16(b[0:2]))
			typ := binary.NativeEndian.Uint16(b[2:4]) &^ (unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)
			if l < unix.NLA_HDRLEN || l > len(b) {
				return
			}
			if !yield(typ, b[unix.NLA_HDRLEN:l]) {
				return
			}
			next := (l + unix.NLA_ALIGNTO - 1) &^ (unix.NLA_ALIGNTO - 1)
			if next >= len(b) {
				return
			}
			b = b[next:]
		}
	}
}
