package firewall

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/google/nftables"
	mdnl "github.com/mdlayher/netlink"
	"github.com/mdlayher/netlink/nltest"
	"golang.org/x/sys/unix"
)

// logExprName is a log expression's NFTA_EXPR_NAME attribute as the
// library encodes it: length 8, type 1, "log\0".
var logExprName = []byte{8, 0, unix.NFTA_EXPR_NAME, 0, 'l', 'o', 'g', 0}

// kernelWithoutNFLOG is ns's nftables socket as a kernel without
// nfnetlink_log answers it, for as long as *missing is true: every rule
// with a log statement is refused with ENOENT and the batch with it. It
// is the real kernel of ns, asked for a log expression of a type it does
// not have ("lgx"): the kernel refuses that with ENOENT, as nft_log's init
// does without the ULOG logger. Everything else goes to the kernel as it
// is. refused counts the batches it made the kernel refuse.
func kernelWithoutNFLOG(t *testing.T, ns *testNS, missing *bool, refused *int) nltest.Func {
	t.Helper()
	real, err := mdnl.Dial(unix.NETLINK_NETFILTER, &mdnl.Config{NetNS: ns.fd()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { real.Close() })
	if err := bigBuffers(real); err != nil {
		t.Fatal(err)
	}
	newRule := mdnl.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_NEWRULE)
	var mu sync.Mutex
	return func(req []mdnl.Message) ([]mdnl.Message, error) {
		if req == nil {
			msgs, err := real.Receive()
			for i := range msgs {
				msgs[i].Header.PID = nltest.PID // the caller's socket, as the kernel addresses it
			}
			if n := len(msgs); n > 0 && msgs[n-1].Header.Flags&mdnl.Multi != 0 {
				// Receive read a dump to its end and dropped the end
				// marker; the caller's socket reads to it.
				msgs = append(msgs, mdnl.Message{Header: mdnl.Header{Type: mdnl.Done, Flags: mdnl.Multi,
					Sequence: msgs[n-1].Header.Sequence, PID: nltest.PID}, Data: make([]byte, 4)})
			}
			return msgs, err
		}
		mu.Lock()
		hit := false
		for i, m := range req {
			if *missing && m.Header.Type == newRule && bytes.Contains(m.Data, logExprName) {
				d := bytes.Clone(m.Data)
				j := bytes.Index(d, logExprName)
				copy(d[j+4:], "lgx")
				req[i].Data = d
				hit = true
			}
		}
		if hit {
			*refused++
		}
		mu.Unlock()
		if _, err := real.SendMessages(req); err != nil {
			return nil, err
		}
		return nil, nil
	}
}

// captureLog points fw's log at a buffer.
func captureLog(fw *Firewall) *bytes.Buffer {
	var buf bytes.Buffer
	fw.log = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	return &buf
}

// routerWithWakeUps is a router spec whose plan has both log rules: the
// loop guard's wake-up (guard on) and the LAN wake-up (proxy up).
func routerWithWakeUps() Spec {
	s := labSpec()
	s.LoopGuardGate = 200
	return s
}

// On a kernel without NFLOG the firewall still goes up: the batch with the
// log rules is refused, Apply commits again without them and says so once;
// the kill switch, the LAN tproxy and the loop guard's reset are in place,
// only the wake-ups are missing (the counters they wake for still count). Later applies do not try again (no
// refused batch, no warning, nothing to change), and once the kernel has
// the logger (a new Firewall: the watchdog restarted after
// `opkg install kmod-nfnetlink-log`) the wake-ups are back.
func TestApplyWithoutNFLOGLeavesOutTheWakeUpRules(t *testing.T) {
	ctx := context.Background()
	ns := newNS(t, "nflog")
	missing, refused := true, 0
	fw := newFW(ns)
	fw.testDial = kernelWithoutNFLOG(t, ns, &missing, &refused)
	logs := captureLog(fw)
	s := routerWithWakeUps()
	if !hasLogRules(buildTables(s)) {
		t.Fatal("the spec has no log rules: the test proves nothing")
	}

	if _, err := fw.Apply(ctx, s); err != nil {
		t.Fatalf("Apply on a kernel without NFLOG: %v", err)
	}
	if refused != 2 { // the whole batch, then the probe
		t.Errorf("refused batches = %d, want 2 (the batch with the log rules and the probe)", refused)
	}
	rs := ns.nft("list", "ruleset")
	if strings.Contains(rs, " log ") || strings.Contains(rs, "log group") {
		t.Errorf("log rules in the kernel after the refusal:\n%s", rs)
	}
	for _, want := range []string{"table inet " + TableKillSwitch, "table ip " + TableTProxy, "tproxy to 127.0.0.1:10800",
		`comment "out-loopguard #`, "policy drop", `counter name "rst_in" comment "rst-in4 #`, `counter name "blocked_out" drop`} {
		if !strings.Contains(rs, want) {
			t.Errorf("ruleset lacks %q:\n%s", want, rs)
		}
	}
	if strings.Contains(rs, logProbeTable) {
		t.Errorf("the log probe's table was left behind:\n%s", rs)
	}
	if n := strings.Count(logs.String(), logRulesOffWarning); n != 1 {
		t.Errorf("warning logged %d times, want once:\n%s", n, logs)
	}
	if !strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("the warning is not a warning:\n%s", logs)
	}

	logs.Reset()
	ch, err := fw.Apply(ctx, s)
	if err != nil || !ch.Empty() {
		t.Fatalf("second Apply = %v, %v; want nothing to change", ch, err)
	}
	if refused != 2 || strings.Contains(logs.String(), logRulesOffWarning) {
		t.Errorf("second Apply tried the log rules again (refused %d) or warned again:\n%s", refused, logs)
	}
	// A table deleted behind our back (fw4 flush) is restored without them.
	ns.nft("delete", "table", "inet", TableKillSwitch)
	if _, err := fw.Apply(ctx, s); err != nil {
		t.Fatalf("Apply after a flush: %v", err)
	}
	if rs := ns.nft("list", "table", "inet", TableKillSwitch); strings.Contains(rs, " log ") || refused != 2 {
		t.Errorf("restored kill switch (refused %d):\n%s", refused, rs)
	}

	missing = false
	fresh := newFW(ns)
	fresh.testDial = kernelWithoutNFLOG(t, ns, &missing, &refused)
	if _, err := fresh.Apply(ctx, s); err != nil {
		t.Fatal(err)
	}
	rs = ns.nft("list", "ruleset")
	for _, want := range []string{"log group 7207", "log group 7208", "log group 7209"} {
		if !strings.Contains(rs, want) {
			t.Errorf("with the logger, %q is missing:\n%s", want, rs)
		}
	}
}

// ENOENT alone is not a missing logger: a batch refused for another
// reason (here: a table fw4 deleted between Apply's read and its batch,
// made by a rule for a table that does not exist) is an error as before,
// and the log rules stay in the plan.
func TestApplyKeepsTheLogRulesWhenENOENTHasAnotherCause(t *testing.T) {
	ctx := context.Background()
	ns := newNS(t, "nflog2")
	fw := newFW(ns)
	logs := captureLog(fw)
	s := routerWithWakeUps()
	if _, err := fw.Apply(ctx, s); err != nil {
		t.Fatal(err)
	}
	c, err := fw.conn()
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseLasting()
	c.AddRule(&nftables.Rule{Table: &nftables.Table{Family: famInet, Name: "gone_table"},
		Chain: &nftables.Chain{Name: "output"}})
	ferr := c.Flush()
	if ferr == nil || !isENOENT(ferr) {
		t.Fatalf("a rule for a missing table: %v, want ENOENT", ferr)
	}
	fw.mu.Lock()
	refusedLog := fw.logRulesRefused(c, s, ferr)
	fw.mu.Unlock()
	if refusedLog {
		t.Fatal("an ENOENT for a missing table taken for a missing NFLOG logger")
	}
	if fw.noLogRules || strings.Contains(logs.String(), logRulesOffWarning) {
		t.Fatalf("log rules dropped after an unrelated ENOENT:\n%s", logs)
	}
	ns.nft("delete", "table", "ip", TableTProxy)
	if _, err := fw.Apply(ctx, s); err != nil {
		t.Fatal(err)
	}
	if rs := ns.nft("list", "ruleset"); !strings.Contains(rs, "log group 7208") || !strings.Contains(rs, "log group 7207") {
		t.Errorf("the wake-ups are gone:\n%s", rs)
	}
	if strings.Contains(ns.nft("list", "tables"), logProbeTable) {
		t.Error("the log probe's table was left behind")
	}
}

// The plan without log rules differs from the plan in the wake-up rules
// only: they decide no verdict and count nothing, so every packet meets
// the same rules and every counter still counts.
func TestWithoutLogRulesDropsOnlyTheWakeUps(t *testing.T) {
	s := routerWithWakeUps()
	full, lean := buildTables(s), withoutLogRules(buildTables(s))
	if hasLogRules(lean) {
		t.Fatal("log rules left")
	}
	var dropped []string
	for i, ft := range full {
		for j, fc := range ft.chains {
			lc := lean[i].chains[j]
			k := 0
			for _, r := range fc.rules {
				if k < len(lc.rules) && lc.rules[k].id == r.id {
					k++
					continue
				}
				dropped = append(dropped, r.id)
			}
			if k != len(lc.rules) {
				t.Errorf("%s chain %s: the lean plan has rules the full one lacks", ft.key(), fc.name)
			}
		}
	}
	if strings.Join(dropped, ",") != "out-loopguard-events,out-counter-wake,rst-in-wake4,rst-in-wake6,lan-wake" {
		t.Errorf("dropped %v, want the loop guard's, the counter wake-ups and the LAN wake-up", dropped)
	}
	if !hasLogRules(buildTables(s)) {
		t.Error("withoutLogRules changed the plan it was given")
	}
}
