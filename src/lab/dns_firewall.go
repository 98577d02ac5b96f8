package lab

import (
	"context"
	"fmt"
	"net/netip"

	"surflare-watchdog/src/firewall"
)

// The DNS unit-level tests apply the watchdog's firewall themselves, with
// the Spec the daemon derives from the lab config (labConfig: rule mode,
// router role, the lab's relays, account API, chnroute and dns section), so
// they can vary it (bypass, no cn_direct). The dns-leak scenario runs the
// real daemon instead, which applies the same rules from the config.

// WatchdogSpec is the watchdog's firewall Spec for this lab.
func (l *Lab) WatchdogSpec() firewall.Spec {
	s := firewall.DefaultSpec()
	s.LANIf = IfLAN
	for _, r := range Relays {
		s.Relays = append(s.Relays, netip.PrefixFrom(r.Addr, 32))
	}
	s.APIEndpoints = []netip.Prefix{netip.PrefixFrom(AccountAPI, 32)}
	s.CNDirect4 = []netip.Prefix{DomesticNet}
	s.DNSDirect = []netip.Addr{DomesticDNS}
	s.ForeignDNS = []netip.Addr{ForeignDNS}
	s.TunnelDoH = []netip.Addr{DoH}
	s.BlockedDoH = []netip.Prefix{netip.PrefixFrom(ForeignDNS, 32), netip.PrefixFrom(DoH, 32)}
	return s
}

// WatchdogFirewall is the watchdog's firewall bound to the router namespace.
func (l *Lab) WatchdogFirewall() (*firewall.Firewall, error) {
	ns, err := l.NS(RoleRouter)
	if err != nil {
		return nil, err
	}
	return firewall.New(firewall.WithNetNS(int(ns))), nil
}

// ApplyWatchdogFirewall applies s (WatchdogSpec, possibly changed) in the
// router namespace.
func (l *Lab) ApplyWatchdogFirewall(ctx context.Context, s firewall.Spec) (*firewall.Firewall, error) {
	fw, err := l.WatchdogFirewall()
	if err != nil {
		return nil, err
	}
	if _, err := fw.Apply(ctx, s); err != nil {
		return nil, fmt.Errorf("applying the watchdog firewall in the lab: %w", err)
	}
	return fw, nil
}
