package daemon

import (
	"fmt"
	"net/netip"
	"testing"

	"surflare-watchdog/src/firewall"
)

// A loop to a learned relay names the other learned relays, at its port;
// anything else (the account API, a LAN client's host, a relay of the
// other family) names nothing.
func TestRelaySiblings(t *testing.T) {
	s := firewall.Spec{
		Relays: []netip.Prefix{
			netip.MustParsePrefix("198.18.10.1/32"), netip.MustParsePrefix("198.18.10.2/32"),
			netip.MustParsePrefix("198.18.10.3/32"), netip.MustParsePrefix("fd00:10::1/128"),
		},
		// The config's endpoints mix relays with the account API: not a source of siblings.
		APIEndpoints: []netip.Prefix{netip.MustParsePrefix("198.18.10.1/32"), netip.MustParsePrefix("198.18.40.1/32")},
	}
	sib := relaySiblings(func() firewall.Spec { return s })
	cases := []struct{ dst, want string }{
		{"198.18.10.1:8443", "[198.18.10.2:8443 198.18.10.3:8443]"},
		{"198.18.10.3:9000", "[198.18.10.1:9000 198.18.10.2:9000]"},
		{"[fd00:10::1]:8443", "[]"},
		{"198.18.40.1:80", "[]"},  // the account API
		{"198.18.30.21:80", "[]"}, // any other host
	}
	for _, c := range cases {
		if got := fmt.Sprint(sib(netip.MustParseAddrPort(c.dst))); got != c.want {
			t.Errorf("siblings of %s = %s, want %s", c.dst, got, c.want)
		}
	}
	// Relays learned after the guard started count at the next opening.
	s.Relays = append(s.Relays, netip.MustParsePrefix("198.18.40.7/32"))
	if got := fmt.Sprint(sib(netip.MustParseAddrPort("198.18.10.2:8443"))); got != "[198.18.10.1:8443 198.18.10.3:8443 198.18.40.7:8443]" {
		t.Errorf("after learning one more relay: %s", got)
	}
}
