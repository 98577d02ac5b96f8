package loopguard

import (
	"context"
	"fmt"
	"time"

	"surflare-watchdog/src/loopguard/nflog"
)

// KernelEvents subscribes to the NFLOG group of the firewall's wake-up
// rule (firewall.LoopGuardLogGroup) in the caller's network namespace, for
// Options.Events (sub.C()); close it when Run has returned. When the group
// cannot be bound (no nfnetlink_log in the kernel, another process holds
// the group) it logs one warning saying what is lost and returns nil: Run
// then checks the gate every Interval.
func KernelEvents(ctx context.Context, group uint16, interval time.Duration) *nflog.Sub {
	sub, err := nflog.Subscribe(ctx, group)
	if err != nil {
		if interval <= 0 {
			interval = DefaultInterval
		}
		log().Warn(fmt.Sprintf("loopguard: no kernel wake-ups (%v); checking the gate every %s instead: "+
			"a loop is seen up to %s later and the checks cost CPU at idle (on OpenWrt: opkg install kmod-nfnetlink-log)",
			err, interval, interval))
		return nil
	}
	return sub
}
