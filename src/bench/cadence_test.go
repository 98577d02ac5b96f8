package bench

import (
	"math"
	"testing"
	"time"
)

func TestCadenceReading(t *testing.T) {
	nan := math.NaN()
	cs := []int{5, 30, 180}
	for _, c := range []struct {
		vals []float64
		want string
	}{
		{[]float64{1.9, 2.1, 2.0}, "≤ 3 s at every cadence measured"},
		{[]float64{1.9, 29.9, 170}, "fast only at 5 s: rests on urltest"},
		{[]float64{1.9, 2.5, 170}, "fast only at 5 s, 30 s: rests on urltest"},
		{[]float64{4.9, 5.1, 5.0}, "over 3 s at every cadence measured"},
		{[]float64{4.9, 29.9, 170}, "over 3 s at every cadence measured, and grows with the cadence (4.9 s at 5 s, 170.0 s at 180 s): rests on urltest"},
		{[]float64{4.9, 2.0, 2.0}, "≤ 3 s at 30 s, 180 s, over it at 5 s"},
		{[]float64{1.9, nan, nan}, "≤ 3 s, measured at 5 s only"},
		{[]float64{nan, nan, nan}, "not measured"},
		{[]float64{3, 3.01, nan}, "fast only at 5 s: rests on urltest"}, // the limit is inclusive
		{[]float64{1, math.Inf(1), nan}, "fast only at 5 s: rests on urltest"},
	} {
		if got := cadenceReading(cs, c.vals, 3); got != c.want {
			t.Errorf("cadenceReading(%v) = %q, want %q", c.vals, got, c.want)
		}
	}
}

func TestSignalOf(t *testing.T) {
	for outcome, want := range map[string]string{
		"rotated Dallas -> Miami; detected by: CONN_FAIL: 3 LAN connections to 2 destinations failed": "CONN_FAIL",
		"Dallas down after 15s idle; detected by: IDLE_PROBE: no answer; rotated to Miami":            "IDLE_PROBE",
		"rotated Dallas -> Miami; detected by: check failed":                                          "check failed",
		"rotated Dallas -> Miami": "",
	} {
		if got := signalOf(outcome); got != want {
			t.Errorf("signalOf(%q) = %q, want %q", outcome, got, want)
		}
	}
}

// Issue 19's targets: ≤ 3 s at every cadence (inclusive), the idle one
// from the probe interval ours runs with, recovery from the row's own
// detection; a miss that the cadences explain carries that cause.
func TestCadenceTargetBoundaries(t *testing.T) {
	r := &Result{
		FakeConnectS: 0.5,
		Ours:         Params{Variant: Ours, Sets: []string{"surflare.main.idle_probe_interval=20"}},
		Scenarios: []ScenarioRow{
			{Name: ScenarioNodeDown, CadenceS: 5, Ours: measured(Run{DetectS: fp(3), RecoverS: fp(6.5)})},
			{Name: ScenarioNodeDown, CadenceS: 30, Ours: measured(Run{DetectS: fp(3.01), RecoverS: fp(6.52)})},
			{Name: ScenarioIdleNodeDown, CadenceS: 180, Ours: measured(Run{DetectS: fp(22), RecoverS: nil})},
		},
		Footprint: []Footprint{{Variant: Ours, PeakRSSKB: 12 * 1024, CPUSecPerHour: 6, ChildCPUSecPerHour: 0.5}},
	}
	Judge(r)
	got := map[string]Target{}
	for _, tg := range r.CadenceTargets {
		got[tg.Name] = tg
	}
	for name, want := range map[string]Verdict{
		"p95 detection: node down @ 5 s urltest":                Met,
		"p95 recovery: node down @ 5 s urltest":                 Met, // 3 + 3 + 0.5
		"p95 detection: node down @ 30 s urltest":               Missed,
		"p95 recovery: node down @ 30 s urltest":                Missed, // 6.52 > 3.01 + 3.5
		"p95 detection: node down, idle tunnel @ 180 s urltest": Met,    // 20 + 2
		"p95 recovery: node down, idle tunnel @ 180 s urltest":  Missed,
		"p95 detection: 503 storm, every urltest cadence":       NotMeasured,
		"peak RSS (VmHWM)":                                      Met,
		"CPU, idle healthy (daemon + children)":                 Missed, // 6.5 > 6.4
	} {
		if got[name].Verdict != want {
			t.Errorf("%s: %q, want %q (all: %+v)", name, got[name].Verdict, want, r.CadenceTargets)
		}
	}
	if c := got["p95 detection: node down @ 30 s urltest"].Cause; c == "" {
		t.Error("a miss at 30 s that is fast at 5 s carries no cause")
	}
	if c := got["p95 recovery: node down, idle tunnel @ 180 s urltest"].Cause; c == "" {
		t.Error("a run that never recovered carries no cause")
	}
}

func TestWithTriggerNamesTheFirstDetectorAfterTheFault(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 9, 0, 10, 0, time.UTC)
	log := `time=2026-12-01T09:00:05.000Z level=INFO msg="Check requested by a detector" reason="NODE_LOG: before the fault"
time=2026-12-01T09:00:11.250Z level=INFO msg="VPN healthy"
time=2026-12-01T09:00:11.500Z level=INFO msg="Check requested by a detector" reason="CONN_FAIL: 3 LAN connections to 2 destinations failed via Dallas in 10s (refused)"
time=2026-12-01T09:00:12.000Z level=INFO msg="Check requested by a detector" reason="IDLE_PROBE: no answer"`
	if got, want := withTrigger(log, t0, "check PROXY_BROKEN"), "CONN_FAIL → check PROXY_BROKEN"; got != want {
		t.Errorf("withTrigger = %q, want %q", got, want)
	}
	if got := withTrigger("", t0, "check PROXY_BROKEN"); got != "check PROXY_BROKEN" {
		t.Errorf("withTrigger on an empty log = %q, want the reason alone", got)
	}
	if got := signalOf("rotated; " + detectedByPrefix + "CONN_FAIL → check PROXY_BROKEN; more"); got != "CONN_FAIL → check PROXY_BROKEN" {
		t.Errorf("signalOf = %q", got)
	}
}

func TestLogAfterDigestsOnlyLinesAfterTheFault(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 9, 0, 10, 0, time.UTC)
	log := `time=2026-12-01T09:00:05.000Z level=INFO msg="VPN healthy"
time=2026-12-01T09:00:20.000Z level=INFO msg="Check requested by a detector" reason="NODE_LOG: x"
time=2026-12-01T09:00:30.000Z level=INFO msg="VPN healthy"`
	if got, want := logAfter(log, t0, 1), `2 lines: Check requested by a detector (NODE_LOG: x)`; got != want {
		t.Errorf("logAfter = %q, want %q", got, want)
	}
	if got := logAfter(log, t0.Add(time.Hour), 3); got != "no lines" {
		t.Errorf("logAfter past the log = %q, want no lines", got)
	}
}

// A slow long cadence is blamed on urltest only when its runs do not rule
// urltest out: seen by the idle probe, the cadence does not explain it.
func TestCauseBlamesURLTestOnlyWhereItCould(t *testing.T) {
	row := func(name string, c int, det float64, outcome string) ScenarioRow {
		return ScenarioRow{Name: name, CadenceS: c, Ours: measured(Run{DetectS: fp(det), RecoverS: fp(det + 1), Outcome: outcome})}
	}
	r := &Result{FakeConnectS: 0.1, Scenarios: []ScenarioRow{
		row(ScenarioIdleNodeDown, 5, 3, "detected by: LOG_HEALTH_FAST → connect"),
		row(ScenarioIdleNodeDown, 180, 15, "detected by: IDLE_PROBE → check PROXY_BROKEN"),
		row(ScenarioNodeDown, 5, 2, "detected by: NODE_LOG: x"),
		row(ScenarioNodeDown, 180, 170, "detected by: LOG_HEALTH_FAST → connect"),
	}}
	Judge(r)
	got := map[string]Target{}
	for _, tg := range r.CadenceTargets {
		got[tg.Name] = tg
	}
	if tg := got["p95 detection: node down, idle tunnel @ 180 s urltest"]; tg.Verdict != Missed || tg.Cause != "" {
		t.Errorf("idle miss seen by the idle probe: %+v, want MISSED without a urltest cause", tg)
	}
	if tg := got["p95 detection: node down @ 180 s urltest"]; tg.Verdict != Missed || tg.Cause != "fast only at 5 s: rests on urltest" {
		t.Errorf("node down miss seen by log health: %+v, want MISSED resting on urltest", tg)
	}
}
