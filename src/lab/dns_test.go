package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"surflare-watchdog/src/firewall"
)

// upDNS brings up a full lab with the router's real resolvers and the
// watchdog's firewall (spec), connected through Dallas.
func upDNS(t *testing.T, spec func(*Lab) firewall.Spec) (*Lab, *firewall.Firewall) {
	t.Helper()
	for _, b := range []string{DefaultDnsmasq, DefaultSmartDNS} {
		if _, err := os.Stat(b); err != nil {
			t.Fatalf("%s missing (apt-get install dnsmasq-base smartdns): %v", b, err)
		}
	}
	l := upFull(t, Options{DNS: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fw, err := l.ApplyWatchdogFirewall(ctx, spec(l))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Connect(ctx, "Dallas"); err != nil {
		t.Fatal(err)
	}
	return l, fw
}

func defaultSpec(l *Lab) firewall.Spec { return l.WatchdogSpec() }

// A LAN client that asks an outside resolver gets the router's answer: a
// name only the router's dnsmasq knows resolves, and nothing of it reaches
// the outside resolver or leaves the WAN.
func TestDNSOutsideResolverIsAnsweredByTheRouter(t *testing.T) {
	l, _ := upDNS(t, defaultSpec)
	ctx := context.Background()
	a, err := l.ClientResolve(ctx, 0, ForeignDNS, RouterName, 2*time.Second)
	if err != nil || a.Rcode != RcodeOK || len(a.Addrs) != 1 || a.Addrs[0] != LANRouter {
		t.Fatalf("%s asked at %s: %+v, %v; want the router's own answer %s", RouterName, ForeignDNS, a, err, LANRouter)
	}
	// TCP too.
	a, err = l.Resolve(ctx, l.clients[0].Role, netip.AddrPortFrom(DoH, 53), "tcp", RouterName, 2*time.Second)
	if err != nil || len(a.Addrs) != 1 || a.Addrs[0] != LANRouter {
		t.Errorf("TCP query to an outside address: %+v, %v; want the router's answer", a, err)
	}
	if qs, _ := l.QueriesFor(RouterName); len(qs) != 0 {
		t.Errorf("the outside resolver was asked: %+v", qs)
	}
	if lc, _ := l.Leaks(ctx); lc.DNS4+lc.DNS6 != 0 {
		t.Errorf("DNS left the WAN: %s", lc)
	}
}

// A foreign name is resolved only through the tunnel: the foreign resolver
// sees the exit node's address and no port-53 packet leaves the WAN.
func TestDNSForeignNameOnlyThroughTheTunnel(t *testing.T) {
	l, _ := upDNS(t, defaultSpec)
	ctx := context.Background()
	name := UniqueName("f", "foreign.lab")
	a, err := l.ClientResolve(ctx, 0, LANRouter, name, 3*time.Second)
	if err != nil || len(a.Addrs) != 1 || a.Addrs[0] != Search {
		t.Fatalf("%s: %+v, %v; want %s", name, a, err, Search)
	}
	qs, err := l.QueriesFor(name)
	if err != nil || len(qs) == 0 {
		t.Fatalf("the foreign resolver never saw %s: %v", name, err)
	}
	for _, q := range qs {
		if q.Resolver != ForeignDNS.String() || q.From != Nodes[0].Addr.String() {
			t.Errorf("question %+v: want it at %s from Dallas's address %s", q, ForeignDNS, Nodes[0].Addr)
		}
	}
	if lc, _ := l.Leaks(ctx); lc.Total() != 0 {
		t.Errorf("leaks: %s", lc)
	}
}

// The dns-leak scenario against the real daemon: healthy, a rotate to
// Chicago and a daemon restart (the kill switch armed while it is down), no
// DNS packet outside the tunnel in any of them, every question seen from an
// exit node, and the JSON in the scenario format. The daemon applies the
// firewall and DNS rules itself; the test applies nothing.
func TestDNSLeakScenario(t *testing.T) {
	for _, b := range []string{DefaultDnsmasq, DefaultSmartDNS} {
		if _, err := os.Stat(b); err != nil {
			t.Fatalf("%s missing (apt-get install dnsmasq-base smartdns): %v", b, err)
		}
	}
	l := upFull(t, Options{DNS: true})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", tail(l.DaemonLog(), 60))
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := DNSLeakScenario(ctx, DNSLeakOptions{Lab: l, Settle: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	res.WriteJSON(&buf)
	t.Logf("%s", buf.String())
	if len(res.Runs) != 3 {
		t.Fatalf("%d runs, want healthy, failover, restart", len(res.Runs))
	}
	for i, phase := range []string{PhaseHealthy, PhaseFailover, PhaseRestart} {
		r := res.Runs[i]
		if r.Extra["phase"] != phase {
			t.Errorf("run %d is phase %v, want %s", i, r.Extra["phase"], phase)
		}
		if r.Error != "" || !r.Recovered || r.RecoverS == nil {
			t.Errorf("%s: not recovered: %s %s", phase, r.Error, r.Outcome)
		}
		if r.LeakedPackets != 0 || r.Extra["resolver_saw_direct"] != 0 {
			t.Errorf("%s: leaked %d packets (%s), resolver saw %v", phase, r.LeakedPackets, r.Leaks, r.Extra["resolver_saw"])
		}
	}
	if saw, _ := res.Runs[0].Extra["resolver_saw"].(map[string]int); saw["Dallas"] == 0 {
		t.Errorf("while healthy on Dallas the foreign resolver never saw Dallas: %v", saw)
	}
	if saw, _ := res.Runs[1].Extra["resolver_saw"].(map[string]int); saw["Chicago"] == 0 {
		t.Errorf("after the failover the foreign resolver never saw Chicago: %v", saw)
	}
	if n := res.Runs[1].Extra["daemon_node"]; n != "Chicago" {
		t.Errorf("after the rotate the daemon is on %v, want Chicago", n)
	}
	if armed := res.Runs[2].Extra["killswitch_armed_while_stopped"]; armed != true {
		t.Errorf("kill switch armed while the daemon was stopped: %v", armed)
	}
	for i, r := range res.Runs {
		if r.Extra["daemon_state"] != "healthy" {
			t.Errorf("run %d (%v): daemon %v at the end of the phase", i, r.Extra["phase"], r.Extra["daemon_state"])
		}
	}
	if l.DaemonRunning() {
		t.Errorf("the scenario started the daemon and left it running")
	}
	if res.Summary.MaxLeakedPackets != 0 || res.Summary.RecoveredRuns != 3 {
		t.Errorf("summary %+v", res.Summary)
	}
	var generic map[string]any
	if err := json.Unmarshal(buf.Bytes(), &generic); err != nil || generic["scenario"] != ScenarioDNSLeak {
		t.Errorf("JSON: %v, scenario=%v", err, generic["scenario"])
	}
}

// A domestic name is resolved directly (the domestic resolver sees the
// household's WAN address), SmartDNS puts its address into the kill
// switch's domestic_domain_ips at once, and after the watchdog's sync a LAN
// client reaches it directly. cn_direct is left empty and the proxy is
// tombstoned, so the domestic set is the only way through.
func TestDNSDomesticNameDirectAndInKillSwitch(t *testing.T) {
	l, fw := upDNS(t, func(l *Lab) firewall.Spec {
		s := l.WatchdogSpec()
		s.CNDirect4 = nil
		s.ProxyDown = true
		return s
	})
	ctx := context.Background()
	url := "http://" + DomesticWeb.String() + "/"
	if f := l.ClientFetch(ctx, 0, url); f.Err == nil {
		t.Fatalf("before the name is resolved the domestic host must be unreachable (tombstone), got HTTP %d", f.Status)
	}
	name := UniqueName("d", DomesticZone)
	start := time.Now()
	a, err := l.ClientResolve(ctx, 0, LANRouter, name, 3*time.Second)
	if err != nil || len(a.Addrs) != 1 || a.Addrs[0] != DomesticWeb {
		t.Fatalf("%s: %+v, %v; want %s", name, a, err, DomesticWeb)
	}
	qs, _ := l.QueriesFor(name)
	if len(qs) == 0 {
		t.Fatal("the domestic resolver never saw the question")
	}
	for _, q := range qs {
		if q.Resolver != DomesticDNS.String() || q.From != WANRouter.String() {
			t.Errorf("question %+v: want it at the domestic resolver %s, directly from %s", q, DomesticDNS, WANRouter)
		}
	}
	inSet := func(table string, fam string) time.Duration {
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			as, err := l.RouterSetAddrs(fam, table, firewall.SetDomestic)
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range as {
				if x == DomesticWeb {
					return time.Since(start)
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("%s never reached %s %s %s", DomesticWeb, fam, table, firewall.SetDomestic)
		return 0
	}
	ks := inSet(firewall.TableKillSwitch, "inet")
	t.Logf("domestic answer in the kill switch's set %v after the query", ks.Round(time.Millisecond))
	if _, err := fw.SyncDomestic(ctx, firewall.DomesticSource); err != nil { // what the daemon's Guard does every 5 s
		t.Fatal(err)
	}
	lan := inSet(firewall.TableTProxy, "ip")
	t.Logf("and in the LAN tproxy table's set %v after (one sync)", lan.Round(time.Millisecond))
	body, err := l.ClientGet(ctx, 0, url)
	if err != nil {
		t.Fatalf("after resolution the LAN client must reach the domestic host directly: %v", err)
	}
	if e, _ := ParseEcho(body); e.IP != WANRouter.String() {
		t.Errorf("domestic host saw %q, want the household's WAN address %s", e.IP, WANRouter)
	}
}

// A bypassed device keeps its own resolver: its query reaches the outside
// resolver directly (from the household's address), while another client's
// is still answered by the router.
func TestDNSBypassedDeviceIsNotRedirected(t *testing.T) {
	l, _ := upDNS(t, func(l *Lab) firewall.Spec {
		s := l.WatchdogSpec()
		mac, _ := net.ParseMAC(ClientMAC(1))
		s.Bypass = []firewall.Device{{Name: "tv", MAC: mac}}
		return s
	})
	ctx := context.Background()
	if a, err := l.ClientResolve(ctx, 1, ForeignDNS, RouterName, 2*time.Second); err != nil || a.Rcode != RcodeNXDomain {
		t.Errorf("bypassed client asking %s for %s: %+v, %v; want the outside resolver's NXDOMAIN", ForeignDNS, RouterName, a, err)
	}
	name := UniqueName("b", "foreign.lab")
	if _, err := l.ClientResolve(ctx, 1, ForeignDNS, name, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	qs, _ := l.QueriesFor(name)
	if len(qs) != 1 || qs[0].From != WANRouter.String() {
		t.Errorf("bypassed client's question arrived as %+v, want one, directly from %s", qs, WANRouter)
	}
	// The dns-leak scenario's two measures see this direct question (so
	// their zeros there mean something): the WAN's port-53 counter and the
	// resolver log's non-exit source.
	if lc, _ := l.Leaks(ctx); lc.DNS4 == 0 {
		t.Errorf("the bypassed client's direct question is not in the DNS leak counter: %s", lc)
	}
	if _, direct, err := l.resolverSources([]string{name}); err != nil || direct != 1 {
		t.Errorf("resolverSources counts %d direct questions (%v), want 1", direct, err)
	}
	if a, err := l.ClientResolve(ctx, 0, ForeignDNS, RouterName, 2*time.Second); err != nil || len(a.Addrs) != 1 {
		t.Errorf("the other client must still be answered by the router: %+v, %v", a, err)
	}
}

// A client of a blocked DoH endpoint gets a reset at once, so it falls back
// to plain DNS (which the router answers) instead of waiting for a timeout.
func TestDNSBlockedDoHIsResetAtOnce(t *testing.T) {
	l, _ := upDNS(t, defaultSpec)
	ctx := context.Background()
	url := "http://" + net.JoinHostPort(DoH.String(), "443") + "/dns-query?dns=AAABAAABAAAAAAAAA2RvaANsYWIAAAEAAQ"
	var worst time.Duration
	for range 5 {
		f := l.ClientFetch(ctx, 0, url)
		if f.Err == nil || !strings.Contains(f.Err.Error(), "connection refused") {
			t.Fatalf("DoH to a blocked endpoint: HTTP %d, %v; want a reset (connection refused)", f.Status, f.Err)
		}
		worst = max(worst, f.Elapsed)
	}
	t.Logf("blocked DoH: time to error %v (worst of 5)", worst.Round(time.Microsecond))
	if worst > 100*time.Millisecond {
		t.Errorf("the reset took %v: the client must fail at once", worst)
	}
	if qs, _ := l.DNSQueries(); len(qs) != 0 {
		for _, q := range qs {
			if q.Proto == "doh" {
				t.Errorf("the DoH endpoint answered a LAN client: %+v", q)
			}
		}
	}
}

// The lab's SmartDNS configuration is the shipped one with only upstream
// lines, paths and lab settings changed.
func TestSmartDNSConfigIsTheShippedOne(t *testing.T) {
	wd, _ := os.Getwd()
	root, err := FindRepoRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	shipped, err := os.ReadFile(filepath.Join(root, ShippedSmartDNSConf))
	if err != nil {
		t.Fatal(err)
	}
	l := &Lab{Dir: "/lab"}
	conf, err := AdaptSmartDNSConfig(string(shipped), l.labSmartDNS())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"server-tcp 198.18.50.1:53 -group foreign\n",
		"server 198.19.0.53:53 -group domestic -exclude-default-group\n",
		"server 198.19.0.53:53 -group bootstrap -exclude-default-group\n",
		"nameserver /domain-set:domestic/domestic\n",
		"nftset /domain-set:domestic/#4:inet#killswitch#domestic_domain_ips,#6:-\n",
		"domain-set -name domestic -file /lab/config/domestic-domains.conf\n",
		"bind 127.0.0.1:6053\n",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("lab config lacks %q", want)
		}
	}
	// Every upstream the shipped file names (a real public resolver) and its
	// router paths must be gone from the lab's copy.
	gones := []string{"/etc/smartdns/", "/var/log/"}
	for _, line := range strings.Split(string(shipped), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && strings.HasPrefix(f[0], "server") {
			gones = append(gones, f[1])
		}
	}
	if len(gones) < 4 {
		t.Fatalf("found only %q in the shipped config's upstreams", gones)
	}
	for _, line := range strings.Split(conf, "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		for _, gone := range gones {
			if strings.Contains(line, gone) {
				t.Errorf("lab config line %q still has %q (a real host or path)", line, gone)
			}
		}
	}
	if _, err := AdaptSmartDNSConfig(string(shipped)+"server 9.9.9.9 -group other\n", l.labSmartDNS()); err == nil {
		t.Error("a shipped group without lab servers must be an error")
	}
}
