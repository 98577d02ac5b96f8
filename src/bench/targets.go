package bench

import (
	"fmt"
	"math"
)

// The benchmark's latency scenarios, by the scenario runner's names, in
// report order.
const (
	ScenarioNodeDown       = "node-down"
	ScenarioNodeBlackhole  = "node-blackhole"
	ScenarioRelayBlackhole = "relay-blackhole"
	Scenario503Storm       = "503-storm"
	ScenarioProxyCrash     = "proxy-crash"
	ScenarioDomesticExit   = "domestic-exit"
	// ScenarioIdleNodeDown: node down while no LAN client uses the tunnel
	// (idle.go); only the idle probe or urltest can see it.
	ScenarioIdleNodeDown = "idle-node-down"
)

// LatencyScenarios are measured for detection and recovery, ours and
// baseline.
var LatencyScenarios = []string{
	ScenarioNodeDown, ScenarioNodeBlackhole, ScenarioRelayBlackhole,
	Scenario503Storm, ScenarioProxyCrash, ScenarioDomesticExit,
	ScenarioIdleNodeDown,
}

// CadenceScenarios run once per urltest cadence (Options.Cadences): the
// node faults whose detection could rest on the vendor's urltest. The
// others run at the cadence of Options.Vendor.
var CadenceScenarios = []string{ScenarioNodeDown, ScenarioNodeBlackhole, Scenario503Storm, ScenarioIdleNodeDown}

// scenarioLabels are bench/README.md's words for each scenario.
var scenarioLabels = map[string]string{
	ScenarioNodeDown:       "node down",
	ScenarioNodeBlackhole:  "silent node black-hole",
	ScenarioRelayBlackhole: "relay black-hole",
	Scenario503Storm:       "503 storm",
	ScenarioProxyCrash:     "proxy crash",
	ScenarioDomesticExit:   "domestic exit",
	ScenarioIdleNodeDown:   "node down, idle tunnel",
}

// Label is a scenario's name as bench/README.md words it.
func Label(scenario string) string {
	if l, ok := scenarioLabels[scenario]; ok {
		return l
	}
	return scenario
}

// detectionTargeted are the scenarios the detection target applies to
// (black-hole and node down).
var detectionTargeted = map[string]bool{
	ScenarioNodeDown: true, ScenarioNodeBlackhole: true, ScenarioRelayBlackhole: true,
}

// The targets for our defaults (bench/README.md, "Targets").
const (
	goalDetectS      = 5.0
	goalRecoverBaseS = 10.0            // plus the fake connect time
	goalPeakRSSKB    = 20 * 1024       // 20 MB (MiB: the kernel counts kB)
	goalCPUSecPerH   = 0.01 * 3600     // 1 % of one core
	goalIPKBytes     = 6 * 1000 * 1000 // 6 MB, the decimal (stricter) reading
	kbPerMiB         = 1024.0
)

// Judge fills r.Targets and r.Ratios from the measurements. It never moves
// a goal: a figure that was not measured is NOT MEASURED, not MET.
func Judge(r *Result) {
	r.Targets = judgeTargets(r)
	r.CadenceTargets = judgeCadenceTargets(r)
	r.Ratios = ratios(r)
}

// referenceRow reports whether the README's targets judge row: the rows
// at the run's own cadence (Result.Vendor, 5 s by default: comparable with
// earlier runs) and rows without a recorded cadence. Every cadence is
// judged by the cadence targets (judgeCadenceTargets).
func referenceRow(r *Result, row ScenarioRow) bool {
	return row.CadenceS == 0 || row.CadenceS == cadenceOf(r.Vendor)
}

func judgeTargets(r *Result) []Target {
	var ts []Target
	le := func(name, goal string, v, limit float64, format func(float64) string) {
		t := Target{Name: name, Goal: goal, Measured: format(v), Verdict: Missed}
		switch {
		case math.IsNaN(v):
			t.Verdict, t.Measured = NotMeasured, "—"
		case v <= limit:
			t.Verdict = Met
		}
		ts = append(ts, t)
	}
	for _, row := range r.Scenarios {
		if !detectionTargeted[row.Name] || !referenceRow(r, row) {
			continue
		}
		name, goal := "p95 detection: "+Label(row.Name), fmt.Sprintf("≤ %s s", fmtNum(goalDetectS))
		if s := oursSummary(row); s.Runs > 0 && s.SelfHealed == s.Runs {
			ts = append(ts, Target{Name: name, Goal: goal, Verdict: NotApplicable,
				Measured: "nothing to detect: in every run LAN traffic came back without the daemon acting"})
			continue
		}
		le(name, goal, oursSummary(row).P95DetectS.f(), goalDetectS, fmtSeconds)
	}
	recoverGoal, goalText := goalRecoverBaseS, "≤ 10 s + fake connect (not measured: 10 s used)"
	if fc := float64(r.FakeConnectS); !math.IsNaN(fc) {
		recoverGoal = goalRecoverBaseS + fc
		goalText = fmt.Sprintf("≤ 10 s + %s s fake connect = %s s", fmtNum(fc), fmtNum(recoverGoal))
	}
	for _, row := range r.Scenarios {
		if referenceRow(r, row) {
			le("p95 recovery: "+Label(row.Name), goalText, oursSummary(row).P95RecoverS.f(), recoverGoal, fmtSeconds)
		}
	}
	leaks, measured := int64(0), false
	for _, row := range r.Scenarios {
		if row.Ours != nil && row.Ours.Summary.Runs > 0 {
			leaks += row.Ours.Summary.TotalLeaked
			measured = true
		}
	}
	le("leaked packets: latency scenarios (all runs)", "0", nanUnless(measured, float64(leaks)), 0, fmtCount)
	for _, l := range r.Leaks {
		if l.Variant == Ours && !l.Control {
			le("leaked packets: "+l.Name, "0", nanUnless(l.Error == "", float64(l.Packets)), 0, fmtCount)
		}
	}
	for _, s := range r.Soak {
		if s.Variant == Ours {
			name := fmt.Sprintf("false rotations: %d %% loss, %d ms jitter, %s", s.LossPct, s.JitterMS, fmtDuration(float64(s.DurationS)))
			le(name, "0", nanUnless(s.Error == "", float64(s.Rotations)), 0, fmtCount)
		}
	}
	fp := footprintOf(r, Ours)
	le("peak RSS (VmHWM)", "≤ 20 MB", nanUnless(fp != nil && fp.Error == "" && fp.PeakRSSKB > 0, kb(fp, func(f *Footprint) int64 { return f.PeakRSSKB })),
		goalPeakRSSKB, fmtKB)
	le("CPU, daemon + its children", "≤ 1 % of one core (36 s/h)", nanUnless(fp != nil && fp.Error == "", cpu(fp)), goalCPUSecPerH, fmtCPU)
	le("x86_64 ipk size", "≤ 6 MB", nanUnless(r.Sizes.IPKBytes > 0, float64(r.Sizes.IPKBytes)), goalIPKBytes, fmtBytes)
	return ts
}

func ratios(r *Result) []RatioRow {
	var rows []RatioRow
	add := func(figure string, ours, base float64) {
		row := RatioRow{Figure: figure, Ours: Num(ours), Baseline: Num(base), Ratio: Num(Ratio(ours, base))}
		switch {
		case math.IsNaN(ours) || math.IsNaN(base):
			row.Note = "not measured"
		case math.IsInf(ours, 1) || math.IsInf(base, 1):
			row.Note = "a run never got there"
		case base == 0 && ours == 0:
			row.Note = "both 0"
		case base == 0:
			row.Note = "baseline 0"
		}
		rows = append(rows, row)
	}
	for _, row := range r.Scenarios {
		if row.Ours == nil || row.Baseline == nil {
			continue
		}
		o, b := summaryOf(row.Ours), summaryOf(row.Baseline)
		l := rowLabel(row)
		add(l+": p50 detection (s)", o.P50DetectS.f(), b.P50DetectS.f())
		add(l+": p95 detection (s)", o.P95DetectS.f(), b.P95DetectS.f())
		add(l+": p50 recovery (s)", o.P50RecoverS.f(), b.P50RecoverS.f())
		add(l+": p95 recovery (s)", o.P95RecoverS.f(), b.P95RecoverS.f())
		add(l+": dead nodes tried (mean)", nanUnless(o.Runs > 0, o.MeanDeadNodes), nanUnless(b.Runs > 0, b.MeanDeadNodes))
		add(l+": leaked packets (all runs)", nanUnless(o.Runs > 0, float64(o.TotalLeaked)), nanUnless(b.Runs > 0, float64(b.TotalLeaked)))
	}
	if d := r.DeadNodes; d != nil && d.WithData != nil && d.WithoutData != nil {
		w, wo := d.WithData.Summary, d.WithoutData.Summary
		add("dead nodes tried (mean): with urltest data / without", nanUnless(w.Runs > 0, w.MeanDeadNodes), nanUnless(wo.Runs > 0, wo.MeanDeadNodes))
	}
	leakOf := func(name string, v Variant) float64 {
		for _, l := range r.Leaks {
			if l.Name == name && l.Variant == v && l.Error == "" {
				return float64(l.Packets)
			}
		}
		return math.NaN()
	}
	seen := map[string]bool{}
	for _, l := range r.Leaks {
		if !seen[l.Name] && !l.Control {
			seen[l.Name] = true
			add("leaked packets: "+l.Name, leakOf(l.Name, Ours), leakOf(l.Name, Baseline))
		}
	}
	soak := func(v Variant) float64 {
		for _, s := range r.Soak {
			if s.Variant == v && s.Error == "" {
				return float64(s.Rotations)
			}
		}
		return math.NaN()
	}
	add("false rotations", soak(Ours), soak(Baseline))
	fo, fb := footprintOf(r, Ours), footprintOf(r, Baseline)
	ok := func(f *Footprint) bool { return f != nil && f.Error == "" }
	add("RSS (MB)", nanUnless(ok(fo), kb(fo, func(f *Footprint) int64 { return f.RSSKB })/kbPerMiB),
		nanUnless(ok(fb), kb(fb, func(f *Footprint) int64 { return f.RSSKB })/kbPerMiB))
	add("peak RSS (MB)", nanUnless(ok(fo), kb(fo, func(f *Footprint) int64 { return f.PeakRSSKB })/kbPerMiB),
		nanUnless(ok(fb), kb(fb, func(f *Footprint) int64 { return f.PeakRSSKB })/kbPerMiB))
	add("CPU s/h, daemon + children", nanUnless(ok(fo), cpu(fo)), nanUnless(ok(fb), cpu(fb)))
	add("child processes per hour", nanUnless(ok(fo), field(fo, func(f *Footprint) float64 { return f.ChildrenPerHour })),
		nanUnless(ok(fb), field(fb, func(f *Footprint) float64 { return f.ChildrenPerHour })))
	return rows
}

// oursSummary is a row's summary for our parameters.
func oursSummary(row ScenarioRow) Summary { return summaryOf(row.Ours) }

// summaryOf is m's summary; NaN percentiles and zero runs when m is absent
// or has no runs (a failed measurement is not a zero).
func summaryOf(m *Measured) Summary {
	if m == nil || m.Summary.Runs == 0 {
		nan := Num(math.NaN())
		return Summary{P50DetectS: nan, P95DetectS: nan, P50RecoverS: nan, P95RecoverS: nan}
	}
	return m.Summary
}

func footprintOf(r *Result, v Variant) *Footprint {
	for i := range r.Footprint {
		if r.Footprint[i].Variant == v {
			return &r.Footprint[i]
		}
	}
	return nil
}

func kb(f *Footprint, get func(*Footprint) int64) float64 {
	if f == nil {
		return math.NaN()
	}
	return float64(get(f))
}

func field(f *Footprint, get func(*Footprint) float64) float64 {
	if f == nil {
		return math.NaN()
	}
	return get(f)
}

func cpu(f *Footprint) float64 {
	if f == nil {
		return math.NaN()
	}
	return f.CPUSecPerHour + f.ChildCPUSecPerHour
}

func nanUnless(ok bool, v float64) float64 {
	if !ok {
		return math.NaN()
	}
	return v
}

func (n Num) f() float64 { return float64(n) }
