package bench

import (
	"encoding/json"
	"math"
	"strconv"
	"time"
)

// Num is a measured figure (seconds, packets, a ratio). NaN (not
// measured) and +Inf (a run that never got there) are written to JSON as
// null, which JSON cannot otherwise carry.
type Num float64

// MarshalJSON writes null for NaN and ±Inf, else the number.
func (s Num) MarshalJSON() ([]byte, error) {
	f := float64(s)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, math.Round(f*1000)/1000, 'f', -1, 64), nil
}

// UnmarshalJSON reads null as NaN.
func (s *Num) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*s = Num(math.NaN())
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*s = Num(f)
	return nil
}

// Run is one scenario run as the lab's scenario runner reports it
// (`surflare-lab scenario NAME --json`, field names fixed by that format).
type Run struct {
	DetectS        *float64 `json:"detect_s"`
	RecoverS       *float64 `json:"recover_s"`
	NodesTried     []string `json:"nodes_tried"`
	DeadNodesTried int      `json:"dead_nodes_tried"`
	LeakedPackets  int64    `json:"leaked_packets"`
	// Outcome says what the daemon did; Error why the run could not be
	// carried out (then it counts in no figure).
	Outcome string `json:"outcome,omitempty"`
	Error   string `json:"error,omitempty"`
}

// ScenarioOutput is the runner's whole answer for one scenario.
type ScenarioOutput struct {
	Scenario string          `json:"scenario"`
	Runs     []Run           `json:"runs"`
	Summary  json.RawMessage `json:"summary,omitempty"`
}

// Variant names a parameter set.
type Variant string

// The two parameter sets every figure is measured with.
const (
	Ours     Variant = "ours"
	Baseline Variant = "baseline"
)

// Params is a parameter set: the config overrides that make it.
type Params struct {
	Variant Variant  `json:"variant"`
	Sets    []string `json:"sets"`
	// Notes say what could not be expressed as a config override.
	Notes []string `json:"notes,omitempty"`
}

// Measured is one scenario measured with one parameter set. Error says why
// it was not (or only partly) measured.
type Measured struct {
	Runs    []Run   `json:"runs"`
	Summary Summary `json:"summary"`
	Error   string  `json:"error,omitempty"`
}

// ScenarioRow is a latency scenario at one urltest cadence, ours and
// baseline. Baseline is nil when the baseline was not run for it (quick
// mode). CadenceS is the fake proxy's urltest interval the row ran at
// (0: not known, a result from before cadences were recorded).
type ScenarioRow struct {
	Name     string    `json:"name"`
	CadenceS int       `json:"urltest_interval_s,omitempty"`
	Ours     *Measured `json:"ours"`
	Baseline *Measured `json:"baseline,omitempty"`
}

// DeadNodes compares the dead nodes tried with and without log-health
// (urltest) data.
type DeadNodes struct {
	Scenario    string    `json:"scenario"`
	Description string    `json:"description"`
	WithData    *Measured `json:"with_urltest_data"`
	WithoutData *Measured `json:"without_urltest_data"`
}

// LeakCheck is a leak count outside the latency scenarios (restart, boot).
type LeakCheck struct {
	Name    string  `json:"name"`
	Variant Variant `json:"variant"`
	Packets int64   `json:"leaked_packets"`
	Detail  string  `json:"detail,omitempty"`
	Error   string  `json:"error,omitempty"`
	// Control marks a check made to fail on purpose (proof that the
	// counter sees leaks); it has no target.
	Control bool `json:"control,omitempty"`
}

// Soak is the false-rotation run on a lossy-but-working path.
type Soak struct {
	Variant     Variant `json:"variant"`
	DurationS   Num     `json:"duration_s"`
	LossPct     int     `json:"loss_pct"`
	JitterMS    int     `json:"jitter_ms"`
	Rotations   int     `json:"rotations"`
	Reconnects  int     `json:"connect_attempts"`
	Checks      int     `json:"checks"`
	FailedCheck int     `json:"failed_checks"`
	Leaked      int64   `json:"leaked_packets"`
	ClientOK    int     `json:"client_requests_ok"`
	ClientFail  int     `json:"client_requests_failed"`
	// Bulk says what the bulk workload on every LAN client was; BulkOK and
	// BulkFail count its requests.
	Bulk     string `json:"bulk,omitempty"`
	BulkOK   int    `json:"bulk_requests_ok"`
	BulkFail int    `json:"bulk_requests_failed"`
	Error    string `json:"error,omitempty"`
}

// Footprint is the daemon's resource use in steady state.
type Footprint struct {
	Variant   Variant `json:"variant"`
	WindowS   Num     `json:"window_s"`
	RSSKB     int64   `json:"rss_kb"`
	PeakRSSKB int64   `json:"peak_rss_kb"` // VmHWM: the most it ever held
	// ProbeURL is the 503 probe's URL in the window ("" when it is off).
	ProbeURL string `json:"probe_url,omitempty"`
	// CPU seconds per hour: the daemon's own, and of the children it
	// reaped (vendor CLI calls) — cutime/cstime.
	CPUSecPerHour      float64 `json:"cpu_s_per_hour"`
	ChildCPUSecPerHour float64 `json:"child_cpu_s_per_hour"`
	// Processes the daemon started per hour: direct children, and every
	// descendant (children's children too).
	ChildrenPerHour    float64 `json:"children_per_hour"`
	DescendantsPerHour float64 `json:"descendants_per_hour"`
	ChildMethod        string  `json:"child_method"`
	Error              string  `json:"error,omitempty"`
}

// Sizes are the shipped artefacts' sizes.
type Sizes struct {
	BinaryPath  string `json:"binary_path,omitempty"`
	BinaryBytes int64  `json:"binary_bytes"`
	IPKPath     string `json:"ipk_path,omitempty"`
	IPKBytes    int64  `json:"ipk_bytes"`
	Error       string `json:"error,omitempty"`
}

// Machine says where the benchmark ran.
type Machine struct {
	Hostname  string `json:"hostname"`
	Kernel    string `json:"kernel"`
	CPU       string `json:"cpu"`
	Cores     int    `json:"cores"`
	MemoryMB  int64  `json:"memory_mb"`
	GoVersion string `json:"go_version"`
	Commit    string `json:"commit,omitempty"`
}

// Verdict is a target's outcome.
type Verdict string

// Verdicts, as printed.
const (
	Met         Verdict = "MET"
	Missed      Verdict = "MISSED"
	NotMeasured Verdict = "NOT MEASURED"
	// NotApplicable: nothing to judge — e.g. no run needed a detection.
	NotApplicable Verdict = "N/A"
)

// Target is one of the benchmark's targets (bench/README.md), judged.
type Target struct {
	Name     string  `json:"name"`
	Goal     string  `json:"goal"`
	Measured string  `json:"measured"`
	Verdict  Verdict `json:"verdict"`
	// Cause says why a MISSED target missed, where the measurements
	// show it.
	Cause string `json:"cause,omitempty"`
}

// RatioRow is one figure, ours against the baseline.
type RatioRow struct {
	Figure   string `json:"figure"`
	Ours     Num    `json:"ours"`
	Baseline Num    `json:"baseline"`
	// Ratio is ours/baseline; NaN (null) when it means nothing, Note says
	// why.
	Ratio Num    `json:"ratio"`
	Note  string `json:"note,omitempty"`
}

// Result is everything one benchmark invocation measured.
type Result struct {
	Date     time.Time `json:"date"`
	Machine  Machine   `json:"machine"`
	Quick    bool      `json:"quick"`
	ElapsedS Num       `json:"elapsed_s"`
	// Parallel is how many labs ran at once.
	Parallel int `json:"parallel"`
	// Vendor are the fake vendor client's knobs in every lab (the urltest
	// cadence among them).
	Vendor []string `json:"vendor,omitempty"`

	Ours     Params `json:"ours"`
	Baseline Params `json:"baseline"`

	// FakeConnectS is how long the lab's fake `surflare connect` takes
	// (median): the recovery target allows 10 s plus this.
	FakeConnectS Num `json:"fake_connect_s"`

	Scenarios []ScenarioRow `json:"scenarios"`
	DeadNodes *DeadNodes    `json:"dead_nodes,omitempty"`
	Leaks     []LeakCheck   `json:"leaks"`
	Soak      []Soak        `json:"false_rotations"`
	Footprint []Footprint   `json:"footprint"`
	Chaos     []Chaos       `json:"chaos,omitempty"`
	Sizes     Sizes         `json:"sizes"`

	Targets []Target `json:"targets"`
	// CadenceTargets are issue 19's targets, judged at every urltest
	// cadence.
	CadenceTargets []Target   `json:"cadence_targets"`
	Ratios         []RatioRow `json:"ratios"`
	// Missing lists what was not measured, and why.
	Missing []string `json:"missing,omitempty"`
}
