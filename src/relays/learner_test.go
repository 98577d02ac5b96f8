package relays

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"
)

// fakeConntrack answers with the flows it holds.
type fakeConntrack struct {
	mu    sync.Mutex
	flows []Flow
}

func (f *fakeConntrack) Flows(context.Context) ([]Flow, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.flows), nil
}

// fakeClock moves only when told to.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time                       { return c.now }
func (c *fakeClock) After(time.Duration) <-chan time.Time { return make(chan time.Time) }

type added struct {
	mu  sync.Mutex
	all [][]netip.Addr
}

func (a *added) add(_ context.Context, rs []netip.Addr) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.all = append(a.all, rs)
	return nil
}

func flow(tcp bool, src, dst string) Flow {
	return Flow{TCP: tcp, Src: netip.MustParseAddrPort(src), Dst: netip.MustParseAddrPort(dst)}
}

// The router's own TCP flows to a vendor server port name the relays; the
// LAN's flows, UDP, other ports and private or loopback destinations do
// not, and a relay is handed to the firewall once.
func TestLearnerTakesTheRoutersFlowsToServerPorts(t *testing.T) {
	ct := &fakeConntrack{flows: []Flow{
		flow(true, "198.18.0.2:40000", "203.0.113.7:8443"),    // a relay
		flow(true, "198.18.0.2:40001", "203.0.113.7:8443"),    // the same one again
		flow(true, "198.18.0.2:40002", "203.0.113.8:443"),     // not a server port
		flow(false, "198.18.0.2:40003", "203.0.113.9:8443"),   // UDP
		flow(true, "192.168.1.20:50000", "203.0.113.10:8443"), // a LAN client's (not the router's)
		flow(true, "127.0.0.1:40004", "127.0.0.1:8443"),       // loopback
	}}
	var a added
	ports := 0
	clk := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	l := New(Options{
		Conntrack:   ct,
		ServerPorts: func(context.Context) map[uint16]bool { ports++; return map[uint16]bool{8443: true} },
		LocalAddrs: func() (map[netip.Addr]bool, error) {
			return map[netip.Addr]bool{netip.MustParseAddr("198.18.0.2"): true, netip.MustParseAddr("127.0.0.1"): true}, nil
		},
		Add:   a.add,
		Clock: clk,
	})
	ctx := context.Background()
	l.Scan(ctx)
	want := [][]netip.Addr{{netip.MustParseAddr("203.0.113.7")}}
	if !slices.EqualFunc(a.all, want, slices.Equal) {
		t.Fatalf("added %v, want %v", a.all, want)
	}

	// Known relays are not added again; a new one is, alone.
	ct.flows = append(ct.flows, flow(true, "198.18.0.2:40005", "203.0.113.11:8443"))
	l.Scan(ctx)
	want = append(want, []netip.Addr{netip.MustParseAddr("203.0.113.11")})
	if !slices.EqualFunc(a.all, want, slices.Equal) {
		t.Fatalf("after a second scan added %v, want %v", a.all, want)
	}

	// The detector's samples feed the same memory.
	l.Observe(ctx, []netip.AddrPort{netip.MustParseAddrPort("203.0.113.7:8443"), netip.MustParseAddrPort("203.0.113.12:8443")})
	if got := a.all[len(a.all)-1]; len(a.all) != 3 || !slices.Equal(got, []netip.Addr{netip.MustParseAddr("203.0.113.12")}) {
		t.Errorf("observe added %v", a.all)
	}

	// The server ports are read once a minute, not on every scan.
	if ports != 1 {
		t.Errorf("server ports read %d times within a minute, want 1", ports)
	}
	clk.now = clk.now.Add(serverPortsTTL + time.Second)
	l.Scan(ctx)
	if ports != 2 {
		t.Errorf("server ports read %d times after the TTL, want 2", ports)
	}
}

// Without a vendor table (no server ports) nothing is learned, and the
// ports are asked again at the next scan rather than trusted for a minute.
func TestLearnerWithoutServerPortsLearnsNothing(t *testing.T) {
	var a added
	ports := 0
	l := New(Options{
		Conntrack:   &fakeConntrack{flows: []Flow{flow(true, "198.18.0.2:40000", "203.0.113.7:8443")}},
		ServerPorts: func(context.Context) map[uint16]bool { ports++; return map[uint16]bool{} },
		LocalAddrs: func() (map[netip.Addr]bool, error) {
			return map[netip.Addr]bool{netip.MustParseAddr("198.18.0.2"): true}, nil
		},
		Add:   a.add,
		Clock: &fakeClock{now: time.Unix(1_700_000_000, 0)},
	})
	l.Scan(context.Background())
	l.Scan(context.Background())
	if len(a.all) != 0 || ports != 2 {
		t.Errorf("added %v, ports read %d times; want nothing added and 2 reads", a.all, ports)
	}
}
