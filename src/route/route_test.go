package route

import (
	"context"
	"net"
	"os"
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// freshNS makes a new network namespace with lo up and returns a handle on
// it; the namespace disappears when the test ends (its only reference is the
// fd closed in Cleanup).
func freshNS(t *testing.T) (netns.NsHandle, *Handle) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	ns, err := netns.New()
	if err != nil {
		t.Fatal(err)
	}
	if err := netns.Set(orig); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	h, err := Open(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	lo, err := h.h.LinkByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.h.LinkSetUp(lo); err != nil {
		t.Fatal(err)
	}
	return ns, h
}

// inNS runs fn on a thread switched into ns (sockets it opens live there).
func inNS(t *testing.T, ns netns.NsHandle, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		if err := netns.Set(ns); err != nil {
			t.Error(err)
			return
		}
		fn()
	}()
	<-done
}

func TestEnsureTunnelIdempotentAndDedupe(t *testing.T) {
	ctx := context.Background()
	_, h := freshNS(t)
	for _, fam := range []Family{IPv4, IPv6} {
		changed, err := h.EnsureTunnel(ctx, fam)
		if err != nil || !changed {
			t.Fatalf("%s: first EnsureTunnel = %v, %v; want a change", fam, changed, err)
		}
		changed, err = h.EnsureTunnel(ctx, fam)
		if err != nil || changed {
			t.Fatalf("%s: second EnsureTunnel = %v, %v; want no change", fam, changed, err)
		}
		st, err := h.Tunnel(ctx, fam)
		if err != nil || !st.Complete() || st.Duplicated() || !st.Rules[0].Ours {
			t.Fatalf("%s: state after ensure = %+v, %v", fam, st, err)
		}
	}
	// The vendor adds its own copy (no priority), twice after a botched
	// disconnect: both are duplicates of ours.
	for i := 0; i < 2; i++ {
		r := netlink.NewRule()
		r.Mark, r.Table, r.Family = MarkTunnel, TunnelTable, unix.AF_INET
		if err := h.h.RuleAdd(r); err != nil {
			t.Fatal(err)
		}
	}
	st, _ := h.Tunnel(ctx, IPv4)
	if len(st.Rules) != 3 || !st.Duplicated() {
		t.Fatalf("want 3 rules seen as duplicated, got %+v", st)
	}
	n, err := h.Dedupe(ctx, IPv4)
	if err != nil || n != 2 {
		t.Fatalf("Dedupe = %d, %v; want 2 removed", n, err)
	}
	st, _ = h.Tunnel(ctx, IPv4)
	if len(st.Rules) != 1 || !st.Rules[0].Ours {
		t.Fatalf("Dedupe kept %+v, want our rule only", st.Rules)
	}
	// Removing ours leaves nothing of the tunnel routing.
	for _, fam := range []Family{IPv4, IPv6} {
		if _, err := h.RemoveTunnel(ctx, fam, false); err != nil {
			t.Fatal(err)
		}
		st, err := h.Tunnel(ctx, fam)
		if err != nil || len(st.Rules) != 0 || st.LocalRoute {
			t.Fatalf("%s: after RemoveTunnel: %+v, %v", fam, st, err)
		}
		if n, err := h.RemoveTunnel(ctx, fam, true); err != nil || n != 0 {
			t.Fatalf("%s: RemoveTunnel on nothing = %d, %v", fam, n, err)
		}
	}
}

func TestRemoveTunnelKeepsVendorRouteUnlessAll(t *testing.T) {
	ctx := context.Background()
	_, h := freshNS(t)
	if _, err := h.EnsureTunnel(ctx, IPv4); err != nil {
		t.Fatal(err)
	}
	r := netlink.NewRule()
	r.Mark, r.Table, r.Family, r.Priority = MarkTunnel, TunnelTable, unix.AF_INET, 32000
	if err := h.h.RuleAdd(r); err != nil {
		t.Fatal(err)
	}
	if _, err := h.RemoveTunnel(ctx, IPv4, false); err != nil {
		t.Fatal(err)
	}
	st, _ := h.Tunnel(ctx, IPv4)
	if len(st.Rules) != 1 || st.Rules[0].Ours || !st.LocalRoute {
		t.Fatalf("vendor's rule and the route it needs must stay: %+v", st)
	}
	if _, err := h.RemoveTunnel(ctx, IPv4, true); err != nil {
		t.Fatal(err)
	}
	if st, _ := h.Tunnel(ctx, IPv4); len(st.Rules) != 0 || st.LocalRoute {
		t.Fatalf("all=true must clear everything: %+v", st)
	}
}

func TestWANDeviceNeighboursAndTCPSockets(t *testing.T) {
	ctx := context.Background()
	ns, h := freshNS(t)
	if _, err := h.WANDevice(ctx); err != ErrNoDefaultRoute {
		t.Fatalf("WANDevice without default route: err = %v", err)
	}
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "wan0"}, PeerName: "wan0p"}
	if err := h.h.LinkAdd(veth); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"wan0", "wan0p"} {
		l, _ := h.h.LinkByName(name)
		if err := h.h.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}
	wan, _ := h.h.LinkByName("wan0")
	addr, _ := netlink.ParseAddr("198.18.2.2/24")
	if err := h.h.AddrAdd(wan, addr); err != nil {
		t.Fatal(err)
	}
	gw := net.ParseIP("198.18.2.1")
	if err := h.h.RouteAdd(&netlink.Route{LinkIndex: wan.Attrs().Index, Gw: gw}); err != nil {
		t.Fatal(err)
	}
	dev, err := h.WANDevice(ctx)
	if err != nil || dev != "wan0" {
		t.Fatalf("WANDevice = %q, %v; want wan0", dev, err)
	}
	mac, _ := net.ParseMAC("02:00:00:00:00:42")
	if err := h.h.NeighAdd(&netlink.Neigh{LinkIndex: wan.Attrs().Index, IP: gw, HardwareAddr: mac,
		State: netlink.NUD_PERMANENT, Family: unix.AF_INET}); err != nil {
		t.Fatal(err)
	}
	ns2, err := h.Neighbours(ctx, "wan0")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, n := range ns2 {
		if n.IP.String() == "198.18.2.1" && n.MAC.String() == mac.String() && n.Dev == "wan0" {
			found = true
		}
	}
	if !found {
		t.Fatalf("Neighbours = %+v, want 198.18.2.1 at %s", ns2, mac)
	}

	var ln net.Listener
	inNS(t, ns, func() {
		var err error
		ln, err = net.Listen("tcp4", "127.0.0.1:10800")
		if err != nil {
			t.Error(err)
		}
	})
	if ln == nil {
		t.FailNow()
	}
	defer ln.Close()
	// The host namespace's sockets must not leak into the answer (DESIGN
	// §9: without NETLINK_INET_DIAG the handle asks the caller's namespace).
	host, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	hostPort := uint16(host.Addr().(*net.TCPAddr).Port)
	hc, err := net.Dial("tcp4", host.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	// An established connection shows up with tcp_info.
	var c net.Conn
	inNS(t, ns, func() { c, _ = net.Dial("tcp4", "127.0.0.1:10800") })
	if c == nil {
		t.Fatal("dial in namespace failed")
	}
	defer c.Close()
	srv, _ := ln.Accept()
	defer srv.Close()
	socks, err := h.TCPSockets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range socks {
		if s.Local.Port() == hostPort || s.Remote.Port() == hostPort {
			t.Errorf("sock_diag answered from the caller's namespace: %v -> %v", s.Local, s.Remote)
		}
		if s.Local.Port() == 10800 || s.Remote.Port() == 10800 {
			n++
			if s.Info == nil {
				t.Errorf("established socket %v without tcp_info", s.Local)
			}
		}
	}
	if n != 2 {
		t.Fatalf("want both ends of the connection, got %d of %d sockets", n, len(socks))
	}
}

// E7: a killed long-lived CLI or a failed disconnect leaves the vendor's
// rule once per connect and table 100's routes; RemoveTunnel(all) drains
// every copy and flushes the table, in both families.
func TestRemoveTunnelAllDrainsDuplicatesAndFlushesTable100(t *testing.T) {
	ctx := context.Background()
	_, h := freshNS(t)
	lo, err := loIndex(h.h)
	if err != nil {
		t.Fatal(err)
	}
	for _, fam := range []Family{IPv4, IPv6} {
		for i := 0; i < 3; i++ { // kernel-chosen priorities, as the vendor adds them
			r := netlink.NewRule()
			r.Mark, r.Table, r.Family = MarkTunnel, TunnelTable, int(fam)
			if err := h.h.RuleAdd(r); err != nil {
				t.Fatal(err)
			}
		}
		for _, rt := range []*netlink.Route{
			{LinkIndex: lo, Dst: defaultDst(fam), Table: TunnelTable, Type: unix.RTN_LOCAL, Scope: unix.RT_SCOPE_HOST, Family: int(fam)},
			{LinkIndex: lo, Dst: hostPrefix(fam), Table: TunnelTable, Type: unix.RTN_LOCAL, Scope: unix.RT_SCOPE_HOST, Family: int(fam)},
		} {
			if err := h.h.RouteAdd(rt); err != nil {
				t.Fatalf("%s: planting %v: %v", fam, rt, err)
			}
		}
		if st, _ := h.Tunnel(ctx, fam); len(st.Rules) != 3 || !st.LocalRoute {
			t.Fatalf("%s: planted state %+v", fam, st)
		}
		n, err := h.RemoveTunnel(ctx, fam, true)
		if err != nil || n != 5 {
			t.Errorf("%s: RemoveTunnel(all) = %d, %v; want 5 (3 rules, 2 routes)", fam, n, err)
		}
		if st, _ := h.Tunnel(ctx, fam); len(st.Rules) != 0 || st.LocalRoute {
			t.Errorf("%s: left %+v", fam, st)
		}
		if rs, _ := h.h.RouteListFiltered(int(fam), &netlink.Route{Table: TunnelTable}, netlink.RT_FILTER_TABLE); len(rs) != 0 {
			t.Errorf("%s: table %d not flushed: %v", fam, TunnelTable, rs)
		}
	}
}

func hostPrefix(fam Family) *net.IPNet {
	if fam == IPv6 {
		return &net.IPNet{IP: net.ParseIP("fd00:99::1"), Mask: net.CIDRMask(128, 128)}
	}
	return &net.IPNet{IP: net.IPv4(198, 18, 99, 1).To4(), Mask: net.CIDRMask(32, 32)}
}
