package firewall

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// TraceFilter narrows what `firewall trace start` traces; tracing everything
// on a busy router floods the reader, so the CLI asks for at least one.
type TraceFilter struct {
	Addr netip.Addr // source or destination
	Port uint16     // TCP or UDP, source or destination
}

// String describes the filter for the user.
func (f TraceFilter) String() string {
	var p []string
	if f.Addr.IsValid() {
		p = append(p, "addr "+f.Addr.String())
	}
	if f.Port != 0 {
		p = append(p, fmt.Sprintf("port %d", f.Port))
	}
	if len(p) == 0 {
		return "all packets"
	}
	return strings.Join(p, ", ")
}

// traceTable sets nftrace on matching packets ahead of every other chain.
func traceTable(f TraceFilter) tableSpec {
	type part func(*ruleBuilder) *ruleBuilder
	addrs := []part{nil}
	if f.Addr.IsValid() {
		a := f.Addr.Unmap()
		addrs = []part{
			func(b *ruleBuilder) *ruleBuilder { return b.addrEq(true, a) },
			func(b *ruleBuilder) *ruleBuilder { return b.addrEq(false, a) },
		}
	}
	ports := []part{nil}
	if f.Port != 0 {
		ports = nil
		for _, proto := range []byte{unix.IPPROTO_TCP, unix.IPPROTO_UDP} {
			for _, src := range []bool{true, false} {
				ports = append(ports, func(b *ruleBuilder) *ruleBuilder { return b.port(proto, src, f.Port) })
			}
		}
	}
	var rules []rule
	for i, a := range addrs {
		for j, p := range ports {
			b := newRule(famInet, fmt.Sprintf("trace-%d-%d", i, j))
			if a != nil {
				b = a(b)
			}
			if p != nil {
				b = p(b)
			}
			rules = append(rules, b.setNftrace().done())
		}
	}
	chain := func(name string, h *nftables.ChainHook) chainSpec {
		return chainSpec{name: name, typ: nftables.ChainTypeFilter, hook: *h, prio: PrioTrace,
			policy: nftables.ChainPolicyAccept, rules: rules}
	}
	return tableSpec{family: famInet, name: TableTrace,
		chains: []chainSpec{chain("prerouting", nftables.ChainHookPrerouting), chain("output", nftables.ChainHookOutput)}}
}

// TraceStart installs (or replaces) the trace table.
func (f *Firewall) TraceStart(ctx context.Context, filter TraceFilter) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.conn()
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	if t, _ := c.ListTableOfFamily(TableTrace, famInet); t != nil {
		c.DelTable(t)
	}
	if err := createTable(c, traceTable(filter)); err != nil {
		return err
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("starting trace: %w", err)
	}
	f.log.Info("trace started", "filter", filter.String())
	return nil
}

// TraceStop removes the trace table (a no-op when absent).
func (f *Firewall) TraceStop(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.conn()
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	t, _ := c.ListTableOfFamily(TableTrace, famInet)
	if t == nil {
		return nil
	}
	c.DelTable(t)
	if err := c.Flush(); err != nil {
		return fmt.Errorf("stopping trace: %w", err)
	}
	f.log.Info("trace stopped")
	return nil
}

// TraceEvent is one nftrace notification: a packet meeting a rule, a
// chain's end or its policy.
type TraceEvent struct {
	ID       uint32
	Type     string // "rule", "return", "policy"
	Family   string
	Table    string
	Chain    string
	Handle   uint64
	Verdict  string
	IIF, OIF uint32
	Mark     uint32
	Proto    uint8
	Src, Dst netip.AddrPort
}

// String is one line in the style of `nft monitor trace`.
func (e TraceEvent) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "trace id %08x %s %s %s", e.ID, e.Family, e.Table, e.Chain)
	switch e.Type {
	case "rule":
		fmt.Fprintf(&b, " rule handle %d", e.Handle)
	default:
		b.WriteString(" " + e.Type)
	}
	if e.Verdict != "" {
		b.WriteString(" verdict " + e.Verdict)
	}
	if e.Src.IsValid() {
		fmt.Fprintf(&b, " %s -> %s proto %d", e.Src, e.Dst, e.Proto)
	}
	if e.Mark != 0 {
		fmt.Fprintf(&b, " mark %#x", e.Mark)
	}
	return b.String()
}

// ReadTrace delivers trace events to fn until ctx ends. It listens on the
// NFNLGRP_NFTRACE multicast group; it does not start tracing by itself.
func (f *Firewall) ReadTrace(ctx context.Context, fn func(TraceEvent)) error {
	cfg := &netlink.Config{}
	if f.netnsFD >= 0 {
		cfg.NetNS = f.netnsFD
	}
	conn, err := netlink.Dial(unix.NETLINK_NETFILTER, cfg)
	if err != nil {
		return fmt.Errorf("opening trace socket: %w", err)
	}
	defer conn.Close()
	if err := conn.JoinGroup(unix.NFNLGRP_NFTRACE); err != nil {
		return fmt.Errorf("joining the nftrace group: %w", err)
	}
	for ctx.Err() == nil {
		_ = conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		msgs, err := conn.Receive()
		if err != nil {
			var ne interface{ Timeout() bool }
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if ctx.Err() != nil {
				break
			}
			return fmt.Errorf("reading trace events: %w", err)
		}
		for _, m := range msgs {
			if ev, ok := parseTrace(m); ok {
				fn(ev)
			}
		}
	}
	return nil
}

func parseTrace(m netlink.Message) (TraceEvent, bool) {
	var ev TraceEvent
	if m.Header.Type != netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_TRACE) || len(m.Data) < 4 {
		return ev, false
	}
	ev.Family = FamilyName(nftables.TableFamily(m.Data[0]))
	ad, err := netlink.NewAttributeDecoder(m.Data[4:])
	if err != nil {
		return ev, false
	}
	ad.ByteOrder = binary.BigEndian
	var nh, th []byte
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_TRACE_TABLE:
			ev.Table = ad.String()
		case unix.NFTA_TRACE_CHAIN:
			ev.Chain = ad.String()
		case unix.NFTA_TRACE_RULE_HANDLE:
			ev.Handle = ad.Uint64()
		case unix.NFTA_TRACE_TYPE:
			ev.Type = map[uint32]string{unix.NFT_TRACETYPE_POLICY: "policy", unix.NFT_TRACETYPE_RETURN: "return",
				unix.NFT_TRACETYPE_RULE: "rule"}[ad.Uint32()]
		case unix.NFTA_TRACE_VERDICT:
			ad.Nested(func(nad *netlink.AttributeDecoder) error {
				nad.ByteOrder = binary.BigEndian
				for nad.Next() {
					if nad.Type() == unix.NFTA_VERDICT_CODE {
						ev.Verdict = verdictName(int32(nad.Uint32()))
					}
				}
				return nil
			})
		case unix.NFTA_TRACE_POLICY:
			ev.Verdict = verdictName(int32(ad.Uint32()))
		case unix.NFTA_TRACE_ID:
			ev.ID = ad.Uint32()
		case unix.NFTA_TRACE_IIF:
			ev.IIF = ad.Uint32()
		case unix.NFTA_TRACE_OIF:
			ev.OIF = ad.Uint32()
		case unix.NFTA_TRACE_MARK:
			ev.Mark = ad.Uint32()
		case unix.NFTA_TRACE_NETWORK_HEADER:
			nh = ad.Bytes()
		case unix.NFTA_TRACE_TRANSPORT_HEADER:
			th = ad.Bytes()
		}
	}
	ev.Proto, ev.Src, ev.Dst = decodeHeaders(nh, th)
	return ev, ad.Err() == nil
}

func verdictName(code int32) string {
	switch code {
	case 0:
		return "drop"
	case 1:
		return "accept"
	case 2:
		return "stolen"
	case 3:
		return "queue"
	case -1:
		return "continue"
	case -2:
		return "break"
	case -3:
		return "jump"
	case -4:
		return "goto"
	case -5:
		return "return"
	}
	return fmt.Sprintf("verdict %d", code)
}

func decodeHeaders(nh, th []byte) (uint8, netip.AddrPort, netip.AddrPort) {
	var proto uint8
	var src, dst netip.Addr
	switch {
	case len(nh) >= 20 && nh[0]>>4 == 4:
		proto = nh[9]
		src, _ = netip.AddrFromSlice(nh[12:16])
		dst, _ = netip.AddrFromSlice(nh[16:20])
	case len(nh) >= 40 && nh[0]>>4 == 6:
		proto = nh[6]
		src, _ = netip.AddrFromSlice(nh[8:24])
		dst, _ = netip.AddrFromSlice(nh[24:40])
	default:
		return 0, netip.AddrPort{}, netip.AddrPort{}
	}
	var sp, dp uint16
	if (proto == unix.IPPROTO_TCP || proto == unix.IPPROTO_UDP) && len(th) >= 4 {
		sp, dp = binary.BigEndian.Uint16(th[0:2]), binary.BigEndian.Uint16(th[2:4])
	}
	return proto, netip.AddrPortFrom(src, sp), netip.AddrPortFrom(dst, dp)
}
