package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"surflare-watchdog/src/lab"
)

// The chaos section: `surflare-lab chaos` (package lab) with our
// parameters and with the baseline's, on the same seed, so both sides get
// the same faults in the same order. Every invariant of the run is
// reported; a broken one is a finding, like a missed target.

// DefaultChaosSeed is the seed the benchmark throws faults with.
const DefaultChaosSeed = 1

// chaosBudget bounds one burst's recovery with the shipped timings: a
// check every 30 s, 10 s once degraded and 4 failures before a rotation
// make a minute of detection alone, and a respawn takes procd's 5 s.
const chaosBudget = 150 * time.Second

// Chaos is one side's chaos run, summarised.
type Chaos struct {
	Variant    Variant              `json:"variant"`
	Seed       uint64               `json:"seed"`
	DurationS  Num                  `json:"duration_s"`
	BudgetS    Num                  `json:"budget_s"`
	Bursts     int                  `json:"bursts"`
	Recovered  int                  `json:"recovered_bursts"`
	P50S       *float64             `json:"p50_recover_s"`
	P95S       *float64             `json:"p95_recover_s"`
	MaxS       *float64             `json:"max_recover_s"`
	OutP95S    *float64             `json:"outage_p95_s"`
	OutMaxS    *float64             `json:"outage_max_s"`
	Leaked     uint64               `json:"leaked_packets"`
	Starts     int                  `json:"daemon_starts"`
	Invariants []lab.ChaosInvariant `json:"invariants"`
	Violations []string             `json:"violations,omitempty"`
	Faults     []string             `json:"faults"` // per burst, in order
	Error      string               `json:"error,omitempty"`
}

// chaosSets are p's parameters plus what a chaos run needs whatever the
// side: a subscription cooldown that ends within a burst's budget (the
// shipped hour would hold every later burst offline).
func chaosSets(p Params) []string {
	return append(slices.Clone(p.Sets), "surflare.auth=auth", "surflare.auth.subscription_cooldown=20")
}

// chaosRun runs one side.
func chaosRun(ctx context.Context, env labEnv, p Params, d time.Duration, seed uint64) Chaos {
	c := Chaos{Variant: p.Variant, Seed: seed, DurationS: Num(d.Seconds()), BudgetS: Num(chaosBudget.Seconds())}
	res, err := lab.RunChaos(ctx, lab.ChaosOptions{Duration: d, Seed: seed, Budget: chaosBudget, Sets: chaosSets(p), BinDir: env.binDir, Log: env.log})
	if err != nil {
		c.Error = err.Error()
		return c
	}
	c.Error = res.Error
	c.Bursts, c.Leaked, c.Starts = len(res.Bursts), res.Leaked, res.Daemon.Starts
	c.P50S, c.P95S, c.MaxS = res.AllRecover.P50S, res.AllRecover.P95S, res.AllRecover.MaxS
	c.OutP95S, c.OutMaxS = res.AllRecover.OutP95S, res.AllRecover.OutMaxS
	c.Invariants = res.Invariants
	for _, b := range res.Bursts {
		if b.Recovered {
			c.Recovered++
		}
		c.Faults = append(c.Faults, strings.Join(b.Faults, " + "))
	}
	for _, v := range res.Violations {
		c.Violations = append(c.Violations, v.Invariant+": "+v.Detail)
	}
	return c
}

// writeChaosMarkdown is the report's chaos section.
func writeChaosMarkdown(b *strings.Builder, r *Result) {
	if len(r.Chaos) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Chaos (seed %d, the same faults for both sides)\n\n", r.Chaos[0].Seed)
	b.WriteString("Recovery is from the end of a burst's last fault to the first LAN request through an exit; the outage is how long LAN traffic was out, the faults' time included.\n\n")
	b.WriteString("| params | duration | bursts | recovered | p50 recover | p95 recover | max recover | p95 outage | max outage | leaked packets | daemon starts | invariants held |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, c := range r.Chaos {
		held, broken := 0, []string{}
		for _, i := range c.Invariants {
			if i.Held {
				held++
			} else {
				broken = append(broken, i.Name)
			}
		}
		verdict := fmt.Sprintf("%d/%d", held, len(c.Invariants))
		if len(broken) > 0 {
			verdict += " — broken: " + strings.Join(broken, ", ")
		}
		if c.Error != "" {
			verdict += " — " + firstLine(c.Error)
		}
		fmt.Fprintf(b, "| %s | %s | %d | %d | %s | %s | %s | %s | %s | %d | %d | %s |\n", c.Variant, fmtDuration(float64(c.DurationS)), c.Bursts, c.Recovered,
			fmtSeconds(f64(c.P50S)), fmtSeconds(f64(c.P95S)), fmtSeconds(f64(c.MaxS)), fmtSeconds(f64(c.OutP95S)), fmtSeconds(f64(c.OutMaxS)), c.Leaked, c.Starts, cell(verdict))
	}
	for _, c := range r.Chaos {
		fmt.Fprintf(b, "\n%s, invariant by invariant:\n\n", c.Variant)
		for _, i := range c.Invariants {
			mark := "held"
			if !i.Held {
				mark = "**broken**"
			}
			fmt.Fprintf(b, "- %s: %s (%s)\n", i.Name, mark, cell(i.Figure))
		}
		for _, v := range c.Violations[:min(5, len(c.Violations))] {
			fmt.Fprintf(b, "  - violation: %s\n", cell(v))
		}
	}
	if len(r.Chaos[0].Faults) > 0 {
		fmt.Fprintf(b, "\nBursts (%s): %s\n", r.Chaos[0].Variant, cell(strings.Join(r.Chaos[0].Faults, "; ")))
	}
}

func f64(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}
