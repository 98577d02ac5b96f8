package bench

import (
	"strings"
	"testing"

	"surflare-watchdog/src/lab"
)

// The chaos section names every broken invariant of each side, and both
// sides' chaos runs get the subscription cooldown a burst can wait out.
func TestChaosMarkdownNamesBrokenInvariants(t *testing.T) {
	p50 := 1.5
	r := &Result{Chaos: []Chaos{
		{Variant: Ours, Seed: 7, DurationS: 180, Bursts: 3, Recovered: 3, P50S: &p50, Invariants: []lab.ChaosInvariant{{Name: "no leaked packets", Held: true}}},
		{Variant: Baseline, Seed: 7, DurationS: 180, Bursts: 2, Recovered: 1, Leaked: 4,
			Invariants: []lab.ChaosInvariant{{Name: "no leaked packets", Held: false, Figure: "leaks=4"}},
			Violations: []string{"no leaked packets: 4 packet(s)"}},
	}}
	var b strings.Builder
	writeChaosMarkdown(&b, r)
	md := b.String()
	for _, want := range []string{"seed 7", "| ours | 3 min | 3 | 3 | 1.5 | — | — | — | — | 0 |", "1/1", "0/1 — broken: no leaked packets", "violation: no leaked packets: 4"} {
		if !strings.Contains(md, want) {
			t.Errorf("chaos markdown lacks %q:\n%s", want, md)
		}
	}
	ours, _ := OursParams()
	sets := strings.Join(chaosSets(BaselineParams(ours)), " ")
	if !strings.Contains(sets, "subscription_cooldown=20") || !strings.Contains(sets, "fastsignal.enabled=0") {
		t.Errorf("baseline chaos sets lack the cooldown or the baseline's own: %s", sets)
	}
}
