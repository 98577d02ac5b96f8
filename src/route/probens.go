package route

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// ProbeNS is where the daemon's probe 7 runs from: a tiny network namespace of the
// daemon's own, plugged into the LAN bridge by a veth pair, with an address
// of the LAN. Its connections enter the router through br-lan exactly as a
// LAN client's do — through ip sw_lan_tproxy into the proxy — so probe 7
// fails when the LAN path fails, whatever the router's own path does. The
// proxy only accepts tproxy traffic; a socket on the router itself could
// only imitate that path.
//
// The namespace has no name: it lives as long as the daemon holds its
// descriptor, so a crashed daemon leaves nothing behind (the kernel removes
// the namespace, and with it both ends of the veth).
type ProbeNS struct {
	ns     netns.NsHandle
	orig   netns.NsHandle
	addr   netip.Addr // the probe's LAN address
	hostIf string
}

// Addr is the probe's address on the LAN.
func (p *ProbeNS) Addr() netip.Addr { return p.addr }

// HostIf is the router's end of the probe's veth, a port of the LAN bridge.
func (p *ProbeNS) HostIf() string { return p.hostIf }

// Probe namespace link names; the host end is what `ip link` shows on the
// router, enslaved to the LAN bridge.
const (
	probeHostIf = "swprobe0"
	probePeerIf = "swprobe1"
)

// probeAddr picks the probe's address: the last host address of the LAN
// subnet (x.x.x.254 in a /24), outside OpenWrt's default DHCP pool
// (.100–.249).
func probeAddr(lan netip.Prefix) (netip.Addr, error) {
	if !lan.Addr().Is4() || lan.Bits() > 30 {
		return netip.Addr{}, fmt.Errorf("LAN subnet %s has no room for the probe address", lan)
	}
	b := lan.Masked().Addr().As4()
	host := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	host |= (1 << (32 - lan.Bits())) - 2 // broadcast - 1
	return netip.AddrFrom4([4]byte{byte(host >> 24), byte(host >> 16), byte(host >> 8), byte(host)}), nil
}

// LANGateway is the router's IPv4 address on lanIf inside lan (any
// subnet when lan is the zero Prefix) and that address's subnet.
func LANGateway(lanIf string, lan netip.Prefix) (netip.Addr, netip.Prefix, error) {
	return lanGatewayOn(&netlink.Handle{}, lanIf, lan)
}

func lanGatewayOn(nh *netlink.Handle, lanIf string, lan netip.Prefix) (netip.Addr, netip.Prefix, error) {
	l, err := nh.LinkByName(lanIf)
	if err != nil {
		return netip.Addr{}, netip.Prefix{}, fmt.Errorf("LAN interface %s: %w", lanIf, err)
	}
	addrs, err := nh.AddrList(l, netlink.FAMILY_V4)
	if err != nil {
		return netip.Addr{}, netip.Prefix{}, fmt.Errorf("addresses of %s: %w", lanIf, err)
	}
	for _, a := range addrs {
		ip, _ := netip.AddrFromSlice(a.IP.To4())
		ones, _ := a.Mask.Size()
		p := netip.PrefixFrom(ip, ones).Masked()
		if !lan.IsValid() || lan.Contains(ip) {
			return ip, p, nil
		}
	}
	return netip.Addr{}, netip.Prefix{}, fmt.Errorf("%s has no IPv4 address in %s", lanIf, lan)
}

// NewProbeNS builds the namespace and plugs it into lanIf. lan may be the
// zero prefix: the subnet of lanIf's address is used.
func NewProbeNS(lanIf string, lan netip.Prefix) (*ProbeNS, error) {
	gw, subnet, err := LANGateway(lanIf, lan)
	if err != nil {
		return nil, err
	}
	addr, err := probeAddr(subnet)
	if err != nil {
		return nil, err
	}
	bridge, err := netlink.LinkByName(lanIf)
	if err != nil {
		return nil, fmt.Errorf("LAN interface %s: %w", lanIf, err)
	}
	// A daemon killed a moment ago may still have its veth (the kernel
	// removes an unused namespace asynchronously).
	if old, err := netlink.LinkByName(probeHostIf); err == nil {
		_ = netlink.LinkDel(old)
	}
	orig, err := netns.Get()
	if err != nil {
		return nil, fmt.Errorf("probe namespace: %w", err)
	}
	ns, err := newUnnamedNS()
	if err != nil {
		orig.Close()
		return nil, err
	}
	p := &ProbeNS{ns: ns, orig: orig, addr: addr, hostIf: probeHostIf}
	if err := p.plug(bridge, gw, subnet); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// newUnnamedNS creates a namespace on a locked thread and puts the thread
// back into the daemon's namespace before it is unlocked, so no goroutine
// of ours ever runs in the new one by accident. Throwing the thread away
// instead is not enough: when the goroutine happens to run on the main
// thread, Go keeps that thread (idle) rather than ending it, and the
// process's first thread — whose namespace /proc/self/net shows — stays in
// the probe namespace for good.
func newUnnamedNS() (netns.NsHandle, error) {
	type res struct {
		h   netns.NsHandle
		err error
	}
	ch := make(chan res, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			ch <- res{netns.None(), err} // still locked: the thread ends with the goroutine
			return
		}
		defer orig.Close()
		h, err := netns.New()
		if serr := netns.Set(orig); serr == nil {
			runtime.UnlockOSThread()
		} // else it stays locked, and the thread ends (or idles) where it is
		ch <- res{h, err}
	}()
	r := <-ch
	if r.err != nil {
		return netns.None(), fmt.Errorf("creating the probe namespace: %w", r.err)
	}
	return r.h, nil
}

// probeMAC is the host end's MAC: locally administered and above any
// vendor MAC. A Linux bridge without a MAC of its own takes its lowest
// port's; a probe port with a random, lower MAC would change br-lan's MAC
// and every LAN client's ARP entry for the router would point nowhere
// until it expires.
func probeMAC(addr netip.Addr) net.HardwareAddr {
	a := addr.As4()
	return net.HardwareAddr{0xfe, 0x5f, a[0], a[1], a[2], a[3]}
}

func (p *ProbeNS) plug(bridge netlink.Link, gw netip.Addr, subnet netip.Prefix) error {
	bridgeMAC := bridge.Attrs().HardwareAddr
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: probeHostIf, MasterIndex: bridge.Attrs().Index,
		HardwareAddr: probeMAC(p.addr)},
		PeerName: probePeerIf, PeerNamespace: netlink.NsFd(int(p.ns))}
	if err := netlink.LinkAdd(veth); err != nil {
		return fmt.Errorf("adding %s: %w", probeHostIf, err)
	}
	// Belt and braces: should the bridge's MAC have moved anyway, pin it
	// back (an explicitly set MAC no longer follows the ports).
	if now, err := netlink.LinkByIndex(bridge.Attrs().Index); err == nil && len(bridgeMAC) == 6 &&
		now.Attrs().HardwareAddr.String() != bridgeMAC.String() {
		if err := netlink.LinkSetHardwareAddr(now, bridgeMAC); err != nil {
			return fmt.Errorf("restoring %s's MAC after adding the probe port: %w", bridge.Attrs().Name, err)
		}
	}
	// The bridge port needs no addresses of its own.
	_ = os.WriteFile("/proc/sys/net/ipv6/conf/"+probeHostIf+"/disable_ipv6", []byte("1"), 0o644)
	host, err := netlink.LinkByName(probeHostIf)
	if err != nil {
		return err
	}
	if err := netlink.LinkSetUp(host); err != nil {
		return fmt.Errorf("bringing %s up: %w", probeHostIf, err)
	}
	h, err := netlink.NewHandleAt(p.ns)
	if err != nil {
		return fmt.Errorf("probe namespace netlink: %w", err)
	}
	defer h.Close()
	for _, name := range []string{"lo", probePeerIf} {
		l, err := h.LinkByName(name)
		if err != nil {
			return fmt.Errorf("probe namespace %s: %w", name, err)
		}
		if name == probePeerIf {
			a := &netlink.Addr{IPNet: &net.IPNet{IP: p.addr.AsSlice(), Mask: net.CIDRMask(subnet.Bits(), 32)}}
			if err := h.AddrAdd(l, a); err != nil {
				return fmt.Errorf("probe address %s: %w", p.addr, err)
			}
		}
		if err := h.LinkSetUp(l); err != nil {
			return fmt.Errorf("probe namespace %s up: %w", name, err)
		}
	}
	r := &netlink.Route{Gw: gw.AsSlice()}
	if err := h.RouteAdd(r); err != nil {
		return fmt.Errorf("probe namespace default route via %s: %w", gw, err)
	}
	return nil
}

// DialContext opens a connection from inside the probe namespace (the
// socket is created there; the namespace a socket lives in is fixed when it
// is created). It is the health checker's Proxy dialer.
func (p *ProbeNS) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		runtime.LockOSThread()
		if err := netns.Set(p.ns); err != nil {
			ch <- res{nil, fmt.Errorf("entering the probe namespace: %w", err)}
			return // thread discarded (still locked)
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, network, address)
		if serr := netns.Set(p.orig); serr != nil {
			ch <- res{c, err} // thread discarded (still locked)
			return
		}
		runtime.UnlockOSThread()
		ch <- res{c, err}
	}()
	r := <-ch
	return r.c, r.err
}

// Close unplugs and releases the namespace.
func (p *ProbeNS) Close() error {
	var errs []error
	if l, err := netlink.LinkByName(p.hostIf); err == nil {
		if err := netlink.LinkDel(l); err != nil {
			errs = append(errs, fmt.Errorf("removing %s: %w", p.hostIf, err))
		}
	}
	p.ns.Close()
	p.orig.Close()
	return errors.Join(errs...)
}
