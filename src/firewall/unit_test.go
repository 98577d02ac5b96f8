package firewall

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"

	"surflare-watchdog/src/route"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// goldenSpecs cover the mode matrix (DESIGN §5).
func goldenSpecs() map[string]Spec {
	out := map[string]Spec{}
	s := labSpec()
	s.Bypass = []Device{{Name: "tv", MAC: mustMAC("02:00:00:00:01:0b"), IPs: []netip.Addr{mustAddr("198.18.1.11")}}}
	out["router-rule"] = s
	g := s
	g.Mode = ModeGlobal
	g.IPv6 = IPv6Proxy
	g.CNDirect6 = mustPrefixes("fd00:19::/32")
	g.Relays = append(g.Relays, netip.MustParsePrefix("fd00:10::1/128"))
	out["router-global-ipv6-proxy"] = g
	l := labSpec()
	l.Role = RoleLaptop
	l.LANIf = ""
	out["laptop"] = l
	d := labSpec()
	d.ProxyDown = true
	out["router-tombstoned"] = d
	st := s
	st.Mode = ModeGlobal // strict direct narrows in global mode only
	st.StrictDirect = true
	st.ServerPorts = []uint16{8443, 9443}
	out["router-strict"] = st
	// Rule and direct mode with strict direct on: the same kill switch as
	// without it (StrictDirectScope); direct adds nothing to the vendor's table.
	rs := s
	rs.StrictDirect = true
	rs.ServerPorts = []uint16{8443, 9443}
	out["router-rule-strict"] = rs
	ds := rs
	ds.Mode = ModeDirect
	out["router-direct-strict"] = ds
	return out
}

func TestRenderGolden(t *testing.T) {
	for name, s := range goldenSpecs() {
		t.Run(name, func(t *testing.T) {
			got, err := Render(s)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", name+".nft")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("plan for %s differs from %s (go test -update rewrites it):\n%s", name, path, got)
			}
		})
	}
}

// The mode matrix in behavioural terms: which tables and which key rules.
func TestModeMatrix(t *testing.T) {
	specs := goldenSpecs()
	plan := func(name string) string {
		p, err := Render(specs[name])
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	laptop := plan("laptop")
	for _, absent := range []string{"table ip " + TableTProxy, "table ip " + TableDNS, "chain forward", "br-lan"} {
		if strings.Contains(laptop, absent) {
			t.Errorf("laptop plan contains %q", absent)
		}
	}
	for _, present := range []string{"table inet " + TableKillSwitch, "table inet " + TableMoat, "policy drop", "meta nfproto ipv6 counter name \"blocked_v6\" drop"} {
		if !strings.Contains(laptop, present) {
			t.Errorf("laptop plan lacks %q", present)
		}
	}
	rule := plan("router-rule")
	for _, present := range []string{
		"tproxy to 127.0.0.1:10800 meta mark set 0x00000001 accept",
		"udp dport 443 @th,72,16 0xfefd return",
		"udp dport 443 reject",
		"udp dport 53 redirect to :53",
		"ip saddr @vpn_bypass return",
		"oifname \"br-lan\" accept",
		"meta mark 0x00000001 oifname != \"lo\" counter name \"unrouted_mark\" drop",
		"ether saddr @bypass_devices accept",
		"02:00:00:00:01:0b",
	} {
		if !strings.Contains(rule, present) {
			t.Errorf("router plan lacks %q", present)
		}
	}
	if strings.Contains(rule, TableTProxy6) || strings.Contains(rule, "inet surflare ") {
		t.Error("rule mode with IPv6 blocked must not have the IPv6 tproxy table or vendor additions")
	}
	global := plan("router-global-ipv6-proxy")
	for _, present := range []string{"table ip6 " + TableTProxy6, "tproxy to [::1]:10800", "ip6 daddr @endpoints6 accept",
		"# insert rule inet surflare <chain> ip daddr @sw_cn_direct4 accept"} {
		if !strings.Contains(global, present) {
			t.Errorf("global/proxy plan lacks %q", present)
		}
	}
	if strings.Contains(global, "blocked_v6\" drop") {
		t.Error("IPv6 proxy policy must not block IPv6 wholesale")
	}
	if !strings.Contains(plan("router-tombstoned"), "meta l4proto tcp reject with tcp reset comment \"tombstone") {
		t.Error("tombstoned plan must reset LAN TCP")
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	s := DefaultSpec()
	s.LANIf = ""
	s.ProxyPort = 0
	s.CNDirect4 = mustPrefixes("fd00::/8")
	s.Bypass = []Device{{Name: "tv"}}
	err := s.Validate()
	if err == nil {
		t.Fatal("invalid spec accepted")
	}
	for _, want := range []string{"LAN interface", "proxy port is 0", "cn_direct v4: fd00::/8 is of the wrong address family", "bypass device tv"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if _, err := Render(s); err == nil {
		t.Error("Render accepted an invalid spec")
	}
}

func TestMergeRangesAndReadBack(t *testing.T) {
	got := mergeRanges(mustPrefixes("10.0.1.0/24", "10.0.0.0/24", "10.0.0.128/25", "10.0.3.0/24", "255.255.255.0/24", "::/0"), false)
	want := []string{"10.0.0.0/23", "10.0.3.0/24", "255.255.255.0/24"}
	if len(got) != len(want) {
		t.Fatalf("mergeRanges = %v", got)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("range %d = %s, want %s", i, got[i], want[i])
		}
	}
	// What the kernel gives back (interval ends, in any order) reads as the same.
	s := setSpec{name: "x", kind: kindIPv4, interval: true, ranges: got}
	elems := s.elements()
	if len(elems) != 5 { // the top range has no end element
		t.Fatalf("elements = %d, want 5", len(elems))
	}
	rev := make([]setKey, len(elems))
	for i, e := range keysOf(elems) {
		rev[len(elems)-1-i] = e
	}
	if kc := readContent(kindIPv4, true, rev); !sameContent(s, kc) {
		t.Fatalf("read back %v, want %v", kc.ranges, got)
	}
	if r := (addrRange{mustAddr("10.0.0.1"), mustAddr("10.0.0.5")}); r.String() != "10.0.0.1-10.0.0.5" {
		t.Errorf("non-prefix range renders as %s", r)
	}
	if sameContent(s, readContent(kindIPv4, true, keysOf(elems[:2]))) {
		t.Error("a missing range compares equal")
	}
}

// keysOf is what dumpSetKeys would read back for elems.
func keysOf(elems []nftables.SetElement) []setKey {
	out := make([]setKey, len(elems))
	for i, e := range elems {
		out[i] = setKey{key: e.Key, end: e.IntervalEnd}
	}
	return out
}

func TestChnrouteAndAPNIC(t *testing.T) {
	ps, err := ParseChnroute("cn.txt", strings.NewReader("# comment\n1.0.1.0/24\n\n1.0.2.0/23 # trailing\n240e::/18\n192.0.2.8\n"))
	if err != nil || len(ps) != 4 || ps[3].String() != "192.0.2.8/32" {
		t.Fatalf("ParseChnroute = %v, %v", ps, err)
	}
	if _, err := ParseChnroute("cn.txt", strings.NewReader("1.0.1.0/24\nnot-a-prefix\n")); err == nil || !strings.Contains(err.Error(), "cn.txt:2:") {
		t.Fatalf("bad line error = %v, want file:line", err)
	}
	v4, v6 := SplitFamilies(ps)
	if len(v4) != 3 || len(v6) != 1 {
		t.Fatalf("SplitFamilies = %v %v", v4, v6)
	}

	data := `2|apnic|20261128|1|19830613|20261127|+1000
apnic|*|ipv4|*|1|summary
apnic|CN|ipv4|1.0.1.0|256|20110414|allocated
apnic|CN|ipv4|1.0.4.0|768|20110412|allocated
apnic|JP|ipv4|1.0.16.0|4096|20110412|allocated
apnic|CN|ipv6|240e::|18|20130703|allocated
apnic|CN|asn|4134|1|20020801|allocated
`
	v4, v6, err = ParseAPNIC(strings.NewReader(data), "CN")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(strs(v4), " ") != "1.0.1.0/24 1.0.4.0/23 1.0.6.0/24" || strings.Join(strs(v6), " ") != "240e::/18" {
		t.Fatalf("ParseAPNIC = %v %v", v4, v6)
	}

	// routes update: fetch from a local server and write both files.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(data)) }))
	defer srv.Close()
	v4, v6, err = FetchAPNIC(context.Background(), srv.Client(), srv.URL, "CN")
	if err != nil || len(v4) != 3 || len(v6) != 1 {
		t.Fatalf("FetchAPNIC = %v %v %v", v4, v6, err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "chnroute.txt")
	os.WriteFile(out, []byte("old\n"), 0o644)
	if err := WriteChnroute(out, v4); err != nil {
		t.Fatal(err)
	}
	back, err := LoadChnroute(out)
	if err != nil || strings.Join(strs(back), " ") != strings.Join(strs(v4), " ") {
		t.Fatalf("round trip = %v, %v", back, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("temporary files left: %v", ents)
	}
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("<html>oops</html>")) }))
	defer bad.Close()
	if _, _, err := FetchAPNIC(context.Background(), bad.Client(), bad.URL, "CN"); err == nil {
		t.Fatal("a page without records was accepted")
	}
}

func strs(ps []netip.Prefix) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.String())
	}
	return out
}

type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time { return c.now }

// After never fires: the firewall's clock only rate-limits.
func (c *fakeClock) After(time.Duration) <-chan time.Time { return nil }

func TestFW4ReloadIsRateLimitedAndNeverRestarts(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	var calls []string
	fail := false
	fw := New(WithClock(clk), WithFW4ReloadGap(time.Minute), WithRunner(func(ctx context.Context, name string, args ...string) ([]byte, error) {
		calls = append(calls, name+" "+strings.Join(args, " "))
		if fail {
			return []byte("boom"), errors.New("exit status 1")
		}
		return nil, nil
	}))
	ctx := context.Background()
	if ok, err := fw.reloadFW4(ctx); !ok || err != nil {
		t.Fatalf("first reload = %v, %v", ok, err)
	}
	clk.now = clk.now.Add(30 * time.Second)
	if ok, _ := fw.reloadFW4(ctx); ok {
		t.Fatal("second reload within the gap was not rate-limited")
	}
	clk.now = clk.now.Add(31 * time.Second)
	fail = true
	if ok, err := fw.reloadFW4(ctx); !ok || err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("reload after the gap = %v, %v", ok, err)
	}
	if len(calls) != 2 || calls[0] != "fw4 reload" || calls[1] != "fw4 reload" {
		t.Fatalf("commands = %q; want two `fw4 reload`", calls)
	}
}

func TestGuardEventClassification(t *testing.T) {
	ev := func(typ nftables.MonitorEventType, data any) *nftables.MonitorEvent {
		return &nftables.MonitorEvent{Type: typ, Data: data}
	}
	ks := &nftables.Table{Family: famInet, Name: TableKillSwitch}
	cases := []struct {
		ev   *nftables.MonitorEvent
		want bool
	}{
		{ev(nftables.MonitorEventTypeDelTable, ks), true},
		{ev(nftables.MonitorEventTypeNewTable, ks), false}, // our own apply
		{ev(nftables.MonitorEventTypeDelRule, &nftables.Rule{Table: &nftables.Table{Family: famIP, Name: TableTProxy}}), true},
		{ev(nftables.MonitorEventTypeDelTable, &nftables.Table{Family: famInet, Name: TableTrace}), false},
		{ev(nftables.MonitorEventTypeNewTable, &nftables.Table{Family: famInet, Name: TableBootLock}), true},
		{ev(nftables.MonitorEventTypeNewChain, &nftables.Chain{Table: &nftables.Table{Family: famInet, Name: TableVendor}}), true},
		{ev(nftables.MonitorEventTypeDelTable, &nftables.Table{Family: famInet, Name: "fw4"}), false},
		{ev(nftables.MonitorEventTypeDelTable, &nftables.Table{Family: famIP6, Name: TableKillSwitch}), false},
	}
	for i, c := range cases {
		if got := relevant(c.ev) != ""; got != c.want {
			t.Errorf("case %d (%v %+v): relevant = %v", i, c.ev.Type, c.ev.Data, got)
		}
	}
}

func TestBypassResolution(t *testing.T) {
	leases := ParseDHCPLeases(strings.NewReader(`1764430000 02:00:00:00:01:0b 198.18.1.11 tv 01:02:00:00:00:01:0b
garbage
1764430000 zz:zz 198.18.1.12 x *
1764430000 02:00:00:00:01:0c 198.18.1.12 phone *
`))
	if len(leases) != 2 || leases["02:00:00:00:01:0b"][0] != mustAddr("198.18.1.11") {
		t.Fatalf("leases = %v", leases)
	}
	neigh := []route.Neighbour{
		{Dev: "br-lan", IP: mustAddr("fd00:1::b"), MAC: mustMAC("02:00:00:00:01:0b")},
		{Dev: "br-lan", IP: mustAddr("fe80::b"), MAC: mustMAC("02:00:00:00:01:0b")},
		{Dev: "br-lan", IP: mustAddr("198.18.1.99"), MAC: mustMAC("02:00:00:00:01:99")},
	}
	devs := ResolveBypass([]Device{{Name: "tv", MAC: mustMAC("02:00:00:00:01:0b")}, {Name: "fixed", IPs: []netip.Addr{mustAddr("198.18.1.50")}}}, leases, neigh)
	if got := fmt.Sprint(devs[0].IPs); got != "[198.18.1.11 fd00:1::b]" {
		t.Errorf("tv addresses = %s", got)
	}
	if got := fmt.Sprint(devs[1].IPs); got != "[198.18.1.50]" {
		t.Errorf("fixed addresses = %s", got)
	}
}
