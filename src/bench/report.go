package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// WriteMarkdown renders the report (results.md, also printed at the end of
// a run). Call Judge first.
func WriteMarkdown(w io.Writer, r *Result) error {
	var b strings.Builder
	mode := "full"
	if r.Quick {
		mode = "quick"
	}
	fmt.Fprintf(&b, "# surflare-watchdog benchmark (%s)\n\n", mode)
	m := r.Machine
	fmt.Fprintf(&b, "- Date: %s, took %s\n", r.Date.UTC().Format("2006-01-02 15:04 MST"), fmtDuration(math.Round(float64(r.ElapsedS))))
	fmt.Fprintf(&b, "- Machine: %s — %s, %d cores, %d MB RAM, Linux %s, %s", m.Hostname, m.CPU, m.Cores, m.MemoryMB, m.Kernel, m.GoVersion)
	if m.Commit != "" {
		fmt.Fprintf(&b, ", commit %s", m.Commit)
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "- Ours (shipped defaults on the lab): %s\n", code(r.Ours.Sets))
	for _, n := range r.Ours.Notes {
		fmt.Fprintf(&b, "  - %s\n", n)
	}
	fmt.Fprintf(&b, "- Baseline (the seed's parameters): %s\n", code(r.Baseline.Sets))
	for _, n := range r.Baseline.Notes {
		fmt.Fprintf(&b, "  - %s\n", n)
	}
	if len(r.Vendor) > 0 {
		fmt.Fprintf(&b, "- Fake vendor client (lab knobs, `--vendor`): %s — the urltest cadence is the vendor's, unknown for the real client; figures that rest on urltest hold only at their cadence", code(r.Vendor))
		if cs := cadences(r); len(cs) > 0 {
			fmt.Fprintf(&b, " (the scenarios with an `urltest` column ran at each of %s s, the others at this one)", joinCadences(cs))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "- Fake connect time (median `surflare connect` in the lab): %s s\n", fmtSeconds(float64(r.FakeConnectS)))
	b.WriteString("- Percentiles are nearest-rank over the runs; a run that never detected or recovered counts as \"never\" (∞). " +
		"A self-healed run (the daemon never left healthy, tried no node, and LAN traffic came back: e.g. the proxy's own relay failover) has no detection time.\n")
	if r.Parallel > 1 {
		fmt.Fprintf(&b, "- Every measurement runs in its own fresh lab; up to %d labs ran at once on this machine.\n", r.Parallel)
	}
	b.WriteString("\n")

	b.WriteString("## Targets (our defaults)\n\n| target | goal | measured | verdict |\n|---|---|---|---|\n")
	for _, t := range r.Targets {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", cell(t.Name), cell(t.Goal), cell(t.Measured), t.Verdict)
	}
	if c := cadenceOf(r.Vendor); c > 0 && len(cadences(r)) > 0 {
		fmt.Fprintf(&b, "\nThe latency targets above judge the runs at the %d s urltest cadence (comparable with earlier runs); the targets below judge every cadence.\n", c)
	}
	if len(r.CadenceTargets) > 0 {
		b.WriteString("\n## Targets of issue 19 (our defaults, every urltest cadence)\n\n| target | goal | measured | verdict | cause |\n|---|---|---|---|---|\n")
		for _, t := range r.CadenceTargets {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", cell(t.Name), cell(t.Goal), cell(t.Measured), t.Verdict, cell(t.Cause))
		}
	}
	writeCadenceTable(&b, r)

	b.WriteString("\n## Detection and recovery (seconds after the fault)\n\n")
	b.WriteString("| scenario | urltest | params | runs | p50 detect | p95 detect | p50 recover | p95 recover | recovered | dead nodes tried (mean) | leaked packets |\n")
	b.WriteString("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, row := range r.Scenarios {
		label := Label(row.Name) + " | "
		if row.CadenceS > 0 {
			label += fmt.Sprintf("%d s", row.CadenceS)
		} else {
			label += "—"
		}
		writeScenarioLine(&b, label, Ours, row.Ours)
		if row.Baseline != nil {
			writeScenarioLine(&b, label, Baseline, row.Baseline)
		}
	}

	if d := r.DeadNodes; d != nil {
		b.WriteString("\n## Dead nodes tried before a healthy one\n\n")
		fmt.Fprintf(&b, "%s (scenario `%s`).\n\n", d.Description, d.Scenario)
		b.WriteString("| urltest / log-health data | runs | dead nodes tried (mean) | max | nodes tried (first run) |\n|---|---:|---:|---:|---|\n")
		writeDeadLine(&b, "available", d.WithData)
		writeDeadLine(&b, "not used (log health disabled)", d.WithoutData)
	}

	if len(r.Leaks) > 0 {
		b.WriteString("\n## Leaked packets outside the scenarios\n\n| check | params | leaked packets | detail |\n|---|---|---:|---|\n")
		for _, l := range r.Leaks {
			v := fmtCount(float64(l.Packets))
			if l.Error != "" {
				v = "—"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", cell(l.Name), l.Variant, v, cell(firstOf(l.Error, l.Detail)))
		}
	}

	if len(r.Soak) > 0 {
		b.WriteString("\n## False rotations on a lossy-but-working path\n\n")
		b.WriteString("| params | duration | loss | jitter | rotations | connect attempts | checks (failed) | LAN requests ok / failed | bulk requests ok / failed | leaked packets |\n")
		b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		bulk := ""
		for _, s := range r.Soak {
			if s.Error != "" {
				fmt.Fprintf(&b, "| %s | %s | %d %% | %d ms | — | — | — | — | — | — (%s) |\n", s.Variant, fmtDuration(float64(s.DurationS)), s.LossPct, s.JitterMS, cell(s.Error))
				continue
			}
			fmt.Fprintf(&b, "| %s | %s | %d %% | %d ms | %d | %d | %d (%d) | %d / %d | %d / %d | %d |\n", s.Variant, fmtDuration(float64(s.DurationS)),
				s.LossPct, s.JitterMS, s.Rotations, s.Reconnects, s.Checks, s.FailedCheck, s.ClientOK, s.ClientFail, s.BulkOK, s.BulkFail, s.Leaked)
			bulk = firstOf(bulk, s.Bulk)
		}
		if bulk != "" {
			fmt.Fprintf(&b, "\nBulk traffic: %s.\n", bulk)
		}
	}

	b.WriteString("\n## Footprint (steady state, healthy tunnel)\n\n")
	b.WriteString("| params | window | RSS | peak RSS (VmHWM) | CPU daemon | CPU children | children/h | descendants/h |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|\n")
	method := ""
	for _, f := range r.Footprint {
		if f.Error != "" {
			fmt.Fprintf(&b, "| %s | — | — | — | — | — | — | — (%s) |\n", f.Variant, cell(f.Error))
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %.1f s/h | %.1f s/h | %.0f | %.0f |\n", f.Variant, fmtDuration(float64(f.WindowS)),
			fmtKB(float64(f.RSSKB)), fmtKB(float64(f.PeakRSSKB)), f.CPUSecPerHour, f.ChildCPUSecPerHour, f.ChildrenPerHour, f.DescendantsPerHour)
		method = f.ChildMethod
	}
	if method != "" {
		fmt.Fprintf(&b, "\nChild processes counted by: %s.\n", method)
	}
	s := r.Sizes
	fmt.Fprintf(&b, "\nSizes: binary %s", fmtBytes(float64(s.BinaryBytes)))
	if s.BinaryPath != "" {
		fmt.Fprintf(&b, " (`%s`)", s.BinaryPath)
	}
	fmt.Fprintf(&b, ", x86_64 ipk %s", fmtBytes(float64(s.IPKBytes)))
	if s.IPKPath != "" {
		fmt.Fprintf(&b, " (`%s`)", s.IPKPath)
	}
	if s.Error != "" {
		fmt.Fprintf(&b, " — %s", s.Error)
	}
	b.WriteString(".\n")

	if len(r.Ratios) > 0 {
		b.WriteString("\n## Ours / baseline\n\n| figure | ours | baseline | ours / baseline |\n|---|---:|---:|---:|\n")
		for _, x := range r.Ratios {
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", cell(x.Figure), fmtNum(float64(x.Ours)), fmtNum(float64(x.Baseline)), fmtRatio(x))
		}
	}
	writeChaosMarkdown(&b, r)
	if len(r.Missing) > 0 {
		b.WriteString("\n## Not measured or incomplete\n\n")
		for _, m := range r.Missing {
			fmt.Fprintf(&b, "- %s\n", strings.ReplaceAll(m, "\n", " "))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeScenarioLine(b *strings.Builder, label string, v Variant, m *Measured) {
	if m == nil || m.Summary.Runs == 0 {
		why := "not run"
		if m != nil && m.Error != "" {
			why = m.Error
		}
		fmt.Fprintf(b, "| %s | %s | 0 | — | — | — | — | — | — | — (%s) |\n", label, v, cell(truncate(why, 120)))
		return
	}
	s := m.Summary
	runs := fmt.Sprint(s.Runs)
	if s.Failed > 0 {
		runs += fmt.Sprintf(" (+%d failed)", s.Failed)
	}
	p50, p95 := fmtSeconds(s.P50DetectS.f()), fmtSeconds(s.P95DetectS.f())
	if s.SelfHealed == s.Runs {
		p50, p95 = "n/a", "n/a"
	}
	if s.SelfHealed > 0 {
		runs += fmt.Sprintf(" (%d self-healed)", s.SelfHealed)
	}
	fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %d/%d | %s | %d |\n", label, v, runs,
		p50, p95, fmtSeconds(s.P50RecoverS.f()), fmtSeconds(s.P95RecoverS.f()),
		s.Recovered, s.Runs, fmtNum(s.MeanDeadNodes), s.TotalLeaked)
}

func writeDeadLine(b *strings.Builder, label string, m *Measured) {
	if m == nil || m.Summary.Runs == 0 {
		why := "not run"
		if m != nil && m.Error != "" {
			why = m.Error
		}
		fmt.Fprintf(b, "| %s | 0 | — | — | %s |\n", label, cell(truncate(why, 120)))
		return
	}
	s := m.Summary
	first := ""
	for _, r := range m.Runs {
		if r.Error == "" {
			first = strings.Join(r.NodesTried, " → ")
			break
		}
	}
	fmt.Fprintf(b, "| %s | %d | %s | %d | %s |\n", label, s.Runs, fmtNum(s.MeanDeadNodes), s.MaxDeadNodes, cell(first))
}

// WriteJSON writes results.json: the whole Result, indented.
func WriteJSON(w io.Writer, r *Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func firstOf(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// elapsed is a Num of seconds since start.
func elapsed(start time.Time) Num { return Num(time.Since(start).Seconds()) }

// Output file names under the output directory.
const (
	FileMarkdown = "results.md"
	FileJSON     = "results.json"
	FileSVG      = "latency.svg"
)

// WriteOutputs writes results.md, results.json and latency.svg into dir
// (created if needed).
func WriteOutputs(dir string, r *Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("output directory: %w", err)
	}
	for name, write := range map[string]func(io.Writer, *Result) error{
		FileMarkdown: WriteMarkdown, FileJSON: WriteJSON, FileSVG: WriteSVG,
	} {
		var b bytes.Buffer
		if err := write(&b, r); err != nil {
			return fmt.Errorf("rendering %s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
	}
	return nil
}
