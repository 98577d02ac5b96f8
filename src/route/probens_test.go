package route

import (
	"context"
	"net"
	"net/netip"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

func TestProbeAddrIsTheLastHostOfTheLAN(t *testing.T) {
	for in, want := range map[string]string{
		"192.168.1.0/24": "192.168.1.254", "198.18.1.0/24": "198.18.1.254",
		"10.0.0.0/16": "10.0.255.254", "192.168.8.0/30": "192.168.8.2",
	} {
		got, err := probeAddr(netip.MustParsePrefix(in))
		if err != nil || got.String() != want {
			t.Errorf("probeAddr(%s) = %v, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"192.168.1.0/31", "fd00::/64"} {
		if a, err := probeAddr(netip.MustParsePrefix(in)); err == nil {
			t.Errorf("probeAddr(%s) = %v, want an error", in, a)
		}
	}
}

// The probe namespace really sits on the LAN bridge: a connection from it
// reaches the router's LAN address from the probe's own address, and Close
// leaves no link behind.
func TestProbeNamespaceDialsFromTheLAN(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces")
	}
	runtime.LockOSThread() // never unlocked: the thread leaves with the test goroutine
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	ns, err := netns.New()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br-k1test"}}
	if err := netlink.LinkAdd(br); err != nil {
		t.Fatal(err)
	}
	addr, _ := netlink.ParseAddr("10.77.0.1/24")
	if err := netlink.AddrAdd(br, addr); err != nil {
		t.Fatal(err)
	}
	lo, _ := netlink.LinkByName("lo")
	netlink.LinkSetUp(lo)
	if err := netlink.LinkSetUp(br); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp4", "10.77.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	seen := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			seen <- c.RemoteAddr().(*net.TCPAddr).IP.String()
			c.Close()
		}
	}()

	// A bridge with one port of a high MAC: a lower-MAC probe port would
	// otherwise become the bridge's MAC.
	port := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "k1port0", HardwareAddr: net.HardwareAddr{0xfe, 0xff, 0, 0, 0, 1},
		MasterIndex: br.Attrs().Index}, PeerName: "k1port1"}
	if err := netlink.LinkAdd(port); err != nil {
		t.Fatal(err)
	}
	brBefore, _ := netlink.LinkByName("br-k1test")
	p, err := NewProbeNS("br-k1test", netip.Prefix{})
	if err != nil {
		t.Fatal(err)
	}
	if p.addr.String() != "10.77.0.254" {
		t.Errorf("probe address %s, want 10.77.0.254", p.addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := p.DialContext(ctx, "tcp4", ln.Addr().String())
	if err != nil {
		t.Fatalf("dial from the probe namespace: %v", err)
	}
	c.Close()
	select {
	case ip := <-seen:
		if ip != "10.77.0.254" {
			t.Errorf("the router saw the probe from %s, want 10.77.0.254", ip)
		}
	case <-ctx.Done():
		t.Fatal("no connection arrived")
	}
	if brAfter, _ := netlink.LinkByName("br-k1test"); brAfter.Attrs().HardwareAddr.String() != brBefore.Attrs().HardwareAddr.String() {
		t.Errorf("the probe port changed the bridge's MAC from %s to %s (LAN clients' ARP entries go stale)",
			brBefore.Attrs().HardwareAddr, brAfter.Attrs().HardwareAddr)
	}
	if err := p.Close(); err != nil {
		t.Error(err)
	}
	if _, err := netlink.LinkByName(probeHostIf); err == nil {
		t.Error("the probe's veth is still there after Close")
	}
	if cur, _ := netns.Get(); !cur.Equal(ns) {
		t.Error("NewProbeNS changed the caller's namespace")
	}
	if err := netns.Set(orig); err != nil {
		t.Fatal(err)
	}
}
