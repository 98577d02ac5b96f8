package lab

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// The mode scenarios (scenario_modes.go) against the real daemon, each with
// the fakes in the evidence's rule-mode routing (rule_routing=list, E3) and
// in the old fake's (legacy), strict_direct at its default. A household
// would notice: a site that fails, a foreign site on the vendor's list that
// leaves through the ISP, a rotation or failed check caused by the vendor's
// own design.
func TestModeScenarios(t *testing.T) {
	needRoot(t)
	if testing.Short() {
		t.Skip("-short: scenarios need the built binaries and take minutes")
	}
	if buildErr != nil {
		t.Fatalf("building the lab binaries: %v", buildErr)
	}
	for _, name := range modeScenarioNames() {
		for _, routing := range []string{"rule_routing=list", "rule_routing=legacy"} {
			t.Run(name+"/"+routing, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
				defer cancel()
				res, err := RunScenario(ctx, name, ScenarioOptions{Runs: 1, BinDir: binDir, Vendor: []string{routing}})
				if err != nil {
					t.Fatal(err)
				}
				r := res.Runs[0]
				b, _ := json.Marshal(r)
				counts := ModeCounts(r)
				t.Logf("%s %s: listed %s | unlisted %s | domestic %s | leaked packets %d (%s)\n%s", name, routing,
					counts[SiteListed], counts[SiteUnlisted], counts[SiteDomestic], r.LeakedPackets, r.Leaks, b)
				if r.Error != "" {
					t.Fatalf("run failed: %s", r.Error)
				}
				for _, s := range modeSites {
					if c := counts[s.site]; c.Works != modeRequests {
						t.Errorf("%s (%s): %s; every request must work", s.site, s.host, c)
					}
				}
				if r.Extra["expected"] != true {
					t.Errorf("a site did not come out where mode %s sends it: %s", r.Extra["mode"], r.Outcome)
				}
				if r.Extra["failed_checks"] != 0 || r.Extra["rotations"] != 0 || r.FinalState != "healthy" {
					t.Errorf("the daemon did not stay healthy on its node: %d failed checks, %d rotations, state %s (%s)",
						r.Extra["failed_checks"], r.Extra["rotations"], r.FinalState, r.Outcome)
				}
				if c := counts[SiteListed]; r.Extra["mode"] != "direct" && c.Leaks != 0 {
					t.Errorf("a site on the vendor's list left through the ISP: %s", c)
				}
				exitCheck, _ := r.Extra["exit_check"].(string)
				switch r.Extra["mode"] {
				case "global":
					if r.LeakedPackets != 0 {
						t.Errorf("mode global: %d packets leaked (%s)", r.LeakedPackets, r.Leaks)
					}
					if !strings.Contains(exitCheck, "every probe") {
						t.Errorf("mode global: exit check %q, want every probe judged", exitCheck)
					}
				case "rule":
					if routing == "rule_routing=legacy" && r.LeakedPackets != 0 {
						t.Errorf("mode rule, legacy routing (everything foreign tunnelled): %d packets leaked (%s)", r.LeakedPackets, r.Leaks)
					}
					// The lab's listed probes (search, cdn1) judge the exit.
					if !strings.Contains(exitCheck, "cdn1") {
						t.Errorf("mode rule: exit check %q, want it judged on the listed cdn1", exitCheck)
					}
				case "direct":
					if !strings.Contains(exitCheck, "mode direct") {
						t.Errorf("mode direct: exit check %q, want not judged", exitCheck)
					}
				}
			})
		}
	}
}
