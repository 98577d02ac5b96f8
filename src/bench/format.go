package bench

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Number formats for the report. NaN is "—" (not measured) everywhere;
// +Inf is "never" (a run that did not detect or recover).

func fmtNum(v float64) string {
	switch {
	case math.IsNaN(v):
		return "—"
	case math.IsInf(v, 1):
		return "never"
	}
	return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
}

func fmtSeconds(v float64) string {
	switch {
	case math.IsNaN(v):
		return "—"
	case math.IsInf(v, 1):
		return "never"
	case v < 1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func fmtCount(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	return strconv.FormatInt(int64(math.Round(v)), 10)
}

func fmtKB(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	return fmt.Sprintf("%.1f MB", v/kbPerMiB)
}

func fmtCPU(secPerHour float64) string {
	if math.IsNaN(secPerHour) {
		return "—"
	}
	return fmt.Sprintf("%.1f s/h (%.3f %% of one core)", secPerHour, secPerHour/36)
}

func fmtBytes(v float64) string {
	if math.IsNaN(v) || v <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f MB (%d bytes)", v/1e6, int64(v))
}

func fmtDuration(sec float64) string {
	switch {
	case math.IsNaN(sec):
		return "—"
	case sec >= 60 && math.Mod(sec, 60) == 0:
		return fmt.Sprintf("%d min", int(sec/60))
	case sec >= 60:
		return fmt.Sprintf("%.1f min", sec/60)
	}
	return fmt.Sprintf("%d s", int(math.Round(sec)))
}

func fmtRatio(r RatioRow) string {
	if math.IsNaN(float64(r.Ratio)) {
		if r.Note != "" {
			return "— (" + r.Note + ")"
		}
		return "—"
	}
	return fmt.Sprintf("%.2f", float64(r.Ratio))
}

// cell makes s safe inside a markdown table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}

// code quotes override lists for the report.
func code(sets []string) string {
	if len(sets) == 0 {
		return "(none)"
	}
	q := make([]string, len(sets))
	for i, s := range sets {
		q[i] = "`" + s + "`"
	}
	return strings.Join(q, " ")
}
