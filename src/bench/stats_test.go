package bench

import (
	"math"
	"testing"
)

func fp(v float64) *float64 { return &v }

func samples(vs ...float64) []*float64 {
	out := make([]*float64, len(vs))
	for i, v := range vs {
		if math.IsInf(v, 1) {
			continue // nil: never got there
		}
		out[i] = fp(v)
	}
	return out
}

func TestPercentileNearestRank(t *testing.T) {
	ten := samples(9, 1, 8, 2, 7, 3, 6, 4, 5, 10) // unsorted on purpose
	cases := []struct {
		name string
		xs   []*float64
		p    float64
		want float64
	}{
		{"p50 of 10 is the 5th smallest", ten, 50, 5},
		{"p95 of 10 is the worst run", ten, 95, 10},
		{"p90 of 10 is the 9th", ten, 90, 9},
		{"p100 is the max", ten, 100, 10},
		{"tiny p is the min", ten, 0.1, 1},
		{"single sample", samples(3.5), 95, 3.5},
		{"p50 of 2 is the smaller", samples(4, 2), 50, 2},
		{"p95 of 3", samples(1, 2, 3), 95, 3},
		{"a run that never recovered dominates p95", samples(1, 2, math.Inf(1)), 95, math.Inf(1)},
		{"but not p50", samples(1, 2, math.Inf(1)), 50, 2},
	}
	for _, c := range cases {
		got := Percentile(c.xs, c.p)
		if got != c.want {
			t.Errorf("%s: Percentile(p=%v) = %v, want %v", c.name, c.p, got, c.want)
		}
	}
	for _, bad := range []struct {
		xs []*float64
		p  float64
	}{{nil, 50}, {ten, 0}, {ten, 101}, {ten, math.NaN()}} {
		if got := Percentile(bad.xs, bad.p); !math.IsNaN(got) {
			t.Errorf("Percentile(%d samples, p=%v) = %v, want NaN", len(bad.xs), bad.p, got)
		}
	}
}

func TestSummarize(t *testing.T) {
	runs := []Run{
		{DetectS: fp(1), RecoverS: fp(4), DeadNodesTried: 0, LeakedPackets: 0},
		{DetectS: fp(2), RecoverS: nil, DeadNodesTried: 2, LeakedPackets: 3},
		{DetectS: nil, RecoverS: fp(6), NodesTried: []string{"Chicago"}, DeadNodesTried: 1, LeakedPackets: 1},
	}
	s := Summarize(runs)
	if s.Runs != 3 || s.Detected != 2 || s.Recovered != 2 {
		t.Errorf("counts: runs %d detected %d recovered %d, want 3 2 2", s.Runs, s.Detected, s.Recovered)
	}
	if s.P50DetectS != 2 || !math.IsInf(float64(s.P95DetectS), 1) {
		t.Errorf("detect p50/p95 = %v/%v, want 2/+Inf", s.P50DetectS, s.P95DetectS)
	}
	if s.P50RecoverS != 6 || !math.IsInf(float64(s.P95RecoverS), 1) {
		t.Errorf("recover p50/p95 = %v/%v, want 6/+Inf", s.P50RecoverS, s.P95RecoverS)
	}
	if s.MeanDeadNodes != 1 || s.MaxDeadNodes != 2 || s.MaxLeaked != 3 || s.TotalLeaked != 4 {
		t.Errorf("dead mean %v max %d, leaked max %d total %d; want 1 2 3 4", s.MeanDeadNodes, s.MaxDeadNodes, s.MaxLeaked, s.TotalLeaked)
	}
	if s.SelfHealed != 0 || s.Failed != 0 {
		t.Errorf("self-healed %d failed %d, want 0 0", s.SelfHealed, s.Failed)
	}
	z := Summarize(nil)
	if z.Runs != 0 || !math.IsNaN(float64(z.P50DetectS)) {
		t.Errorf("no runs: %+v, want zero runs and NaN percentiles", z)
	}
}

func TestRatio(t *testing.T) {
	if got := Ratio(2, 8); got != 0.25 {
		t.Errorf("Ratio(2, 8) = %v, want 0.25", got)
	}
	for _, c := range [][2]float64{{0, 0}, {1, 0}, {math.NaN(), 1}, {1, math.NaN()}, {math.Inf(1), 2}, {2, math.Inf(1)}} {
		if got := Ratio(c[0], c[1]); !math.IsNaN(got) {
			t.Errorf("Ratio(%v, %v) = %v, want NaN (meaningless)", c[0], c[1], got)
		}
	}
}

func TestNumJSON(t *testing.T) {
	for _, c := range []struct {
		n    Num
		want string
	}{{Num(math.NaN()), "null"}, {Num(math.Inf(1)), "null"}, {1.23456, "1.235"}, {0, "0"}, {42, "42"}} {
		b, err := c.n.MarshalJSON()
		if err != nil || string(b) != c.want {
			t.Errorf("Num(%v) JSON = %s, %v; want %s", float64(c.n), b, err, c.want)
		}
	}
	var n Num
	if err := n.UnmarshalJSON([]byte("null")); err != nil || !math.IsNaN(float64(n)) {
		t.Errorf("null -> %v, %v; want NaN", n, err)
	}
}

// TestSummarizeSelfHealedAndFailed: a run where the daemon did nothing and
// traffic came back has no detection time (not "never"); a run the lab
// could not carry out counts in no figure.
func TestSummarizeSelfHealedAndFailed(t *testing.T) {
	s := Summarize([]Run{
		{DetectS: nil, RecoverS: fp(2.1)}, // relay failover inside the proxy
		{DetectS: fp(3), RecoverS: fp(9), NodesTried: []string{"Chicago"}},
		{DetectS: nil, RecoverS: nil, Error: "lab up: boom"}, // not carried out
	})
	if s.Runs != 2 || s.Failed != 1 || s.SelfHealed != 1 {
		t.Fatalf("runs %d failed %d self-healed %d, want 2 1 1", s.Runs, s.Failed, s.SelfHealed)
	}
	if s.P95DetectS != 3 || s.P50DetectS != 3 {
		t.Errorf("detect p50/p95 %v/%v, want 3/3 (self-healed run left out)", s.P50DetectS, s.P95DetectS)
	}
	if s.P50RecoverS != 2.1 || s.P95RecoverS != 9 || s.Recovered != 2 {
		t.Errorf("recover p50/p95 %v/%v recovered %d, want 2.1/9 and 2", s.P50RecoverS, s.P95RecoverS, s.Recovered)
	}
	allHealed := Summarize([]Run{{RecoverS: fp(2)}, {RecoverS: fp(2.2)}})
	r := &Result{Scenarios: []ScenarioRow{{Name: ScenarioRelayBlackhole, Ours: &Measured{Runs: []Run{{RecoverS: fp(2)}}, Summary: allHealed}}}}
	Judge(r)
	if r.Targets[0].Name != "p95 detection: relay black-hole" || r.Targets[0].Verdict != NotApplicable {
		t.Errorf("all runs self-healed: %+v, want the detection target N/A", r.Targets[0])
	}
}
