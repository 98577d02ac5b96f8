package lab

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
)

// Scenarios: a fault is injected into a lab running the daemon, and what a
// household would notice is measured — how long until the daemon noticed,
// how long until a LAN client's traffic worked again, which nodes it tried
// and how many packets got out past the kill switch meanwhile. The result
// types below are the stable JSON the benchmark reads
// (`surflare-lab scenario NAME --json`); field names do not change.

// ScenarioRun is one run of a scenario: one fault, one recovery.
type ScenarioRun struct {
	// DetectS is the time from the injection (the FaultLog timestamp) to the
	// daemon's first state change away from healthy; nil if it never left
	// healthy within the run.
	DetectS *float64 `json:"detect_s"`
	// RecoverS is the time from the injection to the first LAN client
	// request that succeeded through a live exit node; nil if none did.
	RecoverS *float64 `json:"recover_s"`
	// NodesTried lists the nodes the daemon connected to after the
	// injection, in order (the node it was on is not repeated unless it
	// reconnected to it).
	NodesTried []string `json:"nodes_tried"`
	// DeadNodesTried counts the entries of NodesTried that were dead (down
	// or black-holed by the scenario) when the daemon tried them.
	DeadNodesTried int `json:"dead_nodes_tried"`
	// LeakedPackets is the lab's leak counter total over the run (from the
	// moment the daemon was healthy until the end of the run).
	LeakedPackets uint64 `json:"leaked_packets"`

	// Recovered says whether the run reached the scenario's expected good
	// end: traffic back through a live node, or — where the scenario cannot
	// bring traffic back (rate-limited or lapsed account) — the kill switch
	// held without a login storm.
	Recovered bool `json:"recovered"`
	// Outcome says in words what the daemon did.
	Outcome string `json:"outcome"`
	// States are the daemon's states after the injection, in order.
	States []string `json:"states"`
	// FinalState is the daemon's state at the end of the run.
	FinalState string `json:"final_state"`
	// LoginAttempts counts logins the daemon made after the injection.
	LoginAttempts int `json:"login_attempts"`
	// Leaks breaks LeakedPackets down by kind.
	Leaks string `json:"leaks"`
	// Extra holds figures only some scenarios have (proxy-loop: peak
	// in-flight, peak fds, fd limit, circuit open/close times).
	Extra map[string]any `json:"extra,omitempty"`
	// Error is set when the run could not be carried out (lab or daemon
	// did not come up); the other fields are then partial.
	Error string `json:"error,omitempty"`
}

// ScenarioSummary aggregates the runs of a scenario. Percentiles are over
// the runs that have the figure (nil when none does).
type ScenarioSummary struct {
	P50DetectS       *float64 `json:"p50_detect_s"`
	P95DetectS       *float64 `json:"p95_detect_s"`
	P50RecoverS      *float64 `json:"p50_recover_s"`
	P95RecoverS      *float64 `json:"p95_recover_s"`
	MaxLeakedPackets uint64   `json:"max_leaked_packets"`
	RecoveredRuns    int      `json:"recovered_runs"`
}

// ScenarioResult is the whole answer of `surflare-lab scenario NAME --json`.
type ScenarioResult struct {
	Scenario string          `json:"scenario"`
	Runs     []ScenarioRun   `json:"runs"`
	Summary  ScenarioSummary `json:"summary"`
}

// Summarize fills r.Summary from r.Runs.
func (r *ScenarioResult) Summarize() {
	var det, rec []float64
	s := ScenarioSummary{}
	for _, run := range r.Runs {
		if run.DetectS != nil {
			det = append(det, *run.DetectS)
		}
		if run.RecoverS != nil {
			rec = append(rec, *run.RecoverS)
		}
		s.MaxLeakedPackets = max(s.MaxLeakedPackets, run.LeakedPackets)
		if run.Recovered {
			s.RecoveredRuns++
		}
	}
	s.P50DetectS, s.P95DetectS = percentile(det, 50), percentile(det, 95)
	s.P50RecoverS, s.P95RecoverS = percentile(rec, 50), percentile(rec, 95)
	r.Summary = s
}

// percentile is the nearest-rank percentile of xs (nil for none).
func percentile(xs []float64, p float64) *float64 {
	if len(xs) == 0 {
		return nil
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	rank = min(max(rank, 1), len(s))
	return seconds3(s[rank-1])
}

// seconds3 rounds to milliseconds, as every figure in the JSON is.
func seconds3(x float64) *float64 {
	v := math.Round(x*1000) / 1000
	return &v
}

// WriteJSON writes r as one indented JSON object.
func (r ScenarioResult) WriteJSON(w io.Writer) error {
	if r.Runs == nil {
		r.Runs = []ScenarioRun{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes r for people: one line per run, then the summary.
func (r ScenarioResult) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "scenario %s\n", r.Scenario)
	fmt.Fprintf(tw, "run\tdetect\trecover\tok\tleaks\tnodes tried\tdead\tlogins\tstates\toutcome\n")
	for i, run := range r.Runs {
		nodes := strings.Join(run.NodesTried, " > ")
		if nodes == "" {
			nodes = "-"
		}
		states := strings.Join(run.States, ">")
		if states == "" {
			states = "-"
		}
		out := run.Outcome
		if run.Error != "" {
			out = "ERROR: " + run.Error
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%d\t%d\t%s\t%s\n", i+1, fmtSecs(run.DetectS), fmtSecs(run.RecoverS),
			yesNo(run.Recovered), run.LeakedPackets, nodes, run.DeadNodesTried, run.LoginAttempts, states, out)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for i, run := range r.Runs {
		if len(run.Extra) == 0 {
			continue
		}
		keys := make([]string, 0, len(run.Extra))
		for k := range run.Extra {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s=%v", k, fmtExtra(run.Extra[k])))
		}
		fmt.Fprintf(w, "run %d: %s\n", i+1, strings.Join(parts, " "))
	}
	s := r.Summary
	_, err := fmt.Fprintf(w, "summary: detect p50 %s p95 %s, recover p50 %s p95 %s, max leaked %d, recovered %d/%d\n",
		fmtSecs(s.P50DetectS), fmtSecs(s.P95DetectS), fmtSecs(s.P50RecoverS), fmtSecs(s.P95RecoverS),
		s.MaxLeakedPackets, s.RecoveredRuns, len(r.Runs))
	return err
}

func fmtSecs(x *float64) string {
	if x == nil {
		return "-"
	}
	return fmt.Sprintf("%.2fs", *x)
}

func fmtExtra(v any) string {
	switch x := v.(type) {
	case *float64:
		return fmtSecs(x)
	case float64:
		return fmt.Sprintf("%.3f", x)
	}
	return fmt.Sprint(v)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
