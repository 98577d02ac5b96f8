package firewall

import (
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// CounterWakeLogGroup is the NFLOG group of the counter wake-up rules
// (counterWakeRule), where the counter signal listens
// (fastsignal.CounterOptions.Wake): next to the loop guard's and the LAN
// wake-up's groups.
const CounterWakeLogGroup = 7209

// Counter wake-up token bucket: one token, refilled every 500 ms, per rule.
// The counter signal judges its counters once a second, so it needs to hear
// only that one of them started to move (the first packet after half a
// second without one logs at once: the bucket is full) and, while they go
// on moving, a reminder now and then; more would only wake the process for
// a read it takes anyway.
const (
	counterWakeRate  = 2
	counterWakeBurst = 1
)

// counterWakeRule wakes the counter signal (fastsignal.CounterWatch) when a
// counter it judges starts to move (issue 19: an idle healthy tunnel drops
// nothing, so the signal reads nothing until the kernel has something for
// it, instead of reading the counters every second). It only logs, never
// decides: placed in front of the rules that count (or appended to a
// counting rule that has no verdict), it leaves every verdict as it was.
//
//	limit rate 2/second burst 1 packets log group 7209
//
// The kill switch's output chain has it once, right before strict
// direct's refusals and the final drop: everything that reaches that point
// is counted as direct_blocked or blocked_out. The moat has it after each
// rst-in rule, with the same match (rst-in-wake). Each is a rule of its
// own that only logs, so a kernel without NFLOG loses the wake-ups and
// nothing else (nflog.go leaves every log rule out there; the counter
// signal then reads every second, as its subscription fails too).
func counterWakeRule(fam nftables.TableFamily, id string) rule {
	return counterWake(newRule(fam, id)).done()
}

// counterWake appends the wake-up's rate limit and log to b, a rule of its
// own with no counter and no verdict: a packet over the limit stops the
// rule there, and nflog.go's fallback drops the whole rule.
func counterWake(b *ruleBuilder) *ruleBuilder {
	b.add(fmt.Sprintf("limit rate %d/second burst %d packets", counterWakeRate, counterWakeBurst),
		&expr.Limit{Type: expr.LimitTypePkts, Rate: counterWakeRate, Unit: expr.LimitTimeSecond, Burst: counterWakeBurst})
	return b.add(fmt.Sprintf("log group %d", CounterWakeLogGroup),
		&expr.Log{Key: 1 << unix.NFTA_LOG_GROUP, Group: CounterWakeLogGroup})
}
