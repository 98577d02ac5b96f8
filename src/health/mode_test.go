package health

import (
	"context"
	"strings"
	"testing"
)

// The exit check judged per vendor mode (Judging). The world's hosts
// marked direct answer with the ISP's address and CN, as a site off the
// vendor's list does in rule mode (E3).

// modeTargets are the fixture's targets with trace1 (and search) on the
// vendor's list.
func modeTargets(listed ...string) []Target {
	out := make([]Target, len(targets))
	copy(out, targets)
	for i := range out {
		for _, n := range listed {
			if out[i].Name == n {
				out[i].Listed = true
			}
		}
	}
	return out
}

func (w *world) setDirect(on bool, hosts ...string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, h := range hosts {
		w.direct[h] = on
	}
}

func (w *world) setDown(on bool, hosts ...string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, h := range hosts {
		w.down[h] = on
	}
}

var unlistedHosts = []string{"trace2.lab", "echo1.lab", "echo2.lab", "echo3.lab"}

// Rule mode, no probe marked listed: every probe answers from the ISP (the
// vendor sends them direct). That is not a fault: OK, no confirmation, and
// ExitCheck says why the exit was not judged. Global mode with the same
// answers is a DOMESTIC_EXIT (the control).
func TestRuleModeUnlistedDomesticExitIsNoFault(t *testing.T) {
	f := newFixture(t)
	f.w.set("CN", "198.18.2.2")
	f.build(Config{Targets: targets, Judging: JudgingFor("rule"), EgressTargets: []string{"x:1"}})
	r := f.c.Check(context.Background())
	if r.Outcome != OK || r.Confirmed || len(f.waited) != 0 {
		t.Errorf("rule mode, nothing listed: outcome %s (%s), confirmed %v; want OK without a confirmation", r.Outcome, r.Reason, r.Confirmed)
	}
	if !strings.Contains(r.ExitCheck, "not judged") || !strings.Contains(r.ExitCheck, "probe.listed") {
		t.Errorf("ExitCheck = %q, want the reason the exit was not judged", r.ExitCheck)
	}
	f.build(Config{Targets: targets, Judging: JudgingFor("global"), EgressTargets: []string{"x:1"}})
	if r := f.c.Check(context.Background()); r.Outcome != DomesticExit {
		t.Errorf("global mode (control): outcome %s (%s), want DOMESTIC_EXIT", r.Outcome, r.Reason)
	}
}

// Rule mode with trace1 listed: the unlisted probes exit domestically
// (direct by design) and the listed one through the tunnel: OK, and the
// exit shown is the listed probe's. When the listed probe exits
// domestically too, the vendor's tunnel is not carrying its own list: a
// confirmed DOMESTIC_EXIT.
func TestRuleModeJudgesListedProbesOnly(t *testing.T) {
	f := newFixture(t)
	f.w.setDirect(true, unlistedHosts...)
	f.build(Config{Targets: modeTargets("trace1"), Judging: JudgeListed, EgressTargets: []string{"x:1"}})
	for i := 0; i < 5; i++ { // whichever probe answers first
		r := f.c.Check(context.Background())
		if r.Outcome != OK || r.ExitCountry != "US" || r.ExitIP != "198.18.20.1" {
			t.Fatalf("run %d: outcome %s (%s) exit %s/%s; want OK with the listed probe's exit US", i, r.Outcome, r.Reason, r.ExitIP, r.ExitCountry)
		}
		if !strings.Contains(r.ExitCheck, "trace1") {
			t.Errorf("ExitCheck = %q, want it to name trace1", r.ExitCheck)
		}
	}
	f.w.setDirect(true, "trace1.lab")
	r := f.c.Check(context.Background())
	if r.Outcome != DomesticExit || !r.Confirmed {
		t.Errorf("listed probe exits domestically: outcome %s (%s), want confirmed DOMESTIC_EXIT", r.Outcome, r.Reason)
	}
}

// Rule mode with probes listed: when every listed probe fails, the
// unlisted ones answering (direct) do not prove the tunnel. Global mode
// counts any answer (the control).
func TestRuleModeUnlistedAnswersDoNotProveTheTunnel(t *testing.T) {
	f := newFixture(t)
	f.w.setDirect(true, unlistedHosts...)
	f.w.setDown(true, "search.lab", "trace1.lab")
	f.build(Config{Targets: modeTargets("search", "trace1"), Judging: JudgeListed, EgressTargets: []string{"x:1"}})
	r := f.c.Check(context.Background())
	if r.TunnelUp || r.Outcome == OK {
		t.Errorf("listed probes down: tunnel_up %v outcome %s (%s); want the tunnel not proven", r.TunnelUp, r.Outcome, r.Reason)
	}
	if !strings.Contains(r.Reason, "vendor's list") {
		t.Errorf("reason %q, want it to say the listed probes failed", r.Reason)
	}
	f.build(Config{Targets: modeTargets("search", "trace1"), Judging: JudgeAll, EgressTargets: []string{"x:1"}})
	if r := f.c.Check(context.Background()); !r.TunnelUp {
		t.Errorf("global (control): tunnel_up false (%s), want the unlisted answers to count", r.Reason)
	}
}

// Direct mode: everything exits from the ISP by the user's choice: OK, the
// exit is shown, not judged.
func TestDirectModeExitNotJudged(t *testing.T) {
	f := newFixture(t)
	f.w.set("CN", "198.18.2.2")
	f.build(Config{Targets: modeTargets("trace1"), Judging: JudgingFor("direct"), EgressTargets: []string{"x:1"}})
	r := f.c.Check(context.Background())
	if r.Outcome != OK || len(f.waited) != 0 || r.ExitIP != "198.18.2.2" {
		t.Errorf("direct mode: outcome %s (%s) exit %s; want OK, the ISP exit shown", r.Outcome, r.Reason, r.ExitIP)
	}
	if !strings.Contains(r.ExitCheck, "mode direct") {
		t.Errorf("ExitCheck = %q", r.ExitCheck)
	}
}

func TestJudgingFor(t *testing.T) {
	for mode, want := range map[string]Judging{"global": JudgeAll, "rule": JudgeListed, "direct": JudgeNone, "": JudgeAll} {
		if got := JudgingFor(mode); got != want {
			t.Errorf("JudgingFor(%q) = %d, want %d", mode, got, want)
		}
	}
}
