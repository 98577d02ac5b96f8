package daemon

import (
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"surflare-watchdog/src/config"
)

// writeChnrouteConfig writes a router config whose chnroute lists are in dir.
func writeChnrouteConfig(t *testing.T, dir string) string {
	t.Helper()
	os.WriteFile(filepath.Join(dir, "cn4.txt"), []byte("# lab domestic\n198.19.0.0/16\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "cn6.txt"), []byte("fd00:19::/32\n"), 0o644)
	cfg := fmt.Sprintf(`config surflare 'main'
	option role 'router'
	option lan_interface 'br-lan'
	list endpoint '198.18.40.1'

config paths 'paths'
	option chnroute_v4 '%s'
	option chnroute_v6 '%s'
`, filepath.Join(dir, "cn4.txt"), filepath.Join(dir, "cn6.txt"))
	path := filepath.Join(dir, "surflare")
	os.WriteFile(path, []byte(cfg), 0o644)
	return path
}

// After a chnroute refresh the daemon re-reads the lists into the Spec it
// already has: cn_direct changes, learned relays and the rest stay.
func TestWithChnrouteKeepsTheRestOfTheSpec(t *testing.T) {
	dir := t.TempDir()
	cfg := writeChnrouteConfig(t, dir)
	c, _, err := config.Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	base, err := SpecFromConfig(c, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	relay := netip.MustParsePrefix("198.18.10.1/32")
	base.Relays = append(base.Relays, relay)
	os.WriteFile(filepath.Join(dir, "cn4.txt"), []byte("198.19.0.0/17\n198.19.128.0/17\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "cn6.txt"), []byte("fd00:19::/32\nfd00:20::/32\n"), 0o644)
	s, err := withChnroute(base, c, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.CNDirect4) != 2 || len(s.CNDirect6) != 2 || s.CNDirect4[1] != netip.MustParsePrefix("198.19.128.0/17") {
		t.Errorf("cn_direct after the refresh: %v %v", s.CNDirect4, s.CNDirect6)
	}
	if !slices.Contains(s.Relays, relay) || !slices.Equal(s.APIEndpoints, base.APIEndpoints) {
		t.Errorf("the rest of the Spec changed: relays %v endpoints %v", s.Relays, s.APIEndpoints)
	}
	os.WriteFile(filepath.Join(dir, "cn4.txt"), []byte("bogus\n"), 0o644)
	if _, err := withChnroute(base, c, io.Discard); err == nil {
		t.Error("a broken list must be an error (the daemon then keeps cn_direct)")
	}
}
