package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"time"

	"surflare-watchdog/src/config"
	"surflare-watchdog/src/firewall"
	"surflare-watchdog/src/health"
	"surflare-watchdog/src/route"
)

// tunnelRule is health.RuleChecker over route's view of the fwmark rule.
type tunnelRule struct{}

// FwmarkRuleExists is health.RuleChecker.
func (tunnelRule) FwmarkRuleExists(ctx context.Context) (bool, error) {
	return route.TunnelRuleExists(ctx)
}

// wanInfo is the uplink the egress check and the ISP address use.
type wanInfo struct {
	Device string     `json:"device"`
	Addr   netip.Addr `json:"addr"`
	Auto   bool       `json:"auto"` // found from the default route, not configured
}

// detectWAN finds the WAN device (option wan_device, else the default
// route's device) and its IPv4 address, and logs what the bypass-only
// egress path is. An empty result is logged loudly: the egress check then
// cannot tell a dead WAN from a dead tunnel.
func detectWAN(ctx context.Context, c *config.Config, log *slog.Logger) wanInfo {
	w := wanInfo{Device: c.Main.WANDevice}
	if w.Device == "" {
		w.Auto = true
		w.Device = route.HostWANDevice(ctx)
	}
	if w.Device != "" {
		w.Addr = route.DeviceAddr(w.Device)
	}
	exclude := []string{"lo"}
	if c.Main.Role.Resolve(config.OpenWrtRelease) != config.RoleLaptop {
		exclude = append(exclude, c.Main.LANInterface)
	}
	if w.Device == "" {
		log.Error("bypass-only: NO WAN DEVICE (no default route and no option wan_device): the egress check runs unbound and cannot tell a dead WAN from a dead tunnel; set surflare.main.wan_device")
		return w
	}
	addr := ""
	if w.Addr.IsValid() {
		addr = w.Addr.String()
	}
	log.Info(fmt.Sprintf("bypass-only: device=%q ip=%q exclude=[%s]", w.Device, addr, strings.Join(exclude, " ")), "auto", w.Auto)
	return w
}

// network is watchdog.Network: the ISP address is the WAN device's.
type network struct{ wan func() wanInfo }

func (n network) ISPAddr(ctx context.Context) (netip.Addr, error) {
	w := n.wan()
	if !w.Addr.IsValid() {
		return netip.Addr{}, errors.New("the WAN device has no IPv4 address")
	}
	return w.Addr, nil
}

// healthConfig maps the config's probes onto the checker's targets; the
// egress targets are the domestic resolvers (TCP 53), reached straight out
// of the WAN.
func healthConfig(c *config.Config) health.Config {
	hc := health.Config{
		ProbeTimeout:    c.Main.ProbeTimeout,
		ConfirmDelay:    c.Main.DomesticConfirm,
		DomesticCountry: c.Main.DomesticCountry,
		ProxyName:       c.Vendor.ProxyComm,
		// The exit check is judged per vendor mode (docs/modes.md): in rule
		// mode only probes on the vendor's list count.
		Judging: health.JudgingFor(string(c.Main.Mode)),
	}
	for _, p := range c.Probes {
		hc.Targets = append(hc.Targets, health.Target{Name: p.Name, Kind: health.Kind(p.Kind), URL: p.URL, Listed: p.Listed})
	}
	for _, a := range c.DNS.DomesticUpstreams {
		hc.EgressTargets = append(hc.EgressTargets, net.JoinHostPort(a.String(), "53"))
	}
	return hc
}

// newChecker builds the health checker: tunnel probes from the router
// itself (the vendor's route chain marks them 0x1 into the proxy), probe 7
// from the probe namespace on the LAN (nil on a laptop or when it could not
// be made), the egress check with the proxy's bypass mark 0xff bound to the
// WAN device.
func newChecker(c *config.Config, fw *firewall.Firewall, probe *route.ProbeNS, wan wanInfo, procs nsProcs, isp func() netip.Addr) *health.Checker {
	deps := health.Deps{
		Tunnel:  &net.Dialer{},
		Egress:  health.NewDialer(route.MarkDirect, wan.Device),
		Procs:   procs,
		Table:   fw,
		Rule:    tunnelRule{},
		Listen:  proxyPort{scan: procs.scan, diag: procs.listen, port: int(c.Vendor.ProxyPort)},
		ISPAddr: isp,
		Now:     time.Now,
	}
	if probe != nil {
		deps.Proxy = probe
	}
	return health.NewChecker(healthConfig(c), deps)
}
