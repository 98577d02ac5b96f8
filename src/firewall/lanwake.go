package firewall

import (
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// LANWakeLogGroup is the NFLOG group of the LAN wake-up rule (lanWakeRule),
// where the early detector listens (detect.KernelWake). Next to the loop
// guard's group (LoopGuardLogGroup), far from ulogd's small numbers.
const LANWakeLogGroup = 7208

// LAN wake-up token bucket: one token, refilled every 500 ms. The first new
// LAN connection after half a second without one logs at once (the bucket
// is full), so the detector is woken when the LAN's traffic starts, not an
// Interval later; a flood logs at most lanWakeRate a second (plus the one
// token), because the detector has nothing to do with more: a wake-up
// makes it sample waitingAfter (300 ms) later, and a busy LAN is looked at
// every 250 ms by the detector itself (its accepted-connections counter),
// so a wake-up every 500 ms keeps the sample at most 300 ms behind new
// traffic and each one more would only wake the process for nothing. A quiet tunnel (the router's own probes and
// checks are output, never prerouting) logs nothing.
const (
	lanWakeRate  = 2
	lanWakeBurst = 1
)

// lanWakeRule wakes the early detector when LAN traffic starts (issue 19:
// a node black-hole that starts with the LAN's traffic is seen within
// about a second, without polling a quiet tunnel). It sits just before the
// tproxy rule, after every return of the chain, so it sees exactly the
// LAN's new TCP connections the proxy is handed, in rule and global mode
// alike (the table is the same in both), and it only logs: the packet
// goes on to the tproxy rule with its verdict unchanged.
//
//	meta l4proto tcp ct state new limit rate 2/second burst 1 packets log group 7208
func lanWakeRule(fam nftables.TableFamily) rule {
	b := newRule(fam, "lan-wake").l4proto(unix.IPPROTO_TCP)
	b.ctBits(expr.CtKeySTATE, ctStateNew, "ct state new")
	b.add(fmt.Sprintf("limit rate %d/second burst %d packets", lanWakeRate, lanWakeBurst),
		&expr.Limit{Type: expr.LimitTypePkts, Rate: lanWakeRate, Unit: expr.LimitTimeSecond, Burst: lanWakeBurst})
	b.add(fmt.Sprintf("log group %d", LANWakeLogGroup),
		&expr.Log{Key: 1 << unix.NFTA_LOG_GROUP, Group: LANWakeLogGroup})
	return b.done()
}
