package daemon

import (
	"context"

	"surflare-watchdog/src/config"
	"surflare-watchdog/src/detectors/detect"
	"surflare-watchdog/src/firewall"
	"surflare-watchdog/src/loopguard/nflog"
)

// lanWake is the early detector's kernel wake-up when LAN traffic starts:
// the NFLOG group of the firewall's lan-wake rule, bound in our own
// namespace, the router's, where sw_lan_tproxy and the rule live (as the
// loop guard's events are). Only a router has a LAN tproxy; a laptop gets
// nil and the detector samples as before. nil also when the group cannot
// be bound (KernelWake warns once). The caller closes it when the detector
// has stopped.
func (d *Daemon) lanWake(ctx context.Context, c *config.Config) *nflog.Sub {
	if c.Main.Role.Resolve(config.OpenWrtRelease) == config.RoleLaptop {
		return nil
	}
	return detect.KernelWake(ctx, firewall.LANWakeLogGroup)
}
