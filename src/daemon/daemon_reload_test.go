package daemon

import (
	"net/netip"
	"slices"
	"testing"

	"surflare-watchdog/src/firewall"
)

// A reload rebuilds the Spec from the config, which names no relays: the
// relays the daemon learned stay (the kill switch lets the proxy reach only
// relays it knows), and one the config also names is not doubled.
func TestReloadKeepsLearnedRelays(t *testing.T) {
	learned := []netip.Prefix{netip.MustParsePrefix("198.18.10.1/32"), netip.MustParsePrefix("198.18.10.2/32")}
	d := &Daemon{fw: &fwAdapter{base: firewall.Spec{Relays: learned}}}
	fromConfig := firewall.Spec{Relays: []netip.Prefix{netip.MustParsePrefix("198.18.10.2/32")}}
	got := d.keepLearned(fromConfig).Relays
	slices.SortFunc(got, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	if !slices.Equal(got, learned) {
		t.Errorf("relays after reload = %v, want %v", got, learned)
	}
}
