package lab

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// report turns what the run saw into res: recovery figures per fault,
// the invariants' verdicts and every violation with its context.
func (c *chaosRun) report(res *ChaosResult) {
	c.mu.Lock()
	res.Timeline = append(res.Timeline, c.timeline...)
	res.Notes = append(res.Notes, c.notes...)
	c.mu.Unlock()

	// Recovery per fault kind: each burst's recovery counts for every
	// fault in it.
	byFault := map[string][]ChaosBurst{}
	for _, b := range res.Bursts {
		seen := map[string]bool{}
		for _, f := range b.Faults {
			name, _, _ := strings.Cut(f, " ")
			if !seen[name] {
				seen[name] = true
				byFault[name] = append(byFault[name], b)
			}
		}
	}
	for name, bs := range byFault {
		res.Recovery = append(res.Recovery, recoveryOf(name, bs))
	}
	sort.Slice(res.Recovery, func(i, j int) bool { return res.Recovery[i].Fault < res.Recovery[j].Fault })
	res.AllRecover = recoveryOf("all", res.Bursts)

	exits, starts, maxCount, halted, startErrs := c.sup.report()
	res.Daemon.Starts, res.Daemon.Exits, res.Daemon.MaxRespawn, res.Daemon.Halted, res.Daemon.StartErrors = starts, append([]daemonExit{}, exits...), maxCount, halted, startErrs
	unexpected := 0
	for _, e := range exits {
		if !e.Expected {
			unexpected++
			c.watch.violateAt(e.End, invExits, "daemon pid %d exited by itself after %s: %s", e.PID, e.End.Sub(e.Start).Round(time.Millisecond), e.Status)
		}
	}
	if halted {
		c.watch.violate(invRespawn, "procd would have halted the daemon: respawn_count %d > respawn_retry %d", maxCount, ProcdRespawnRetry)
	}

	w := c.watch
	w.mu.Lock()
	procs := append([]procSample(nil), w.procs...)
	res.Leaked, res.Leaks = w.leaks.Total(), w.leaks.String()
	res.Daemon.StateReads = w.stateReads
	for f, n := range w.stateFiles {
		res.Daemon.StateFiles = append(res.Daemon.StateFiles, fmt.Sprintf("%s (%d reads)", f, n))
	}
	for _, s := range w.states {
		if len(res.Daemon.States) == 0 || res.Daemon.States[len(res.Daemon.States)-1] != s.State {
			res.Daemon.States = append(res.Daemon.States, s.State)
		}
	}
	panics := w.panics
	res.ScrapeFails = w.scrapeFails
	w.mu.Unlock()
	sort.Strings(res.Daemon.StateFiles)
	res.FDs = slopeOf(procs, func(p procSample) int { return p.FDs })
	res.Threads = slopeOf(procs, func(p procSample) int { return p.Threads })
	res.RSSKB = slopeOf(procs, func(p procSample) int { return p.RSSKB })
	var scraped []procSample
	for _, p := range procs {
		if p.Goroutines >= 0 {
			scraped = append(scraped, p)
		}
	}
	res.Goroutines = slopeOf(scraped, func(p procSample) int { return p.Goroutines })
	if len(scraped) == 0 {
		w.violate(invGoroutines, "no go_goroutines sample in %d scrapes of the daemon's /metrics", len(procs))
	}
	// A slope over a few minutes is the warm-up's (heap growing to its
	// working size, the first probes' connections), not a leak: it is
	// judged only over minSlopeSpan of samples.
	judged := res.FDs.SpanMin >= minSlopeSpan.Minutes()
	if judged && res.FDs.PerHour > maxFDGrowthPerHour {
		w.violate(invFDs, "fd slope %.2f/min (%.0f/h > %d/h)", res.FDs.PerMin, res.FDs.PerHour, maxFDGrowthPerHour)
	}
	if judged && res.Threads.PerHour > maxThreadGrowthPerHour {
		w.violate(invThreads, "thread slope %.2f/min (%.0f/h > %d/h)", res.Threads.PerMin, res.Threads.PerHour, maxThreadGrowthPerHour)
	}
	if res.Goroutines.SpanMin >= minSlopeSpan.Minutes() && res.Goroutines.PerHour > maxGoroutineGrowthPerHour {
		w.violate(invGoroutines, "goroutine slope %.2f/min (%.0f/h > %d/h)", res.Goroutines.PerMin, res.Goroutines.PerHour, maxGoroutineGrowthPerHour)
	}
	if judged && res.RSSKB.PerHour > maxRSSGrowthPerHourKB {
		w.violate(invRSS, "RSS slope %.0f kB/min (%.0f kB/h > %d kB/h)", res.RSSKB.PerMin, res.RSSKB.PerHour, maxRSSGrowthPerHourKB)
	}
	res.Traffic = c.traffic.snapshot()

	w.mu.Lock()
	viol := append([]ChaosViolation(nil), w.viol...)
	w.mu.Unlock()
	count := map[string]int{}
	for i := range viol {
		v := &viol[i]
		count[v.Invariant]++
		v.Timeline = timelineAround(res.Timeline, v.At, 30*time.Second)
		v.Log = w.logAround(v.At, 20*time.Second, 2*time.Second)
	}
	res.Violations = viol

	over := 0
	for _, b := range res.Bursts {
		if !b.Recovered {
			over++
		}
	}
	held := func(inv string) bool { return count[inv] == 0 }
	res.Invariants = append(res.Invariants,
		ChaosInvariant{invLeaks, held(invLeaks), res.Leaks},
		ChaosInvariant{invRecovery, held(invRecovery), fmt.Sprintf("%d bursts, %d over %s after the last fault ended: p50 %s p95 %s max %s; outage p95 %s max %s", len(res.Bursts), over,
			time.Duration(res.BudgetS*float64(time.Second)), fmtSecs(res.AllRecover.P50S), fmtSecs(res.AllRecover.P95S), fmtSecs(res.AllRecover.MaxS),
			fmtSecs(res.AllRecover.OutP95S), fmtSecs(res.AllRecover.OutMaxS))},
		ChaosInvariant{invExits, held(invExits), fmt.Sprintf("%d starts, %d exits, %d unexpected", starts, len(exits), unexpected)},
		ChaosInvariant{invNoPanic, held(invNoPanic), fmt.Sprintf("%d crash lines in the daemon's output", panics)},
		ChaosInvariant{invRespawn, held(invRespawn), fmt.Sprintf("max respawn_count %d of %d (threshold %s, timeout %s)", maxCount, ProcdRespawnRetry, ProcdRespawnThreshold, ProcdRespawnTimeout)},
		ChaosInvariant{invFDs, held(invFDs), slopeFigure(res.FDs, "")},
		ChaosInvariant{invThreads, held(invThreads), slopeFigure(res.Threads, "")},
		ChaosInvariant{invGoroutines, held(invGoroutines), slopeFigure(res.Goroutines, "") + fmt.Sprintf("; %d of %d scrapes failed", res.ScrapeFails, len(procs))},
		ChaosInvariant{invRSS, held(invRSS), slopeFigure(res.RSSKB, " kB")},
		ChaosInvariant{invStateFiles, held(invStateFiles), fmt.Sprintf("%d reads of %d files, %d bad", res.Daemon.StateReads, len(res.Daemon.StateFiles), count[invStateFiles])},
	)
}

func recoveryOf(name string, bs []ChaosBurst) ChaosRecovery {
	r := ChaosRecovery{Fault: name, N: len(bs)}
	var xs, out []float64
	for _, b := range bs {
		if b.OutageS != nil {
			out = append(out, *b.OutageS)
		}
		if !b.Recovered {
			r.OverBudg++
		}
		if b.RecoverS != nil {
			xs = append(xs, *b.RecoverS)
		}
	}
	r.P50S, r.P95S, r.MaxS = percentile(xs, 50), percentile(xs, 95), percentile(xs, 100)
	r.OutP95S, r.OutMaxS = percentile(out, 95), percentile(out, 100)
	return r
}

func slopeOf(ps []procSample, y func(procSample) int) ChaosSlope {
	perMin, n, span := fixedEffectsSlope(ps, func(p procSample) float64 { return float64(y(p)) })
	s := ChaosSlope{PerMin: math.Round(perMin*1000) / 1000, PerHour: math.Round(perMin*60*10) / 10, Samples: n,
		SpanMin: math.Round(span.Minutes()*10) / 10}
	for i, p := range ps {
		v := y(p)
		if i == 0 || v < s.Min {
			s.Min = v
		}
		s.Max = max(s.Max, v)
	}
	return s
}

func slopeFigure(s ChaosSlope, unit string) string {
	judged := ""
	if s.SpanMin < minSlopeSpan.Minutes() {
		judged = fmt.Sprintf(" — not judged: %.1f min of samples < %s", s.SpanMin, minSlopeSpan)
	}
	return fmt.Sprintf("slope %+.3f%s/min (%+.1f%s/h) over %d samples, range %d..%d%s", s.PerMin, unit, s.PerHour, unit, s.Samples, s.Min, s.Max, unit) + judged
}

// timelineAround is the fault events within d of t, as lines.
func timelineAround(tl []ChaosFaultEvent, t time.Time, d time.Duration) []string {
	var out []string
	for _, e := range tl {
		if e.At.After(t.Add(-d)) && e.At.Before(t.Add(d)) {
			out = append(out, fmtEvent(e, t))
		}
	}
	return out
}

func fmtEvent(e ChaosFaultEvent, ref time.Time) string {
	s := fmt.Sprintf("%+7.1fs burst %d %s %s %s", e.At.Sub(ref).Seconds(), e.Burst, e.Name, onOff(e.On), strings.Join(e.Args, " "))
	if e.Phase != "" && e.Phase != chaosPhaseAny {
		s += " [" + e.Phase + "]"
	}
	if e.State != "" {
		s += " (daemon " + e.State + ")"
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	if e.Error != "" {
		s += " ERROR " + e.Error
	}
	return s
}

// WriteJSON writes the result as one JSON object.
func (r *ChaosResult) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the verdict, the recovery per fault and each
// violation with its timeline and log excerpt.
func (r *ChaosResult) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "chaos seed %d, %s, budget %s: %d bursts\n", r.Seed, time.Duration(r.DurationS*float64(time.Second)),
		time.Duration(r.BudgetS*float64(time.Second)), len(r.Bursts))
	if r.Error != "" {
		fmt.Fprintf(w, "ERROR: %s\n", r.Error)
	}
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "INVARIANT\tHELD\tFIGURE")
	for _, i := range r.Invariants {
		held := "yes"
		if !i.Held {
			held = "NO"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", i.Name, held, i.Figure)
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "FAULT\tBURSTS\tRECOVER P50\tP95\tMAX\tOVER BUDGET\tOUTAGE P95\tMAX")
	for _, rc := range append(r.Recovery, r.AllRecover) {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d\t%s\t%s\n", rc.Fault, rc.N, fmtSecs(rc.P50S), fmtSecs(rc.P95S), fmtSecs(rc.MaxS), rc.OverBudg, fmtSecs(rc.OutP95S), fmtSecs(rc.OutMaxS))
	}
	tw.Flush()
	var tr []string
	for _, k := range []string{"echo", "http", "bulk", "dns", "udp", "ipv6"} {
		if c, ok := r.Traffic[k]; ok {
			tr = append(tr, fmt.Sprintf("%s %d/%d", k, c.OK, c.OK+c.Fail))
		}
	}
	fmt.Fprintf(w, "\ntraffic (ok/total): %s\n", strings.Join(tr, ", "))
	fmt.Fprintf(w, "daemon: %d starts, states %s\n", r.Daemon.Starts, strings.Join(r.Daemon.States, " "))
	for _, v := range r.Violations {
		fmt.Fprintf(w, "\nVIOLATION (seed %d) at %s: %s: %s\n", r.Seed, v.At.Format("15:04:05.000"), v.Invariant, v.Detail)
		if len(v.Timeline) > 0 {
			fmt.Fprintf(w, "  faults around it:\n    %s\n", strings.Join(v.Timeline, "\n    "))
		}
		if len(v.Log) > 0 {
			fmt.Fprintf(w, "  daemon log before it:\n    %s\n", strings.Join(v.Log, "\n    "))
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}
