package daemon

import (
	"context"

	"surflare-watchdog/src/firewall"
	"surflare-watchdog/src/loopguard/nflog"
)

// counterWake is the counter signal's kernel wake-up: the NFLOG group of
// the firewall's counter wake-up rules (firewall/counterwake.go: the kill
// switch's refusals and the moat's RSTs from relays), bound in our own
// namespace, where the kill switch and the moat live (on a router and a
// laptop alike). With it the signal reads the counters only while they
// move; nil when the group cannot be bound, with one warning saying what
// that costs, and the signal reads every second as before. The caller
// closes it when the signal has stopped.
func (d *Daemon) counterWake(ctx context.Context) *nflog.Sub {
	sub, err := nflog.Subscribe(ctx, firewall.CounterWakeLogGroup)
	if err != nil {
		d.log.Warn("Counter watch: no kernel wake-ups; reading the kill switch's counters every second instead "+
			"(idle CPU; on OpenWrt: opkg install kmod-nfnetlink-log)", "err", err)
		return nil
	}
	return sub
}
