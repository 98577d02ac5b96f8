package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"

	"surflare-watchdog/src/config"
	"surflare-watchdog/src/firewall"
	"surflare-watchdog/src/route"
)

// The config → firewall.Spec conversion shared by `firewall plan|apply` and
// the daemon (`run`), so both always build the same tables from a config.

// SpecFromFile is `firewall plan|apply`'s Spec: the config at path (its
// warnings and SpecFromConfig's go to warn), the bypass devices resolved
// with the leases in leasesFile and, withNeighbours, the neighbour table;
// validated.
func SpecFromFile(path, leasesFile string, withNeighbours bool, warn io.Writer) (firewall.Spec, error) {
	c, warns, err := config.Load(path)
	if err != nil {
		return firewall.Spec{}, err
	}
	for _, w := range warns {
		fmt.Fprintf(warn, "warning: %v\n", w)
	}
	s, err := SpecFromConfig(c, warn)
	if err != nil {
		return s, err
	}
	var neigh []route.Neighbour
	if withNeighbours && len(s.Bypass) > 0 {
		neigh = route.HostNeighbours(context.Background())
	}
	s = firewall.ResolveBypassFrom(s, leasesFile, neigh)
	return s, s.Validate()
}

// SpecFromConfig maps the typed config onto the firewall's declarative input.
// Relays are not in the config (the vendor decides them): the daemon adds
// them; from the CLI only the configured endpoints are allowed through.
func SpecFromConfig(c *config.Config, stderr io.Writer) (firewall.Spec, error) {
	s := firewall.DefaultSpec()
	if c.Main.Role.Resolve(config.OpenWrtRelease) == config.RoleLaptop {
		s.Role = firewall.RoleLaptop
	}
	s.Mode = firewallModeOf(c.Main.Mode)
	if c.Main.IPv6 == config.IPv6Proxy {
		s.IPv6 = firewall.IPv6Proxy
	}
	s.LANIf = c.Main.LANInterface
	if len(c.Main.Private) > 0 {
		s.Private = c.Main.Private
	}
	s.APIEndpoints = c.Main.Endpoints
	s.StrictDirect = c.Main.StrictDirect // the daemon adds the vendor's server ports (daemon_strict.go)
	s.StrictDirectRule = c.Main.StrictDirectRule
	// The kill switch's routing layer (docs/killswitch-layers.md): Apply sets
	// it with the kill switch, Teardown removes it with it.
	s.RouteLayer = c.Main.RouteLayer
	// The loop guard's wake-up rule (firewall/loopguard.go); -1 = off, no rule.
	s.LoopGuardGate = c.LoopGuard.MinActive
	s.DNSDirect = c.DNS.DomesticUpstreams
	// The router's own foreign DNS and DoH are marked into the tunnel
	// (firewall/dns.go); without them they would leave through the ISP.
	s.ForeignDNS = c.DNS.ForeignResolvers
	s.TunnelDoH = c.DNS.DoHEndpoints
	for _, a := range c.DNS.BlockedDoH {
		s.BlockedDoH = append(s.BlockedDoH, netip.PrefixFrom(a, a.BitLen()))
	}
	for _, b := range c.Bypass {
		s.Bypass = append(s.Bypass, firewall.Device{Name: b.Name, MAC: b.MAC, IPs: b.IPs})
	}
	if c.Vendor.ProxyPort != 0 {
		s.ProxyPort = c.Vendor.ProxyPort
	}
	if c.DNS.LocalResolverPort != 0 {
		s.LocalResolverPort = c.DNS.LocalResolverPort
	}
	return withChnroute(s, c, stderr)
}

// firewallModeOf maps the config's mode onto the firewall's: the same three
// vendor modes (an unknown one cannot pass config validation; rule, the
// default, stands for it).
func firewallModeOf(m config.Mode) firewall.Mode {
	switch m {
	case config.ModeGlobal:
		return firewall.ModeGlobal
	case config.ModeDirect:
		return firewall.ModeDirect
	}
	return firewall.ModeRule
}

// withChnroute is s with its cn_direct sets read from c's chnroute files
// (at startup, and again after the refresher has written new ones).
func withChnroute(s firewall.Spec, c *config.Config, stderr io.Writer) (firewall.Spec, error) {
	v4, err := loadChnroute(c.Paths.ChnrouteV4, stderr)
	if err != nil {
		return s, err
	}
	v6, err := loadChnroute(c.Paths.ChnrouteV6, stderr)
	if err != nil {
		return s, err
	}
	s.CNDirect4, s.CNDirect6 = firewall.SplitFamilies(append(v4, v6...))
	return s, nil
}

// loadChnroute reads one chnroute file; a missing file is a warning (the
// first `routes update` creates it), a broken one an error.
func loadChnroute(path string, stderr io.Writer) ([]netip.Prefix, error) {
	if path == "" {
		return nil, nil
	}
	ps, err := firewall.LoadChnroute(path)
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(stderr, "warning: %s does not exist (run 'surflare-watchdog routes update'); cn_direct is empty\n", path)
		return nil, nil
	}
	return ps, err
}
