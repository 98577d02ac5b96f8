package daemon

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"surflare-watchdog/src/config"
	"surflare-watchdog/src/loghealth"
	"surflare-watchdog/src/storm503"
	"surflare-watchdog/src/watchdog"
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

func TestKeepaliveCgroupIsPerRunDir(t *testing.T) {
	if got := keepaliveCgroup(config.Default().Paths.RunDir); got != "" {
		t.Errorf("the router's run dir must use the default group, got %q", got)
	}
	a, b := keepaliveCgroup("/tmp/lab-a/run"), keepaliveCgroup("/tmp/lab-b/run")
	if a != "" && (a == b || !strings.Contains(a, "surflare-proxy-")) {
		t.Errorf("labs share or misname their cgroup: %q %q", a, b)
	}
}

func TestToFieldsWrapsNonObjects(t *testing.T) {
	f, err := toFields([]string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Map()["result"]; !ok {
		t.Errorf("a list must be wrapped as {result: …}, got %v", f.Map())
	}
	f, err = toFields(map[string]any{"state": "healthy", "n": 3})
	if err != nil || f.Map()["state"] != "healthy" {
		t.Errorf("object: %v %v", f.Map(), err)
	}
}

func TestLogRingKeepsTheLastLines(t *testing.T) {
	var r logRing
	for i := range logRingSize + 10 {
		r.add(time.Unix(int64(i), 0), &watchdog.LogLine{Level: "INFO", Message: "line " + string(rune('a'+i%26))})
	}
	if got := len(r.last(0)); got != logRingSize {
		t.Errorf("kept %d lines, want %d", got, logRingSize)
	}
	if got := r.last(2); len(got) != 2 || !strings.HasSuffix(got[1], "line "+string(rune('a'+(logRingSize+9)%26))) {
		t.Errorf("last(2) = %q", got)
	}
}

func TestStormOverrideFollowsTheMonitor(t *testing.T) {
	now := time.Now()
	m := storm503.New(storm503.Options{Count: 3, Window: time.Minute, ActiveWindow: 30 * time.Second, Now: func() time.Time { return now }})
	o := &stormOverride{m: m}
	o.follow("Dallas")
	if _, on := o.Override(now); on {
		t.Fatal("override active without 503s")
	}
	line := func(n string) loghealth.Line {
		return loghealth.Line{Time: now, Node: n, Transit: "auto", Error: "unexpected status: 503 Service Unavailable"}
	}
	for range 3 {
		o.record(line("Miami")) // another node's storm is not ours
	}
	if _, on := o.Override(now); on {
		t.Fatal("override active for another node's 503s")
	}
	for range 3 {
		o.record(line("Dallas"))
	}
	why, on := o.Override(now)
	if !on || !strings.Contains(why, "3 urltest 503s") {
		t.Errorf("after 3 503s: %q %v", why, on)
	}
	if _, on := o.Override(now.Add(time.Minute)); on {
		t.Error("override still active after the active window")
	}
	for range 3 {
		o.record(line("Dallas"))
	}
	o.follow("Los Angeles") // rotated away: Dallas's storm must not veto it
	if _, on := o.Override(now); on {
		t.Error("override active on the node we rotated to")
	}
}

func TestSignalStatesWithDetectorsOff(t *testing.T) {
	s := &signals{}
	names := map[string]string{}
	for _, st := range s.SignalStates() {
		names[st.Name] = st.State
	}
	if names["early_detector"] != "off" || names["log_health"] != "off" || names["keepalive"] != "inactive" {
		t.Errorf("states = %v", names)
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
	p, err := newProbeNS("br-k1test", netip.Prefix{})
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
		t.Error("newProbeNS changed the caller's namespace")
	}
	if err := netns.Set(orig); err != nil {
		t.Fatal(err)
	}
}

// The daemon's logger carries the subsystems' lines as lines of their own:
// level, message, subsystem (they once came through package log as INFO
// with all of that folded into the message).
func TestSetupLoggingKeepsSubsystemLevels(t *testing.T) {
	old := slog.Default()
	t.Cleanup(func() { slog.SetDefault(old) })
	var b syncBuffer
	SetupLogging(&b, slog.LevelInfo)
	m := storm503.New(storm503.Options{Count: 2})
	m.Record(time.Now())
	m.Record(time.Now())
	want := `level=WARN msg="503 storm: 2 urltest 503 in 5m0s" subsystem=storm503`
	if got := b.String(); !strings.Contains(got, want) {
		t.Errorf("missing %s in:\n%s", want, got)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
