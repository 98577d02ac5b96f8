package firewall

import (
	"errors"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Some rules only log, to NFLOG groups where a listener waits instead of
// polling: the loop guard's wake-up (loopguard.go, LoopGuardLogGroup), the
// LAN wake-up (lanwake.go, LANWakeLogGroup) and the counter wake-ups
// (counterwake.go, CounterWakeLogGroup). A rule with `log group N`
// needs the kernel's NFLOG logger, nfnetlink_log (kmod-nfnetlink-log on
// OpenWrt): without it nft_log's init asks for the ULOG logger
// (nf_logger_find_get), gets ENOENT, and the kernel refuses the rule. A
// batch is atomic, so that refusal would take the kill switch and the LAN
// tproxy with it, for the sake of wake-ups whose listeners poll anyway
// when the kernel has no NFLOG (they cannot bind their group either).
//
// So Apply, when a batch with log rules is refused with ENOENT, asks the
// kernel the narrow question (logRulesRefused: a throwaway table holding
// only a log rule, created and deleted in one batch, so nothing stays) and,
// when that is refused too, commits again without the log rules, says so
// once, and leaves them out for the Firewall's life. ENOENT alone proves
// nothing: a table that fw4 deleted between our read and our batch gives
// the same errno, and dropping the wake-ups for that would be wrong.

// logProbeTable is the throwaway table of the log probe. It never outlives
// the batch that creates it.
const logProbeTable = "surflare_log_probe"

// logRulesOffWarning is the one warning of a kernel without NFLOG
// (docs/logs.md).
const logRulesOffWarning = "Kernel wake-up rules left out: the kernel has no NFLOG logger (kmod-nfnetlink-log); " +
	"the loop guard, the early detector and the counter signal poll instead"

// plan is buildTables(s) as this Firewall applies it: without the log
// rules once the kernel refused them.
func (f *Firewall) plan(s Spec) []tableSpec {
	ts := buildTables(s)
	if f.noLogRules {
		ts = withoutLogRules(ts)
	}
	return ts
}

// isLogRule reports a rule with a log statement.
func isLogRule(r rule) bool {
	for _, e := range r.exprs {
		if _, ok := e.(*expr.Log); ok {
			return true
		}
	}
	return false
}

// hasLogRules reports whether any chain of ts has a log rule.
func hasLogRules(ts []tableSpec) bool {
	for _, t := range ts {
		for _, ch := range t.chains {
			for _, r := range ch.rules {
				if isLogRule(r) {
					return true
				}
			}
		}
	}
	return false
}

// withoutLogRules is ts with every log rule removed. The log rules decide
// no verdict (they only log), so what every packet meets is the same.
func withoutLogRules(ts []tableSpec) []tableSpec {
	out := make([]tableSpec, len(ts))
	for i, t := range ts {
		t.chains = append([]chainSpec(nil), t.chains...)
		for j, ch := range t.chains {
			var kept []rule
			for _, r := range ch.rules {
				if !isLogRule(r) {
					kept = append(kept, r)
				}
			}
			t.chains[j].rules = kept
		}
		out[i] = t
	}
	return out
}

// logRulesRefused reports whether err, the refusal of a batch staged from
// f.plan(s), is the kernel refusing log rules: ENOENT, log rules in the
// plan, and the log probe refused with ENOENT as well. c's queue must be
// empty (a Flush empties it, failed or not).
func (f *Firewall) logRulesRefused(c *nftables.Conn, s Spec, err error) bool {
	if f.noLogRules || !errors.Is(err, unix.ENOENT) || !hasLogRules(f.plan(s)) {
		return false
	}
	return errors.Is(probeLogRule(c), unix.ENOENT)
}

// probeLogRule sends one batch that creates a table with a log rule and
// deletes it again: the kernel validates the rule (nft_log's init) and,
// when it takes it, the batch leaves nothing behind.
func probeLogRule(c *nftables.Conn) error {
	t := c.AddTable(&nftables.Table{Family: famInet, Name: logProbeTable})
	ch := c.AddChain(&nftables.Chain{Name: "probe", Table: t})
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: []expr.Any{
		&expr.Log{Key: 1 << unix.NFTA_LOG_GROUP, Group: LoopGuardLogGroup},
	}})
	c.DelTable(t)
	return c.Flush()
}
