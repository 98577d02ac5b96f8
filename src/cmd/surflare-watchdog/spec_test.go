package main

import (
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"surflare-watchdog/src/config"
	"surflare-watchdog/src/daemon"
)

// The dns section's foreign resolvers and DoH endpoints must reach the
// firewall: without them the router's own foreign DNS is never marked into
// the tunnel and goes out through the ISP (or is dropped by the kill switch).
func TestSpecFromConfigCarriesRouterDNS(t *testing.T) {
	dir := t.TempDir()
	cfg := writeLabConfig(t, dir, "")
	b, _ := os.ReadFile(cfg)
	b = append(b, "\nconfig dns 'dns'\n\tlist foreign_resolver '198.18.50.1'\n\tlist foreign_resolver 'fd00:50::1'\n\tlist doh_endpoint '198.18.50.2'\n"...)
	os.WriteFile(cfg, b, 0o644)
	c, _, err := config.Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := daemon.SpecFromConfig(c, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	wantForeign := []netip.Addr{netip.MustParseAddr("198.18.50.1"), netip.MustParseAddr("fd00:50::1")}
	if !slices.Equal(s.ForeignDNS, wantForeign) {
		t.Errorf("ForeignDNS = %v, want %v", s.ForeignDNS, wantForeign)
	}
	if want := []netip.Addr{netip.MustParseAddr("198.18.50.2")}; !slices.Equal(s.TunnelDoH, want) {
		t.Errorf("TunnelDoH = %v, want %v", s.TunnelDoH, want)
	}

	// What a user sees: `firewall plan` fills the kill switch's DNS sets.
	code, out, errOut := runFirewallCLI("plan", "--config", cfg, "--leases", filepath.Join(dir, "none"))
	if code != exitOK {
		t.Fatalf("plan: code %d, stderr %s", code, errOut)
	}
	for _, re := range []string{
		`(?s)set foreign_dns4 \{[^}]*elements = \{ 198\.18\.50\.1 \}`,
		`(?s)set doh_tunnel4 \{[^}]*elements = \{ 198\.18\.50\.2 \}`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("plan does not match %s", re)
		}
	}
}
