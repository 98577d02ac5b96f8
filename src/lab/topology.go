package lab

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Interface names inside the lab. The router's names are OpenWrt's, so the
// daemon's interface detection sees what it would see on a real router.
const (
	IfLAN      = "br-lan"    // router: the LAN bridge
	IfWAN      = "pppoe-wan" // router: the uplink (a veth, not real PPPoE)
	IfISP      = "isp0"      // internet: the ISP's end of pppoe-wan
	IfClient   = "eth0"      // each LAN client's only interface
	bridgePort = "lan-p"     // router: bridge port to client i is lan-p<i>
	// On the OpenWrt router (Options.OpenWrt) the clients' bridge is
	// IfLANSwitch in the RoleSwitch namespace, and br-lan is a veth whose
	// peer IfLANUplink is its port.
	IfLANSwitch = "lan-sw"
	IfLANUplink = "lan-up"
)

// Client is one LAN host: a namespace of its own with one veth into br-lan.
type Client struct {
	Role  string // namespace role: "lan", "lan2", …
	Addr  netip.Addr
	Addr6 netip.Addr
	MAC   net.HardwareAddr
}

// clientRole names client i's namespace role: "lan" for the first (so the
// plan's RoleLAN is the first client), then "lan2", "lan3".
func clientRole(i int) string {
	if i == 0 {
		return RoleLAN
	}
	return fmt.Sprintf("%s%d", RoleLAN, i+1)
}

// Per-namespace sysctls. accept_dad=0 so IPv6 addresses are usable at once
// (DAD would add a second to `up`); the router forwards and has rp_filter
// off because tproxy delivers packets to sockets whose route is not the
// reverse path.
var (
	sysctlCommon = map[string]string{
		"net.ipv6.conf.all.accept_dad":     "0",
		"net.ipv6.conf.default.accept_dad": "0",
		"net.ipv4.conf.all.rp_filter":      "0",
		"net.ipv4.conf.default.rp_filter":  "0",
	}
	// The LAN switch of the OpenWrt router: a plain bridge (see
	// sysctlRouter on br_netfilter).
	sysctlSwitch = map[string]string{
		"net.bridge.bridge-nf-call-iptables":  "0",
		"net.bridge.bridge-nf-call-ip6tables": "0",
		"net.bridge.bridge-nf-call-arptables": "0",
	}
	sysctlRouter = map[string]string{
		"net.ipv4.ip_forward":          "1",
		"net.ipv6.conf.all.forwarding": "1",
		// Keep pppoe-wan's IPv6 addresses through the WAN down/up fault, as
		// netifd would restore them.
		"net.ipv6.conf.all.keep_addr_on_down":     "1",
		"net.ipv6.conf.default.keep_addr_on_down": "1",
		// This kernel has br_netfilter built in, and it runs the IP hooks
		// for bridged frames in the bridge's context (call-iptables=1 in
		// every new namespace). A tproxy socket assigned there is lost, so
		// LAN TCP through br-lan gets a RST instead of the proxy. OpenWrt
		// does not load br_netfilter; turn it off for this namespace.
		"net.bridge.bridge-nf-call-iptables":  "0",
		"net.bridge.bridge-nf-call-ip6tables": "0",
		"net.bridge.bridge-nf-call-arptables": "0",
	}
)

// buildTopology wires the namespaces: clients → br-lan, router pppoe-wan →
// internet isp0, and every internet address on the internet's lo. Nothing here refers
// to a host interface: every link is created inside a lab namespace.
func (l *Lab) buildTopology() error {
	for _, role := range l.roles() {
		if err := sysctl(l.ns[role], sysctlCommon); err != nil {
			return fmt.Errorf("%s: %w", role, err)
		}
	}
	if err := sysctl(l.ns[RoleRouter], sysctlRouter); err != nil {
		return fmt.Errorf("router: %w", err)
	}
	if l.openwrt {
		if err := sysctl(l.ns[RoleSwitch], sysctlSwitch); err != nil {
			return fmt.Errorf("%s: %w", RoleSwitch, err)
		}
	}

	hr, err := netlink.NewHandleAt(l.ns[RoleRouter])
	if err != nil {
		return fmt.Errorf("netlink in router: %w", err)
	}
	defer hr.Close()
	hi, err := netlink.NewHandleAt(l.ns[RoleInternet])
	if err != nil {
		return fmt.Errorf("netlink in internet: %w", err)
	}
	defer hi.Close()

	// Router LAN side: the clients' ports join the bridge br-lan. On the
	// OpenWrt router netifd gives the router its addresses and routes
	// (BoxNetworkConfig) and the lab only makes the links. netifd can
	// neither take over a bridge it did not make nor leave the ports of
	// one in its namespace alone (it unplugs them when it starts), so
	// there the clients' bridge is lan-sw in a namespace of its own (the
	// LAN switch), and the router's br-lan is a veth plugged into it.
	lanAddrs := []netip.Prefix{pfx(LANRouter, LANNet), pfx(LANRouter6, LANNet6)}
	wanAddrs := []netip.Prefix{pfx(WANRouter, WANNet), pfx(WANRouter6, WANNet6)}
	hsw, bridge := hr, IfLAN
	if l.openwrt {
		lanAddrs, wanAddrs, bridge = nil, nil, IfLANSwitch
		if hsw, err = netlink.NewHandleAt(l.ns[RoleSwitch]); err != nil {
			return fmt.Errorf("netlink in %s: %w", RoleSwitch, err)
		}
		defer hsw.Close()
	}
	if err := hsw.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: bridge}}); err != nil {
		return fmt.Errorf("adding %s: %w", bridge, err)
	}
	if err := setUp(hsw, bridge); err != nil {
		return err
	}
	brLink, err := hsw.LinkByName(bridge)
	if err != nil {
		return fmt.Errorf("finding %s: %w", bridge, err)
	}
	if l.openwrt {
		up := &netlink.Veth{
			LinkAttrs:     netlink.LinkAttrs{Name: IfLAN},
			PeerName:      IfLANUplink,
			PeerNamespace: netlink.NsFd(int(l.ns[RoleSwitch])),
		}
		if err := hr.LinkAdd(up); err != nil {
			return fmt.Errorf("adding %s: %w", IfLAN, err)
		}
		peer, err := hsw.LinkByName(IfLANUplink)
		if err != nil {
			return fmt.Errorf("finding %s: %w", IfLANUplink, err)
		}
		if err := hsw.LinkSetMaster(peer, brLink); err != nil {
			return fmt.Errorf("plugging %s into %s: %w", IfLANUplink, bridge, err)
		}
		if err := setUp(hsw, IfLANUplink); err != nil {
			return err
		}
	}
	if err := setUp(hr, IfLAN, lanAddrs...); err != nil {
		return err
	}
	for i, c := range l.clients {
		if err := l.wireClient(hsw, brLink, i, c); err != nil {
			return err
		}
	}

	if err := l.wireWAN(hr, hi, wanAddrs); err != nil {
		return err
	}
	if err := setUp(hr, "lo"); err != nil {
		return err
	}
	if !l.openwrt {
		if err := defaultRoutes(hr, IfWAN, WANGateway, WANGw6); err != nil {
			return fmt.Errorf("router: %w", err)
		}
	}

	// Internet side: every internet host is an address on lo (this kernel has no dummy
	// driver); services bind to their own address.
	var hosts []netip.Prefix
	for _, a := range InternetHosts() {
		hosts = append(hosts, netip.PrefixFrom(a, a.BitLen()))
	}
	if err := setUp(hi, "lo", hosts...); err != nil {
		return err
	}
	return nil
}

// wireWAN makes the WAN link: router pppoe-wan (with addrs) <-> internet
// isp0, with the internet's addresses and route on isp0. A link left from
// before is replaced.
func (l *Lab) wireWAN(hr, hi *netlink.Handle, addrs []netip.Prefix) error {
	if old, err := hr.LinkByName(IfWAN); err == nil {
		if err := hr.LinkDel(old); err != nil {
			return fmt.Errorf("removing %s: %w", IfWAN, err)
		}
	}
	wan := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: IfWAN},
		PeerName:      IfISP,
		PeerNamespace: netlink.NsFd(int(l.ns[RoleInternet])),
	}
	if err := hr.LinkAdd(wan); err != nil {
		return fmt.Errorf("adding %s: %w", IfWAN, err)
	}
	if err := setUp(hr, IfWAN, addrs...); err != nil {
		return err
	}
	if err := setUp(hi, IfISP, pfx(WANGateway, WANNet), pfx(WANGw6, WANNet6)); err != nil {
		return err
	}
	// IPv6 is routed, not NATed (as on OpenWrt with a delegated prefix), so
	// the internet needs the LAN's prefix; IPv4 LAN traffic is masqueraded
	// by the router and needs no route here.
	isp, err := hi.LinkByName(IfISP)
	if err != nil {
		return fmt.Errorf("finding %s: %w", IfISP, err)
	}
	if err := hi.RouteAdd(&netlink.Route{
		LinkIndex: isp.Attrs().Index,
		Dst:       ipnet(LANNet6),
		Gw:        WANRouter6.AsSlice(),
	}); err != nil {
		return fmt.Errorf("internet: route to %s: %w", LANNet6, err)
	}
	return nil
}

// wireClient creates client i's veth (the end in hr's namespace enslaved to
// br, the router's br-lan or the OpenWrt router's LAN switch) and
// configures the client's address, MAC and default routes.
func (l *Lab) wireClient(hr *netlink.Handle, br netlink.Link, i int, c Client) error {
	port := fmt.Sprintf("%s%d", bridgePort, i)
	v := &netlink.Veth{
		LinkAttrs:        netlink.LinkAttrs{Name: port, MasterIndex: br.Attrs().Index},
		PeerName:         IfClient,
		PeerHardwareAddr: c.MAC,
		PeerNamespace:    netlink.NsFd(int(l.ns[c.Role])),
	}
	if err := hr.LinkAdd(v); err != nil {
		return fmt.Errorf("adding %s: %w", port, err)
	}
	if err := setUp(hr, port); err != nil {
		return err
	}
	hc, err := netlink.NewHandleAt(l.ns[c.Role])
	if err != nil {
		return fmt.Errorf("netlink in %s: %w", c.Role, err)
	}
	defer hc.Close()
	if err := setUp(hc, "lo"); err != nil {
		return err
	}
	if err := setUp(hc, IfClient, pfx(c.Addr, LANNet), pfx(c.Addr6, LANNet6)); err != nil {
		return fmt.Errorf("%s: %w", c.Role, err)
	}
	if err := defaultRoutes(hc, IfClient, LANRouter, LANRouter6); err != nil {
		return fmt.Errorf("%s: %w", c.Role, err)
	}
	return nil
}

// setUp adds addresses to a link (IPv6 without DAD) and sets it up.
func setUp(h *netlink.Handle, name string, addrs ...netip.Prefix) error {
	link, err := h.LinkByName(name)
	if err != nil {
		return fmt.Errorf("finding %s: %w", name, err)
	}
	for _, p := range addrs {
		a := &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}}
		if p.Addr().Is6() {
			a.Flags = unix.IFA_F_NODAD
		}
		if err := h.AddrAdd(link, a); err != nil {
			return fmt.Errorf("adding %s to %s: %w", p, name, err)
		}
	}
	if err := h.LinkSetUp(link); err != nil {
		return fmt.Errorf("setting %s up: %w", name, err)
	}
	return nil
}

// defaultRoutes points the IPv4 and IPv6 default routes at gateways on dev.
func defaultRoutes(h *netlink.Handle, dev string, gw4, gw6 netip.Addr) error {
	link, err := h.LinkByName(dev)
	if err != nil {
		return fmt.Errorf("finding %s: %w", dev, err)
	}
	for _, gw := range []netip.Addr{gw4, gw6} {
		r := &netlink.Route{LinkIndex: link.Attrs().Index, Gw: gw.AsSlice()}
		if gw.Is6() {
			r.Family = netlink.FAMILY_V6
			r.Dst = &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}
		} else {
			r.Family = netlink.FAMILY_V4
			r.Dst = &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}
		}
		if err := h.RouteAdd(r); err != nil {
			return fmt.Errorf("default route via %s: %w", gw, err)
		}
	}
	return nil
}

// setLinkUp sets a link in ns up or down (the WAN fault).
func setLinkUp(ns netns.NsHandle, name string, up bool) error {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	defer h.Close()
	link, err := h.LinkByName(name)
	if err != nil {
		return fmt.Errorf("finding %s: %w", name, err)
	}
	if up {
		err = h.LinkSetUp(link)
	} else {
		err = h.LinkSetDown(link)
	}
	if err != nil {
		return fmt.Errorf("setting %s up=%v: %w", name, up, err)
	}
	return nil
}

// pfx is addr with the prefix length of the network it sits in.
func pfx(a netip.Addr, n netip.Prefix) netip.Prefix { return netip.PrefixFrom(a, n.Bits()) }

func ipnet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func netlinkHandle(ns netns.NsHandle) (*netlink.Handle, error) {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, fmt.Errorf("netlink: %w", err)
	}
	return h, nil
}

func isExist(err error) bool { return errors.Is(err, unix.EEXIST) }
