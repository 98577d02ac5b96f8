package firewall

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// The loop guard's circuit (package loopguard decides, this file enforces):
// `set loopguard_block` in inet killswitch holds ipv4_addr . inet_service
// elements with a timeout, and the first rule of the kill switch's output
// chain resets every new TCP connection the router opens to one of them.
// It sits ahead of "oif lo accept" on purpose: a proxy caught in a loop
// dials an unmarked socket, the vendor's route chain marks it 0x1 and
// re-routes it to lo, so by the time the kill switch sees it the packet is
// bound for lo — exactly what the other rules let through.
//
// The proxy's own sockets (mark 0xff) are exempt: they reach the relay for
// real and are never part of a loop (a looped packet lost its 0xff and was
// marked 0x1 by the vendor's route chain), so an open circuit costs a
// healthy proxy nothing and may stay open as long as the guard likes.
//
// The set is "synced" in Apply's sense: Apply creates it but never touches
// its elements, which only Block and Unblock change.
//
// Right after the reset, a second rule wakes the guard (it only logs,
// never drops): the router's own new TCP connections into the tunnel
// (mark 0x1, set by the vendor's route chain on everything it captures)
// are counted by a token bucket, and every one over the bucket is logged
// to NFLOG group LoopGuardLogGroup, where the guard listens
// (loopguard/nflog). A loop is exactly such a flood: each looped connection
// is an unmarked proxy socket that the vendor's chain marks 0x1 and sends
// back to the proxy. The LAN's traffic never matches (it is forwarded and
// tproxied, and the proxy's own relay sockets carry 0xff), so a busy LAN
// costs the guard nothing; the router's own tunnel traffic (probes, the
// account API) is a few connections a minute, far below the bucket.
// Blocked connections were reset by the rule before and do not log.

// SetLoopGuard is the loop guard's blocked destinations (addr . port).
const SetLoopGuard = "loopguard_block"

// LoopGuardTTL is the set's default timeout; Block gives each element its
// own. It matches loopguard.DefaultTTL: a false positive heals by itself.
const LoopGuardTTL = 60 * time.Second

// LoopGuardLogGroup is the NFLOG group of the loop guard's wake-up rule.
// nfnetlink_log groups are per namespace and bound by one socket each;
// ulogd and friends use small numbers, so the guard takes one far from
// them.
const LoopGuardLogGroup = 7207

// loopGuardDefaultGate is loopguard.DefaultMinActive, the gate a zero
// Spec.LoopGuardGate stands for.
const loopGuardDefaultGate = 1000

// loopGuardEventRules is the guard's wake-up rule for a gate of min_active
// in-flight connections (none when the guard is off):
//
//	meta l4proto tcp meta mark 0x1 ct state new
//	    limit rate over GATE/second burst GATE/4 packets log group 7207
//
// Burst GATE/4: a looped connection is two in-flight sockets (the proxy's
// outbound half and the half it accepts), so the first event comes when a
// loop has filled half the gate, and the guard is already judging at its
// fast pace when the loop reaches the gate (a loop opens ~2000 connections
// a second: the quarter of a 200 gate is 25 ms of it). Rate GATE per
// second: once the bucket is spent, a flood keeps logging while it lasts,
// and nothing legitimate (the router's own tunnel connections, a few a
// minute) ever spends it: at the lab's gate of 200, 50 new tunnel
// connections in a burst and 200 a second sustained.
func loopGuardEventRules(gate int) []rule {
	if gate < 0 {
		return nil
	}
	if gate == 0 {
		gate = loopGuardDefaultGate
	}
	burst := max(1, gate/4)
	b := newRule(famInet, "out-loopguard-events").l4proto(unix.IPPROTO_TCP).mark(MarkTunnel)
	b.ctBits(expr.CtKeySTATE, ctStateNew, "ct state new")
	b.add(fmt.Sprintf("limit rate over %d/second burst %d packets", gate, burst),
		&expr.Limit{Type: expr.LimitTypePkts, Rate: uint64(gate), Over: true, Unit: expr.LimitTimeSecond, Burst: uint32(burst)})
	b.add(fmt.Sprintf("log group %d", LoopGuardLogGroup),
		&expr.Log{Key: 1 << unix.NFTA_LOG_GROUP, Group: LoopGuardLogGroup})
	return []rule{b.done()}
}

// ctStateNew is the conntrack state bit of a connection's first packet.
const ctStateNew = 0x8

// addrPort4Type: kindAddrPort4 keys are an IPv4 address and a port, each padded to a
// 32-bit register as nft concatenations are.
var addrPort4Type = nftables.MustConcatSetType(nftables.TypeIPAddr, nftables.TypeInetService)

func loopGuardSet() setSpec {
	return setSpec{name: SetLoopGuard, kind: kindAddrPort4, timeout: LoopGuardTTL, synced: true}
}

// loopGuardRule resets new unmarked (not 0xff) TCP connections to a blocked
// addr . port.
func loopGuardRule() rule {
	b := newRule(famInet, "out-loopguard").nfproto(false).l4proto(6)
	b.add(fmt.Sprintf("meta mark != 0x%08x", MarkDirect), metaLoad(expr.MetaKeyMARK), cmpNeq(binaryutil.NativeEndian.PutUint32(MarkDirect)))
	b.ctBits(expr.CtKeySTATE, ctStateNew, "ct state new")
	// nft's register layout for a concatenation: the address in the first
	// 32-bit register of reg 1 (NFT_REG32_00), the port in the next (9).
	b.add("ip daddr . tcp dport @"+SetLoopGuard,
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Payload{DestRegister: 9, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Lookup{SourceRegister: 1, SetName: SetLoopGuard})
	return b.counter().rejectReset()
}

// addrPortKey encodes dst as the set's key: 4 address bytes, 2 port bytes
// (network order) and 2 bytes of register padding.
func addrPortKey(dst netip.AddrPort) ([]byte, error) {
	a := dst.Addr().Unmap()
	if !a.Is4() {
		return nil, fmt.Errorf("loop guard: %s is not IPv4 (the vendor proxies IPv4 only)", dst)
	}
	k := append(a.AsSlice(), binaryutil.BigEndian.PutUint16(dst.Port())...)
	return append(k, 0, 0), nil
}

// Block adds dst to the loop guard set for ttl (refreshing the timeout when
// it is there already): the loopguard.Blocker the daemon hands the guard.
// The kill switch must be applied (the set lives in it).
func (f *Firewall) Block(ctx context.Context, dst netip.AddrPort, ttl time.Duration) error {
	return f.loopGuardElem(dst, ttl, true)
}

// Unblock removes dst before its timeout (loopguard.Unblocker). A missing
// element is not an error.
func (f *Firewall) Unblock(ctx context.Context, dst netip.AddrPort) error {
	return f.loopGuardElem(dst, 0, false)
}

func (f *Firewall) loopGuardElem(dst netip.AddrPort, ttl time.Duration, add bool) error {
	key, err := addrPortKey(dst)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.conn()
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	// The set as Apply made it: named, not looked up (a round trip less
	// on the path that opens a circuit while a loop burns descriptors).
	set := &nftables.Set{Table: &nftables.Table{Family: famInet, Name: TableKillSwitch}, Name: SetLoopGuard,
		KeyType: addrPort4Type, Concatenation: true, HasTimeout: true}
	elem := []nftables.SetElement{{Key: key}}
	if !add {
		if err := c.SetDeleteElements(set, elem); err != nil {
			return fmt.Errorf("loop guard: removing %s: %w", dst, err)
		}
		if err := c.Flush(); err != nil && !isENOENT(err) {
			return fmt.Errorf("loop guard: removing %s (is the kill switch applied?): %w", dst, err)
		}
		return nil
	}
	if ttl <= 0 {
		ttl = LoopGuardTTL
	}
	// One batch, whether the element is there or not: add (a no-op if it
	// is), delete, add again with the new timeout — re-adding alone would
	// keep the old expiry, deleting alone fails the batch when it is not
	// there.
	timed := []nftables.SetElement{{Key: key, Timeout: ttl}}
	for _, step := range []func() error{
		func() error { return c.SetAddElements(set, timed) },
		func() error { return c.SetDeleteElements(set, elem) },
		func() error { return c.SetAddElements(set, timed) },
	} {
		if err := step(); err != nil {
			return fmt.Errorf("loop guard: blocking %s: %w", dst, err)
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("loop guard: blocking %s (is the kill switch applied?): %w", dst, err)
	}
	f.log.Warn("loop guard blocked a destination", "dst", dst.String(), "ttl", ttl)
	return nil
}

func isENOENT(err error) bool { return errors.Is(err, unix.ENOENT) }

// LoopGuardBlocked lists the destinations the loop guard set holds now.
func (f *Firewall) LoopGuardBlocked(ctx context.Context) ([]netip.AddrPort, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.conn()
	if err != nil {
		return nil, err
	}
	defer c.CloseLasting()
	t := &nftables.Table{Family: famInet, Name: TableKillSwitch}
	set, err := c.GetSetByName(t, SetLoopGuard)
	if err != nil {
		return nil, fmt.Errorf("loop guard set: %w", err)
	}
	elems, err := c.GetSetElements(set)
	if err != nil {
		return nil, fmt.Errorf("reading loop guard set: %w", err)
	}
	var out []netip.AddrPort
	for _, e := range elems {
		if len(e.Key) < 6 {
			continue
		}
		a, _ := netip.AddrFromSlice(e.Key[:4])
		out = append(out, netip.AddrPortFrom(a, binaryutil.BigEndian.Uint16(e.Key[4:6])))
	}
	return out, nil
}
