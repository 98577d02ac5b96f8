package internet

import (
	"net/netip"
	"time"

	"surflare-watchdog/src/lab"
	"surflare-watchdog/src/lab/fakes"
)

// Loopback ports: with LoopbackConfig every service shares 127.X.Y.0/24 with
// other processes, so it uses unprivileged ports instead of the plan's.
const (
	LoopbackRelayPort = 18443
	LoopbackExitPort  = 18444
	LoopbackHTTPPort  = 18080
	LoopbackDNSPort   = 18053
	LoopbackDoHPort   = 18054
)

// LoopbackConfig is a whole lab internet on the loopback /24 of base
// (e.g. 127.77.3.0), for tests that need no root and no namespaces. Host
// numbers: relays Tokyo .1, Singapore .2; exits .11–.16 in plan.Nodes order
// (same names); IP echo .30, CDN trace .31, search .32, account API .40,
// domestic web .41 (its /32 is the chnroute it serves), DNS .50, DoH .51. The echo hosts report country "US"
// for exit addresses and "ZZ" for anything else.
func LoopbackConfig(base netip.Addr, faults *fakes.Watcher) Config {
	b := base.As4()
	at := func(n byte) netip.Addr { return netip.AddrFrom4([4]byte{b[0], b[1], b[2], n}) }
	c := Config{
		Relays:      []lab.Relay{{Name: lab.Relays[0].Name, Addr: at(1)}, {Name: lab.Relays[1].Name, Addr: at(2)}},
		RelayPort:   LoopbackRelayPort,
		ExitPort:    LoopbackExitPort,
		HTTPPort:    LoopbackHTTPPort,
		IPEcho:      []netip.Addr{at(30)},
		CDNTrace:    []netip.Addr{at(31)},
		Search:      []netip.Addr{at(32)},
		AccountAPI:  []netip.Addr{at(40)},
		DomesticWeb: []netip.Addr{at(41)},
		Chnroute:    []netip.Prefix{netip.PrefixFrom(at(41), 32)},
		DNSPort:     LoopbackDNSPort,
		DNS:         []netip.Addr{at(50)},
		DoHPort:     LoopbackDoHPort,
		DoH:         []netip.Addr{at(51)},
		Zone:        Zone{"*.foreign.lab": {at(32)}, "search.lab": {at(32)}, "ipv6.lab": {lab.Internet6}},
		DialTimeout: 2 * time.Second,
		Faults:      faults,
		Now:         time.Now,
	}
	countries := map[netip.Addr]string{}
	for i, n := range lab.Nodes {
		a := at(byte(11 + i))
		c.Nodes = append(c.Nodes, lab.Node{Name: n.Name, Addr: a, Country: n.Country})
		countries[a] = n.Country
	}
	c.CountryOf = func(a netip.Addr) string {
		if cc, ok := countries[a]; ok {
			return cc
		}
		return "ZZ"
	}
	return c
}
