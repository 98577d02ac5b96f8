package lab

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"surflare-watchdog/src/firewall"
)

// The lab's own nftables tables. None of them is a table the watchdog owns:
//
//   - router `inet lab_fw4` stands in for OpenWrt's fw4: it masquerades
//     LAN→WAN IPv4 (fw4's default "wan" zone masq), nothing else. A table
//     wipe fault deletes every table and then restores this one, as
//     `fw4 restart` restores fw4 (the watchdog's and the vendor's are gone).
//   - router `ip lab_lan_tproxy` (optional, see InstallLANTProxy) is a
//     minimal stand-in for the watchdog's `ip sw_lan_tproxy`, for running
//     the lab without the daemon (selftest, bare demo).
//   - internet `inet lab_observe` counts and shapes what arrives from the
//     router on isp0: black holes, loss, and the leak counters.
const (
	tableFW4      = "lab_fw4"
	tableTProxy   = "lab_lan_tproxy"
	tableObserve  = "lab_observe"
	chainWANIn    = "wan_in"
	chainLoss     = "loss"
	setBlackhole  = "blackhole4"
	counterRelay  = "relay"
	counterHole   = "blackholed"
	counterLost   = "lost"
	nftObjCounter = 1 // NFT_OBJECT_COUNTER for expr.Objref
)

// Leak counter names, by family and kind.
var leakCounters = []string{"leak_dns4", "leak_tcp4", "leak_other4", "leak_dns6", "leak_tcp6", "leak_other6"}

// nftConn opens an nftables connection bound to ns.
func nftConn(ns netns.NsHandle) (*nftables.Conn, error) {
	c, err := nftables.New(nftables.WithNetNSFd(int(ns)))
	if err != nil {
		return nil, fmt.Errorf("nftables: %w", err)
	}
	return c, nil
}

// installFirewall creates the router's fw4 stand-in and the internet's
// observation table.
func (l *Lab) installFirewall() error {
	if l.openwrt {
		// The OpenWrt router runs the real fw4.
		return addObserve(l.ns[RoleInternet])
	}
	if err := addFW4(l.ns[RoleRouter]); err != nil {
		return err
	}
	return addObserve(l.ns[RoleInternet])
}

// addFW4 installs `inet lab_fw4`: masquerade IPv4 leaving pppoe-wan.
func addFW4(ns netns.NsHandle) error {
	c, err := nftConn(ns)
	if err != nil {
		return err
	}
	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: tableFW4})
	ch := c.AddChain(&nftables.Chain{
		Name: "srcnat", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource,
	})
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: cat(
		ifname(expr.MetaKeyOIFNAME, IfWAN), nfproto(unix.NFPROTO_IPV4),
		[]expr.Any{&expr.Masq{}},
	)})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("installing %s: %w", tableFW4, err)
	}
	return nil
}

// addObserve installs `inet lab_observe` in the internet namespace.
func addObserve(ns netns.NsHandle) error {
	c, err := nftConn(ns)
	if err != nil {
		return err
	}
	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: tableObserve})
	for _, n := range append([]string{counterRelay, counterHole, counterLost}, leakCounters...) {
		c.AddObj(&nftables.NamedObj{Table: t, Name: n, Type: nftables.ObjTypeCounter, Obj: &expr.Counter{}})
	}
	hole := &nftables.Set{Table: t, Name: setBlackhole, KeyType: nftables.TypeIPAddr}
	if err := c.AddSet(hole, nil); err != nil {
		return fmt.Errorf("set %s: %w", setBlackhole, err)
	}
	in := c.AddChain(&nftables.Chain{Name: chainWANIn, Table: t})
	c.AddChain(&nftables.Chain{Name: chainLoss, Table: t})
	pre := c.AddChain(&nftables.Chain{
		Name: "prerouting", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityRaw,
	})
	post := c.AddChain(&nftables.Chain{
		Name: "postrouting", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityFilter,
	})
	// Relays dial exits inside the internet: a black-holed exit must also
	// swallow those (locally generated) packets.
	out := c.AddChain(&nftables.Chain{
		Name: "output", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityRaw,
	})
	rule := func(ch *nftables.Chain, e ...[]expr.Any) {
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: cat(e...)})
	}
	rule(out, nfproto(unix.NFPROTO_IPV4), daddr(netip.Prefix{}, true),
		[]expr.Any{&expr.Lookup{SourceRegister: 1, SetName: setBlackhole, SetID: hole.ID}},
		objref(counterHole), verdict(expr.VerdictDrop))
	rule(pre, ifname(expr.MetaKeyIIFNAME, IfISP), jump(chainWANIn))
	rule(post, ifname(expr.MetaKeyOIFNAME, IfISP), jump(chainLoss))

	// wan_in: what the router sends into the internet. Black holes and
	// loss first (silently dropped packets are not leaks: they reach no
	// host), then the allowed destinations, then the leak counters.
	rule(in, nfproto(unix.NFPROTO_IPV4), daddr(netip.Prefix{}, true),
		[]expr.Any{&expr.Lookup{SourceRegister: 1, SetName: setBlackhole, SetID: hole.ID}},
		objref(counterHole), verdict(expr.VerdictDrop))
	rule(in, jump(chainLoss))
	for _, r := range Relays {
		rule(in, nfproto(unix.NFPROTO_IPV4), daddr(netip.PrefixFrom(r.Addr, 32), false), objref(counterRelay), verdict(expr.VerdictReturn))
	}
	// A single-hop connection (E4: connect without --transit) reaches the
	// exit's tunnel port directly: tunnel traffic, not a leak.
	for _, n := range Exits {
		rule(in, nfproto(unix.NFPROTO_IPV4), daddr(netip.PrefixFrom(n.Addr, 32), false),
			l4proto(unix.IPPROTO_TCP), dport(ExitPort), objref(counterRelay), verdict(expr.VerdictReturn))
	}
	allowed4 := []netip.Prefix{
		netip.PrefixFrom(AccountAPI, 32), // the vendor CLI's account checks
		netip.PrefixFrom(WANGateway, 32), // the ISP link itself (ping, ARP-adjacent)
		DomesticNet,                      // cn_direct: allowed to go direct
	}
	for _, p := range allowed4 {
		rule(in, nfproto(unix.NFPROTO_IPV4), daddr(p, false), verdict(expr.VerdictReturn))
	}
	allowed6 := []netip.Prefix{
		netip.MustParsePrefix("fe80::/10"), // neighbour discovery, link-local
		netip.MustParsePrefix("ff00::/8"),  // multicast (ND, MLD)
		WANNet6,                            // the ISP link itself
	}
	for _, p := range allowed6 {
		rule(in, nfproto(unix.NFPROTO_IPV6), daddr(p, false), verdict(expr.VerdictReturn))
	}
	for _, fam := range []struct {
		proto  byte
		suffix string
	}{{unix.NFPROTO_IPV4, "4"}, {unix.NFPROTO_IPV6, "6"}} {
		for _, l4 := range []byte{unix.IPPROTO_UDP, unix.IPPROTO_TCP} {
			rule(in, nfproto(fam.proto), l4proto(l4), dport(53), objref("leak_dns"+fam.suffix), verdict(expr.VerdictReturn))
		}
		rule(in, nfproto(fam.proto), l4proto(unix.IPPROTO_TCP), objref("leak_tcp"+fam.suffix), verdict(expr.VerdictReturn))
		rule(in, nfproto(fam.proto), objref("leak_other"+fam.suffix), verdict(expr.VerdictReturn))
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("installing %s: %w", tableObserve, err)
	}
	return nil
}

// setLoss replaces the loss chain's rule: drop pct% of packets in each
// direction of the WAN link (numgen, since this kernel has no netem).
func setLoss(ns netns.NsHandle, pct int) error {
	c, err := nftConn(ns)
	if err != nil {
		return err
	}
	t := &nftables.Table{Family: nftables.TableFamilyINet, Name: tableObserve}
	ch := &nftables.Chain{Name: chainLoss, Table: t}
	c.FlushChain(ch)
	if pct > 0 {
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: []expr.Any{
			&expr.Numgen{Register: 1, Modulus: 100, Type: unix.NFT_NG_RANDOM},
			// numgen yields a host-order integer; compare it big-endian, as nft does.
			&expr.Byteorder{SourceRegister: 1, DestRegister: 1, Op: expr.ByteorderHton, Len: 4, Size: 4},
			&expr.Cmp{Op: expr.CmpOpLt, Register: 1, Data: binaryutil.BigEndian.PutUint32(uint32(pct))},
			objref(counterLost)[0],
			&expr.Verdict{Kind: expr.VerdictDrop},
		}})
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("setting loss %d%%: %w", pct, err)
	}
	return nil
}

// setBlackholed adds or removes an address from the black-hole set.
func setBlackholed(ns netns.NsHandle, a netip.Addr, on bool) error {
	c, err := nftConn(ns)
	if err != nil {
		return err
	}
	s := &nftables.Set{Table: &nftables.Table{Family: nftables.TableFamilyINet, Name: tableObserve}, Name: setBlackhole, KeyType: nftables.TypeIPAddr}
	el := []nftables.SetElement{{Key: a.AsSlice()}}
	if on {
		err = c.SetAddElements(s, el)
	} else {
		err = c.SetDeleteElements(s, el)
	}
	if err == nil {
		err = c.Flush()
	}
	if err != nil && !on && isNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("black hole %s=%v: %w", a, on, err)
	}
	return nil
}

// wipeTables deletes every nftables table in ns, as `fw4 restart` and
// `firewall stop` do, and returns the names it deleted.
func wipeTables(ns netns.NsHandle) ([]string, error) {
	c, err := nftConn(ns)
	if err != nil {
		return nil, err
	}
	ts, err := c.ListTables()
	if err != nil {
		return nil, fmt.Errorf("listing tables: %w", err)
	}
	var names []string
	for _, t := range ts {
		c.DelTable(t)
		names = append(names, firewall.FamilyName(t.Family)+" "+t.Name)
	}
	if err := c.Flush(); err != nil {
		return nil, fmt.Errorf("deleting tables: %w", err)
	}
	return names, nil
}

// InstallLANTProxy adds `ip lab_lan_tproxy`: LAN TCP that is not for the
// LAN or cn_direct goes to the proxy's tproxy port with mark 0x1 — the
// essential part of the watchdog's `ip sw_lan_tproxy`, for running the lab
// without the daemon. It relies on the vendor's `fwmark 0x1 lookup 100`.
func (l *Lab) InstallLANTProxy() error {
	c, err := nftConn(l.ns[RoleRouter])
	if err != nil {
		return err
	}
	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: tableTProxy})
	ch := c.AddChain(&nftables.Chain{
		Name: "prerouting", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityMangle,
	})
	for _, p := range []netip.Prefix{LANNet, DomesticNet, netip.MustParsePrefix("127.0.0.0/8")} {
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: cat(ifname(expr.MetaKeyIIFNAME, IfLAN), daddr(p, false), verdict(expr.VerdictReturn))})
	}
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: cat(
		ifname(expr.MetaKeyIIFNAME, IfLAN), l4proto(unix.IPPROTO_TCP),
		[]expr.Any{
			&expr.Immediate{Register: 1, Data: binaryutil.NativeEndian.PutUint32(MarkTunnel)},
			&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1},
			&expr.Immediate{Register: 1, Data: netip.MustParseAddr("127.0.0.1").AsSlice()},
			&expr.Immediate{Register: 2, Data: binaryutil.BigEndian.PutUint16(ProxyPort)},
			&expr.TProxy{Family: byte(nftables.TableFamilyIPv4), TableFamily: byte(nftables.TableFamilyIPv4), RegAddr: 1, RegPort: 2},
		},
	)})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("installing %s: %w", tableTProxy, err)
	}
	return nil
}

// --- expression builders -------------------------------------------------

func cat(parts ...[]expr.Any) []expr.Any {
	var out []expr.Any
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func ifname(key expr.MetaKey, name string) []expr.Any {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return []expr.Any{&expr.Meta{Key: key, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: b}}
}

func nfproto(p byte) []expr.Any {
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}}}
}

func l4proto(p byte) []expr.Any {
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}}}
}

func dport(p uint16) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(p)},
	}
}

// daddr loads the destination address into register 1 and, unless loadOnly,
// matches it against p (masked for prefixes shorter than the address).
// The family must already be matched.
func daddr(p netip.Prefix, loadOnly bool) []expr.Any {
	off, n := uint32(16), uint32(4)
	if p.IsValid() && p.Addr().Is6() {
		off, n = 24, 16
	}
	out := []expr.Any{&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n}}
	if loadOnly {
		return out
	}
	if p.Bits() < p.Addr().BitLen() {
		mask := make([]byte, n)
		for i := 0; i < p.Bits(); i++ {
			mask[i/8] |= 0x80 >> (i % 8)
		}
		out = append(out, &expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: n, Mask: mask, Xor: make([]byte, n)})
	}
	return append(out, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: p.Masked().Addr().AsSlice()})
}

func objref(name string) []expr.Any { return []expr.Any{&expr.Objref{Type: nftObjCounter, Name: name}} }

func verdict(k expr.VerdictKind) []expr.Any { return []expr.Any{&expr.Verdict{Kind: k}} }

func jump(chain string) []expr.Any {
	return []expr.Any{&expr.Verdict{Kind: expr.VerdictJump, Chain: chain}}
}

func isNotExist(err error) bool {
	return errors.Is(err, unix.ENOENT)
}

// RouterTables lists the router's nftables tables ("inet surflare", …).
func (l *Lab) RouterTables() []string {
	c, err := nftConn(l.ns[RoleRouter])
	if err != nil {
		return nil
	}
	ts, err := c.ListTables()
	if err != nil {
		return nil
	}
	var out []string
	for _, t := range ts {
		out = append(out, firewall.FamilyName(t.Family)+" "+t.Name)
	}
	return out
}
