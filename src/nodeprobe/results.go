package nodeprobe

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"surflare-watchdog/src/detectors/loghealth"
	"surflare-watchdog/src/runfiles"
)

// ResultsPath is the results file of the daemon whose run dir is runDir.
func ResultsPath(runDir string) string { return filepath.Join(runDir, ResultsFile) }

// WriteResults writes rep to the results file (0600, atomic rename).
func WriteResults(runDir string, rep Report) error {
	if err := runfiles.WriteJSON(ResultsPath(runDir), rep); err != nil {
		return fmt.Errorf("writing probe results: %w", err)
	}
	return nil
}

// ReadResults reads a results file back.
func ReadResults(path string) (Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Report{}, fmt.Errorf("reading probe results: %w", err)
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return Report{}, fmt.Errorf("probe results %s: %w", path, err)
	}
	return rep, nil
}

// UrltestFrom is node's urltest verdict from a node health snapshot (as
// loghealth.LoadNodeHealth returns it, with its error).
func UrltestFrom(s *loghealth.Snapshot, loadErr error, node string) Urltest {
	u := Urltest{Healthy: true}
	switch {
	case s == nil || loadErr != nil:
		u.Source = "no node health file"
		if loadErr != nil {
			u.Source += ": " + loadErr.Error()
		}
		return u
	case s.Stale:
		u.Stale = true
		u.Source = "node health file is stale"
		return u
	}
	for _, p := range s.Nodes {
		if p.Node != node {
			continue
		}
		if u.Pairs == nil {
			u.Pairs = map[string]int{}
		}
		u.Pairs[p.Transit] = p.ErrorCount
		u.Errors += p.ErrorCount
		if !p.UrltestHealthy {
			u.Healthy = false
		}
	}
	return u
}

// Write prints the report as a table (WriteTable) or, asJSON, indented.
func (rep Report) Write(w io.Writer, asJSON bool) error {
	if !asJSON {
		return rep.WriteTable(w)
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// WriteTable prints the report as a table, one node a line.
func (rep Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tOK\tL4\tL7\tCOLD\tEXIT\tCOUNTRY\tSYN\tRST\tSACK\tSERVERS\tURLTEST\tTIME")
	for _, r := range rep.Nodes {
		ok := "yes"
		if !r.OK {
			ok = "NO"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%.1fs\n",
			r.Node, ok, fmtMS(r.L4RTTMS), fmtMS(r.L7TTFBMS), fmtMS(r.ColdTTFBMS), orDash(r.ExitIP), orDash(r.ExitCountry),
			fmtRatio(r.SynRatio), r.RSTInjected, fmtPct(r.SACKRate), orDash(strings.Join(r.ServerIPs, ",")), r.Urltest.short(),
			float64(r.DurationMS)/1000)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var failed []string
	for _, r := range rep.Nodes {
		if !r.OK {
			failed = append(failed, r.Node+": "+r.Error)
		}
	}
	sort.Strings(failed)
	for _, f := range failed {
		fmt.Fprintln(w, "  "+f)
	}
	return nil
}

func (u *Urltest) short() string {
	switch {
	case u == nil || u.Source != "":
		return "-"
	case !u.Healthy:
		return fmt.Sprintf("dead (%d)", u.Errors)
	case u.Errors > 0:
		return fmt.Sprintf("ok (%d)", u.Errors)
	}
	return "ok"
}

func fmtRatio(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", *v)
}

func fmtPct(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", *v*100)
}
