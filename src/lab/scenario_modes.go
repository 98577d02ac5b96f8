package lab

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The mode scenarios (issue 18): the daemon runs the vendor in one mode
// (global, rule, direct) and a LAN client reaches three sites — a foreign
// site on the vendor's rule-mode list (blocked.ipecho.lab), a foreign site
// not on it (open.ipecho.lab) and a domestic one (www.domestic.lab, in
// cn_direct). Each request's exit says where it went: through the daemon's
// node, or out of the household's ISP address. The run counts what works
// and what left through the ISP (a leak by the lab's count unless it is
// domestic), and checks that the daemon stays healthy on its node: a site
// the vendor sends direct by design is no reason to rotate.
//
// The vendor knobs decide what is expected: with rule_routing=list (the
// evidence, E3, the scenarios' default) rule mode sends the unlisted site
// direct; with rule_routing=legacy (the old fake) it tunnels every foreign
// site. Both must work with strict_direct at its default.

// Scenario names.
const (
	ScenarioModeGlobal = "mode-global"
	ScenarioModeRule   = "mode-rule"
	ScenarioModeDirect = "mode-direct"
)

// The three sites of a mode scenario.
const (
	SiteListed   = "listed"   // foreign, on the vendor's list
	SiteUnlisted = "unlisted" // foreign, not on it
	SiteDomestic = "domestic" // in cn_direct
)

// modeSites are the sites in report order, with the Host a client sends
// (the vendor's rule mode sniffs it, E3) and where it connects.
var modeSites = []struct{ site, host, addr string }{
	{SiteListed, "blocked.ipecho.lab", IPEcho[0].String()},
	{SiteUnlisted, "open.ipecho.lab", IPEcho[0].String()},
	{SiteDomestic, "www.domestic.lab", DomesticWeb.String()},
}

// Budgets of a mode run.
const (
	// modeRequests is how many requests the client makes to each site.
	modeRequests = 5
	// modeChecks is how many health checks the daemon must pass after the
	// requests began, with no failed check and no rotation.
	modeChecks = 3
	// modeObserve bounds the wait for them (checks every 2 s in the
	// scenarios' base settings).
	modeObserve = 30 * time.Second
	// modeHealthy bounds the first connect.
	modeHealthy = 60 * time.Second
)

// SiteCount is what the client saw for one site.
type SiteCount struct {
	// Works counts requests that got an answer.
	Works int `json:"works"`
	// Tunnelled counts answers that came out of the daemon's node.
	Tunnelled int `json:"tunnelled"`
	// Direct counts answers that came out of the household's ISP address.
	Direct int `json:"direct"`
	// Leaks counts direct answers from a foreign site: what the lab counts
	// as a leak (by the vendor's design in rule and direct mode).
	Leaks int `json:"leaks"`
	// Failed counts requests without an answer.
	Failed int `json:"failed"`
}

func (c SiteCount) String() string {
	return fmt.Sprintf("works %d/%d (tunnel %d, direct %d), leaks %d", c.Works, c.Works+c.Failed, c.Tunnelled, c.Direct, c.Leaks)
}

// modeWant is where each site must come out in a mode, given the knobs:
// true = through the tunnel, false = direct.
func modeWant(mode string, vendor []string) map[string]bool {
	list := false // the fakes' default is legacy; the last knob wins
	for _, k := range vendor {
		switch k {
		case "rule_routing=list":
			list = true
		case "rule_routing=legacy":
			list = false
		}
	}
	switch mode {
	case "global":
		return map[string]bool{SiteListed: true, SiteUnlisted: true, SiteDomestic: false}
	case "rule":
		return map[string]bool{SiteListed: true, SiteUnlisted: !list, SiteDomestic: false}
	}
	return map[string]bool{SiteListed: false, SiteUnlisted: false, SiteDomestic: false}
}

func init() {
	for _, m := range []struct{ name, mode, summary string }{
		{ScenarioModeGlobal, "global", "mode global: a LAN client reaches a listed, an unlisted and a domestic site; the foreign ones through the tunnel"},
		{ScenarioModeRule, "rule", "mode rule: the vendor sends a foreign site off its list direct (E3); it works, and the daemon neither cuts it nor rotates"},
		{ScenarioModeDirect, "direct", "mode direct: the vendor sends everything direct; every site works and the daemon stays healthy"},
	} {
		mode := m.mode
		RegisterScenario(ScenarioSpec{Name: m.name, Summary: m.summary,
			Sets:   []string{"surflare.main.mode=" + mode},
			Vendor: []string{"rule_routing=list"}, // the evidence (E3); --vendor rule_routing=legacy for the old fake
			Standalone: func(ctx context.Context, o Options) ([]ScenarioRun, error) {
				run, err := ModeScenario(ctx, o, mode)
				return []ScenarioRun{run}, err
			}})
	}
}

// ModeScenario brings a lab up with o (whose Set must name the mode, as
// the scenarios' Sets do), starts the daemon in mode, and reports one run:
// Extra holds a SiteCount per site, the daemon's node and checks, and
// "expected" says whether every site came out where the mode sends it.
// Recovered is true when every site worked, came out where expected, and
// the daemon passed modeChecks checks on its node without a failure.
func ModeScenario(ctx context.Context, o Options, mode string) (ScenarioRun, error) {
	run := ScenarioRun{NodesTried: []string{}, States: []string{}, Extra: map[string]any{"mode": mode}}
	if o.Clients == 0 {
		o.Clients = 1
	}
	l, err := Up(ctx, o)
	if err != nil {
		return run, err
	}
	defer l.Close()
	if _, err := l.StartDaemon(ctx, o.Set...); err != nil {
		return run, fmt.Errorf("starting the daemon: %w", err)
	}
	defer func() {
		if l.DaemonRunning() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DaemonStopGrace+time.Second)
			defer cancel()
			_, _ = l.StopDaemon(sctx)
		}
	}()
	st, err := l.WaitDaemon(ctx, modeHealthy, DaemonState.Healthy)
	if err != nil {
		return run, fmt.Errorf("daemon never healthy in mode %s (state %q): %w; log tail:\n%s", mode, st.State, err, l.daemonLogTail(15))
	}
	if st.Mode != mode {
		return run, fmt.Errorf("the daemon runs mode %q, the scenario wants %q", st.Mode, mode)
	}
	healthyAt := time.Now()
	node, checks0, failed0, rot0 := st.Node, st.Counters.Checks, st.Counters.FailedChecks, st.Counters.Rotations
	nodeAddr := ""
	for _, n := range Exits {
		if n.Name == node {
			nodeAddr = n.Addr.String()
		}
	}
	if _, err := l.ResetLeaks(ctx); err != nil {
		return run, err
	}

	want := modeWant(mode, o.Vendor)
	counts := map[string]SiteCount{}
	expected := true
	var seen []string
	for _, s := range modeSites {
		var c SiteCount
		for range modeRequests {
			fctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			f := l.FetchHost(fctx, l.clients[0].Role, "http://"+s.addr+"/", s.host)
			cancel()
			switch ip := echoOf(f); {
			case ip == "":
				c.Failed++
			case ip == nodeAddr:
				c.Works++
				c.Tunnelled++
			case ip == WANRouter.String():
				c.Works++
				c.Direct++
				if s.site != SiteDomestic {
					c.Leaks++
				}
			default: // another exit than the daemon's node: works, but not as configured
				c.Works++
			}
		}
		counts[s.site] = c
		run.Extra["site_"+s.site] = c
		ok := c.Failed == 0 && ((want[s.site] && c.Tunnelled == modeRequests) || (!want[s.site] && c.Direct == modeRequests))
		expected = expected && ok
		where := "direct"
		if want[s.site] {
			where = "tunnel"
		}
		seen = append(seen, fmt.Sprintf("%s (%s): %s, want %s", s.site, s.host, c, where))
	}
	run.Extra["expected"] = expected

	// The daemon keeps passing its checks on its node meanwhile.
	st, err = l.WaitDaemon(ctx, modeObserve, func(s DaemonState) bool { return s.Counters.Checks >= checks0+modeChecks })
	if err != nil {
		run.Error = fmt.Sprintf("the daemon did not finish %d checks within %s: %v", modeChecks, modeObserve, err)
	}
	failed, rotations := st.Counters.FailedChecks-failed0, st.Counters.Rotations-rot0
	run.FinalState = st.State
	run.Extra["node"], run.Extra["final_node"] = node, st.Node
	run.Extra["checks"], run.Extra["failed_checks"], run.Extra["rotations"] = st.Counters.Checks-checks0, failed, rotations
	if st.LastCheck != nil {
		run.Extra["last_check"] = st.LastCheck.Outcome
		run.Extra["exit_check"] = st.LastCheck.ExitCheck
	}
	for _, t := range st.Transitions {
		if t.At.After(healthyAt) && (len(run.States) == 0 || run.States[len(run.States)-1] != t.To) {
			run.States = append(run.States, t.To)
		}
	}
	if st.Node != node {
		run.NodesTried = append(run.NodesTried, st.Node)
	}
	lc, lerr := l.Leaks(ctx)
	if lerr == nil {
		run.LeakedPackets, run.Leaks = lc.Total(), lc.String()
	}
	healthy := st.Healthy() && st.Node == node && failed == 0 && rotations == 0
	run.Recovered = expected && healthy && run.Error == ""
	out := []string{fmt.Sprintf("mode %s on %s", mode, node)}
	out = append(out, seen...)
	if !healthy {
		out = append(out, fmt.Sprintf("daemon %s on %s after %d failed checks, %d rotations", st.State, st.Node, failed, rotations))
	} else {
		out = append(out, fmt.Sprintf("daemon healthy on %s for %d more checks", node, st.Counters.Checks-checks0))
	}
	run.Outcome = strings.Join(out, "; ")
	return run, nil
}

// ModeCounts is the per-site counts of a mode run (from its Extra).
func ModeCounts(r ScenarioRun) map[string]SiteCount {
	out := map[string]SiteCount{}
	for _, s := range modeSites {
		if c, ok := r.Extra["site_"+s.site].(SiteCount); ok {
			out[s.site] = c
		}
	}
	return out
}

// modeScenarioNames lists the mode scenarios (for tests and docs).
func modeScenarioNames() []string {
	return slices.Clone([]string{ScenarioModeGlobal, ScenarioModeRule, ScenarioModeDirect})
}
