package detect

import (
	"context"
	"fmt"

	"surflare-watchdog/src/loopguard/nflog"
)

// KernelWake subscribes to the NFLOG group of the firewall's LAN wake-up
// rule (firewall.LANWakeLogGroup) in the caller's network namespace, the
// one whose sw_lan_tproxy table holds the rule, for Options.Wake
// (sub.C()); close it when Run has returned. When the group cannot be
// bound (no nfnetlink_log in the kernel, another process holds the group)
// it logs one warning saying what is lost and returns nil: Run then works
// from its Interval samples and the Activity readings alone.
func KernelWake(ctx context.Context, group uint16) *nflog.Sub {
	sub, err := nflog.Subscribe(ctx, group)
	if err != nil {
		log().Warn(fmt.Sprintf("early detector: no kernel wake-ups when LAN traffic starts (%v); "+
			"a black-hole that starts with the LAN's traffic is seen up to one sampling interval later "+
			"(on OpenWrt: opkg install kmod-nfnetlink-log)", err))
		return nil
	}
	return sub
}
