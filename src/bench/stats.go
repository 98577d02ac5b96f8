package bench

import (
	"math"
	"slices"
)

// Percentile is the nearest-rank percentile p (0 < p <= 100) of xs: the
// smallest value with at least p % of the samples at or below it. Nearest
// rank never invents a value that was not measured, and with the small run
// counts of a benchmark it is the conservative choice (p95 of 10 runs is the
// worst run). A missing sample (a run that never detected or recovered)
// counts as +Inf: it is worse than any measured one. It returns NaN for no
// samples or p outside (0, 100].
func Percentile(xs []*float64, p float64) float64 {
	if len(xs) == 0 || !(p > 0 && p <= 100) {
		return math.NaN()
	}
	vals := make([]float64, len(xs))
	for i, x := range xs {
		if x == nil {
			vals[i] = math.Inf(1)
		} else {
			vals[i] = *x
		}
	}
	slices.Sort(vals)
	rank := int(math.Ceil(p / 100 * float64(len(vals))))
	if rank < 1 {
		rank = 1
	}
	return vals[rank-1]
}

// Summary condenses one scenario's runs for one parameter set. Runs that
// could not be carried out (lab or daemon did not come up: Run.Error) are
// counted in Failed and left out of every figure: they say nothing about
// the daemon's reaction to the fault.
type Summary struct {
	Runs   int `json:"runs"`
	Failed int `json:"failed_runs"`
	// SelfHealed runs needed no detection: the daemon never left healthy,
	// tried no node, and LAN traffic was fine again (e.g. the vendor
	// proxy's own relay failover). They are left out of the detection
	// percentiles — "never detected" would be wrong there — and kept in
	// the recovery ones.
	SelfHealed    int     `json:"self_healed_runs"`
	Detected      int     `json:"detected_runs"`
	Recovered     int     `json:"recovered_runs"`
	P50DetectS    Num     `json:"p50_detect_s"`
	P95DetectS    Num     `json:"p95_detect_s"`
	P50RecoverS   Num     `json:"p50_recover_s"`
	P95RecoverS   Num     `json:"p95_recover_s"`
	MeanDeadNodes float64 `json:"mean_dead_nodes_tried"`
	MaxDeadNodes  int     `json:"max_dead_nodes_tried"`
	MaxLeaked     int64   `json:"max_leaked_packets"`
	TotalLeaked   int64   `json:"total_leaked_packets"`
}

// Summarize computes a Summary from runs (nil-safe for zero runs).
func Summarize(runs []Run) Summary {
	var s Summary
	var det, rec []*float64
	dead := 0
	for _, r := range runs {
		if r.Error != "" {
			s.Failed++
			continue
		}
		s.Runs++
		if selfHealed(r) {
			s.SelfHealed++
		} else {
			det = append(det, r.DetectS)
		}
		rec = append(rec, r.RecoverS)
		if r.DetectS != nil {
			s.Detected++
		}
		if r.RecoverS != nil {
			s.Recovered++
		}
		dead += r.DeadNodesTried
		s.MaxDeadNodes = max(s.MaxDeadNodes, r.DeadNodesTried)
		s.MaxLeaked = max(s.MaxLeaked, r.LeakedPackets)
		s.TotalLeaked += r.LeakedPackets
	}
	s.P50DetectS = Num(Percentile(det, 50))
	s.P95DetectS = Num(Percentile(det, 95))
	s.P50RecoverS = Num(Percentile(rec, 50))
	s.P95RecoverS = Num(Percentile(rec, 95))
	if s.Runs > 0 {
		s.MeanDeadNodes = float64(dead) / float64(s.Runs)
	}
	return s
}

// selfHealed reports a run the daemon had nothing to do in (see
// Summary.SelfHealed).
func selfHealed(r Run) bool {
	return r.DetectS == nil && r.RecoverS != nil && len(r.NodesTried) == 0
}

// Ratio is ours/baseline, or NaN when it means nothing: a figure missing on
// either side, or a zero baseline (0/0 is "equal", x/0 is unbounded — the
// report spells those out instead of printing Inf).
func Ratio(ours, baseline float64) float64 {
	if math.IsNaN(ours) || math.IsNaN(baseline) || math.IsInf(ours, 0) || math.IsInf(baseline, 0) || baseline == 0 {
		return math.NaN()
	}
	return ours / baseline
}
