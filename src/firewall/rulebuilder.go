package firewall

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// rule is one rule of a chain: its nft text and the expressions that
// implement it, produced together by ruleBuilder so the two cannot drift.
// id names the rule; it is stored (with a hash of the text) in the rule's
// comment, which is how Apply recognises a rule it installed.
type rule struct {
	id    string
	text  string // without the comment
	exprs []expr.Any
	// match is the builder as it was before the verdict, and verdict the
	// verdict's kind (none for rules built with done): what the routing
	// layer's release chains need to ask the same question (permit.go).
	match      *ruleBuilder
	verdict    expr.VerdictKind
	hasVerdict bool
}

// comment is what the rule carries in its userdata: stable id + content hash.
func (r rule) comment() string { return r.id + " #" + shortHash(r.text) }

// ruleBuilder accumulates matches and statements. It tracks the protocol
// dependencies it has already emitted (nfproto, l4proto) so it produces the
// same expressions nft would for the same text.
type ruleBuilder struct {
	fam    nftables.TableFamily
	id     string
	words  []string
	exprs  []expr.Any
	nfDone byte // NFPROTO_* already matched
	l4Done byte // IPPROTO_* already matched
}

func newRule(fam nftables.TableFamily, id string) *ruleBuilder {
	return &ruleBuilder{fam: fam, id: id}
}

func (b *ruleBuilder) add(text string, es ...expr.Any) *ruleBuilder {
	b.words = append(b.words, text)
	b.exprs = append(b.exprs, es...)
	return b
}

func (b *ruleBuilder) build() rule {
	return rule{id: b.id, text: strings.Join(b.words, " "), exprs: b.exprs}
}

// load/compare helpers; register 1 is the scratch register, 0 the verdict.
func metaLoad(k expr.MetaKey) *expr.Meta { return &expr.Meta{Key: k, Register: 1} }
func cmpEq(data []byte) *expr.Cmp        { return &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: data} }
func cmpNeq(data []byte) *expr.Cmp       { return &expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: data} }

func ifname(name string) []byte {
	b := make([]byte, 16)
	copy(b, name)
	return b
}

func (b *ruleBuilder) iifname(name string, neg bool) *ruleBuilder {
	return b.ifname(expr.MetaKeyIIFNAME, "iifname", name, neg)
}

func (b *ruleBuilder) oifname(name string, neg bool) *ruleBuilder {
	return b.ifname(expr.MetaKeyOIFNAME, "oifname", name, neg)
}

func (b *ruleBuilder) ifname(k expr.MetaKey, word, name string, neg bool) *ruleBuilder {
	c, op := cmpEq(ifname(name)), ""
	if neg {
		c, op = cmpNeq(ifname(name)), "!= "
	}
	return b.add(fmt.Sprintf("%s %s%q", word, op, name), metaLoad(k), c)
}

// mark matches the packet mark exactly.
func (b *ruleBuilder) mark(m uint32) *ruleBuilder {
	return b.add(fmt.Sprintf("meta mark 0x%08x", m), metaLoad(expr.MetaKeyMARK), cmpEq(binaryutil.NativeEndian.PutUint32(m)))
}

// nfproto matches the layer-3 family; in ip/ip6 tables it is implied.
func (b *ruleBuilder) nfproto(v6 bool) *ruleBuilder {
	p, word := byte(unix.NFPROTO_IPV4), "ipv4"
	if v6 {
		p, word = unix.NFPROTO_IPV6, "ipv6"
	}
	b.nfDone = p
	return b.add("meta nfproto "+word, metaLoad(expr.MetaKeyNFPROTO), cmpEq([]byte{p}))
}

// nfDep adds the implicit family dependency nft adds in inet tables.
func (b *ruleBuilder) nfDep(v6 bool) {
	if b.fam != nftables.TableFamilyINet {
		return
	}
	p := byte(unix.NFPROTO_IPV4)
	if v6 {
		p = unix.NFPROTO_IPV6
	}
	if b.nfDone == p {
		return
	}
	b.nfDone = p
	b.exprs = append(b.exprs, metaLoad(expr.MetaKeyNFPROTO), cmpEq([]byte{p}))
}

var l4names = map[byte]string{unix.IPPROTO_TCP: "tcp", unix.IPPROTO_UDP: "udp", unix.IPPROTO_ICMPV6: "ipv6-icmp"}

// l4proto matches the transport protocol explicitly.
func (b *ruleBuilder) l4proto(p byte) *ruleBuilder {
	b.l4Done = p
	return b.add("meta l4proto "+l4names[p], metaLoad(expr.MetaKeyL4PROTO), cmpEq([]byte{p}))
}

func (b *ruleBuilder) l4Dep(p byte) {
	if b.l4Done == p {
		return
	}
	b.l4Done = p
	b.exprs = append(b.exprs, metaLoad(expr.MetaKeyL4PROTO), cmpEq([]byte{p}))
}

// addrLookup matches the source or destination address against a named set.
func (b *ruleBuilder) addrLookup(v6, src bool, set string) *ruleBuilder {
	b.nfDep(v6)
	off, n, word := uint32(16), uint32(4), "ip daddr"
	switch {
	case !v6 && src:
		off, word = 12, "ip saddr"
	case v6 && src:
		off, n, word = 8, 16, "ip6 saddr"
	case v6:
		off, n, word = 24, 16, "ip6 daddr"
	}
	return b.add(fmt.Sprintf("%s @%s", word, set),
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n},
		&expr.Lookup{SourceRegister: 1, SetName: set})
}

// fibDaddrLocal matches packets addressed to the router itself (any of its
// addresses, on any interface), as `fib daddr type local` does.
func (b *ruleBuilder) fibDaddrLocal() *ruleBuilder {
	return b.add("fib daddr type local",
		&expr.Fib{Register: 1, FlagDADDR: true, ResultADDRTYPE: true},
		cmpEq(binaryutil.NativeEndian.PutUint32(unix.RTN_LOCAL)))
}

// etherSaddrLookup matches the source MAC against a set; like nft it first
// checks the input device is Ethernet, so the link header is one.
func (b *ruleBuilder) etherSaddrLookup(set string) *ruleBuilder {
	return b.add("ether saddr @"+set,
		metaLoad(expr.MetaKeyIIFTYPE), cmpEq(binaryutil.NativeEndian.PutUint16(unix.ARPHRD_ETHER)),
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseLLHeader, Offset: 6, Len: 6},
		&expr.Lookup{SourceRegister: 1, SetName: set})
}

// port matches a TCP/UDP source or destination port.
func (b *ruleBuilder) port(proto byte, src bool, port uint16) *ruleBuilder {
	b.l4Dep(proto)
	off, word := uint32(2), "dport"
	if src {
		off, word = 0, "sport"
	}
	return b.add(fmt.Sprintf("%s %s %d", l4names[proto], word, port),
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: off, Len: 2},
		cmpEq(binaryutil.BigEndian.PutUint16(port)))
}

// thPayload matches raw transport-header bits (offset and length in bits,
// byte aligned), e.g. the DTLS record version.
func (b *ruleBuilder) thPayload(offBits, lenBits uint32, val uint16) *ruleBuilder {
	return b.add(fmt.Sprintf("@th,%d,%d 0x%x", offBits, lenBits, val),
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: offBits / 8, Len: lenBits / 8},
		cmpEq(binaryutil.BigEndian.PutUint16(val)))
}

// TCP flag bits.
const (
	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpACK = 0x10
)

var tcpFlagNames = []struct {
	bit  byte
	name string
}{{tcpFIN, "fin"}, {tcpSYN, "syn"}, {tcpRST, "rst"}, {0x08, "psh"}, {tcpACK, "ack"}}

func flagText(f byte) string {
	var parts []string
	for _, n := range tcpFlagNames {
		if f&n.bit != 0 {
			parts = append(parts, n.name)
		}
	}
	return strings.Join(parts, " | ")
}

// tcpFlags matches (flags & mask) == want.
func (b *ruleBuilder) tcpFlags(mask, want byte) *ruleBuilder {
	b.l4Dep(unix.IPPROTO_TCP)
	return b.add(fmt.Sprintf("tcp flags & (%s) == %s", flagText(mask), flagText(want)),
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 13, Len: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 1, Mask: []byte{mask}, Xor: []byte{0}},
		cmpEq([]byte{want}))
}

// icmpv6Type matches one ICMPv6 type (link-local control traffic).
func (b *ruleBuilder) icmpv6Type(t byte, name string) *ruleBuilder {
	b.nfDep(true)
	b.l4Dep(unix.IPPROTO_ICMPV6)
	return b.add("icmpv6 type "+name,
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1},
		cmpEq([]byte{t}))
}

// Conntrack state and status bits.
const (
	ctStateEstablished = 0x2
	ctStateRelated     = 0x4
	ctStatusDNAT       = 0x20
)

func (b *ruleBuilder) ctBits(key expr.CtKey, bits uint32, text string) *ruleBuilder {
	return b.add(text, &expr.Ct{Register: 1, Key: key},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(bits), Xor: make([]byte, 4)},
		cmpNeq(make([]byte, 4)))
}

func (b *ruleBuilder) ctEstablishedRelated() *ruleBuilder {
	return b.ctBits(expr.CtKeySTATE, ctStateEstablished|ctStateRelated, "ct state established,related")
}

func (b *ruleBuilder) ctDNAT() *ruleBuilder {
	return b.ctBits(expr.CtKeySTATUS, ctStatusDNAT, "ct status dnat")
}

// counter counts matching packets anonymously.
func (b *ruleBuilder) counter() *ruleBuilder { return b.add("counter", &expr.Counter{}) }

// counterNamed counts into a named counter object of the table.
func (b *ruleBuilder) counterNamed(name string) *ruleBuilder {
	return b.add(fmt.Sprintf("counter name %q", name), &expr.Objref{Type: int(nftables.ObjTypeCounter), Name: name})
}

// setMark sets the packet mark.
func (b *ruleBuilder) setMark(m uint32) *ruleBuilder {
	return b.add(fmt.Sprintf("meta mark set 0x%08x", m),
		&expr.Immediate{Register: 1, Data: binaryutil.NativeEndian.PutUint32(m)},
		&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1})
}

// setNftrace turns tracing on for the packet.
func (b *ruleBuilder) setNftrace() *ruleBuilder {
	return b.add("meta nftrace set 1",
		&expr.Immediate{Register: 1, Data: []byte{1}},
		&expr.Meta{Key: expr.MetaKeyNFTRACE, SourceRegister: true, Register: 1})
}

// tproxy hands the packet to the local socket at addr:port. Only in ip and
// ip6 tables (the inet form needs "tproxy ip to").
func (b *ruleBuilder) tproxy(addr netip.Addr, port uint16) *ruleBuilder {
	fam, text := byte(unix.NFPROTO_IPV4), fmt.Sprintf("tproxy to %s:%d", addr, port)
	if addr.Is6() {
		fam, text = unix.NFPROTO_IPV6, fmt.Sprintf("tproxy to [%s]:%d", addr, port)
	}
	return b.add(text,
		&expr.Immediate{Register: 1, Data: addr.AsSlice()},
		&expr.Immediate{Register: 2, Data: binaryutil.BigEndian.PutUint16(port)},
		&expr.TProxy{Family: fam, TableFamily: byte(b.fam), RegAddr: 1, RegPort: 2})
}

// redirect sends the packet to port on the router (nat chains only).
func (b *ruleBuilder) redirect(port uint16) *ruleBuilder {
	const rangeProtoSpecified = 0x2 // NF_NAT_RANGE_PROTO_SPECIFIED
	return b.add(fmt.Sprintf("redirect to :%d", port),
		&expr.Immediate{Register: 1, Data: binaryutil.BigEndian.PutUint16(port)},
		&expr.Redir{RegisterProtoMin: 1, Flags: rangeProtoSpecified})
}

// Verdicts.
func (b *ruleBuilder) verdict(k expr.VerdictKind, word string) rule {
	m := b.clone()
	r := b.add(word, &expr.Verdict{Kind: k}).build()
	r.match, r.verdict, r.hasVerdict = m, k, true
	return r
}

// clone is an independent copy: adding to it leaves b as it is.
func (b *ruleBuilder) clone() *ruleBuilder {
	c := *b
	c.words = slices.Clone(b.words)
	c.exprs = slices.Clone(b.exprs)
	return &c
}
func (b *ruleBuilder) accept() rule { return b.verdict(expr.VerdictAccept, "accept") }
func (b *ruleBuilder) drop() rule   { return b.verdict(expr.VerdictDrop, "drop") }
func (b *ruleBuilder) ret() rule    { return b.verdict(expr.VerdictReturn, "return") }

// rejectPort answers with ICMP(v6) port unreachable; ip and ip6 tables only.
func (b *ruleBuilder) rejectPort() rule {
	code := uint8(3) // ICMP_PORT_UNREACH
	if b.fam == nftables.TableFamilyIPv6 {
		code = 4 // ICMPV6_PORT_UNREACH
	}
	return b.add("reject", &expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: code}).build()
}

// rejectReset answers TCP with a RST.
func (b *ruleBuilder) rejectReset() rule {
	b.l4Dep(unix.IPPROTO_TCP)
	return b.add("reject with tcp reset", &expr.Reject{Type: unix.NFT_REJECT_TCP_RST}).build()
}

// build for rules that end without a verdict (counters, marks).
func (b *ruleBuilder) done() rule { return b.build() }

// addrEq matches the source or destination address exactly.
func (b *ruleBuilder) addrEq(src bool, a netip.Addr) *ruleBuilder {
	v6 := a.Is6()
	b.nfDep(v6)
	off, n, word := uint32(16), uint32(4), "ip daddr"
	switch {
	case !v6 && src:
		off, word = 12, "ip saddr"
	case v6 && src:
		off, n, word = 8, 16, "ip6 saddr"
	case v6:
		off, n, word = 24, 16, "ip6 daddr"
	}
	return b.add(fmt.Sprintf("%s %s", word, a),
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n},
		cmpEq(a.AsSlice()))
}
