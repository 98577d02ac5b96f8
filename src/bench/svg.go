package bench

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strings"
)

// The latency plot's geometry (SVG user units = px).
const (
	svgWidth     = 980
	svgLabelW    = 210 // scenario names (and urltest cadence) on the left
	svgPanelGap  = 30
	svgTop       = 70 // title and legend
	svgBand      = 46 // one scenario: ours strip + baseline strip
	svgStrip     = 16 // distance between the two strips of a band
	svgBottom    = 46 // axis labels
	svgMinS      = 0.1
	svgDotRadius = 3.2
)

// Colours for the two parameter sets (colour-blind safe pair) and marks.
const (
	colourOurs     = "#0072b2"
	colourBaseline = "#d55e00"
	colourGrid     = "#dddddd"
	colourTarget   = "#009e73"
)

// WriteSVG draws latency.svg: for each scenario, one strip of dots per
// parameter set (ours above, baseline below) for detection (left panel) and
// recovery (right panel), each run a dot, p50 a solid tick and p95 a dashed
// one, on a log time axis. A run that never got there is a triangle at the
// right edge. The target is a green dashed line. Hand-written SVG: no
// dependencies, opens in any browser.
func WriteSVG(w io.Writer, r *Result) error {
	rows := r.Scenarios
	height := svgTop + svgBand*max(len(rows), 1) + svgBottom
	maxS := 100.0
	for _, row := range rows {
		for _, m := range []*Measured{row.Ours, row.Baseline} {
			if m == nil {
				continue
			}
			for _, run := range m.Runs {
				for _, p := range []*float64{run.DetectS, run.RecoverS} {
					if p != nil && *p > maxS {
						maxS = *p
					}
				}
			}
		}
	}
	maxS = math.Pow(10, math.Ceil(math.Log10(maxS)))
	panelW := (svgWidth - svgLabelW - svgPanelGap - 20) / 2
	var b bytes.Buffer
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?>`+"\n")
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", svgWidth, height, svgWidth, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="#ffffff"/>`+"\n")
	mode := "full"
	if r.Quick {
		mode = "quick"
	}
	text(&b, 10, 22, "start", "16", fmt.Sprintf("surflare-watchdog: detection and recovery after a fault (%s run, %s)", mode, r.Date.UTC().Format("2006-01-02")))
	legend(&b, 10, 44, colourOurs, "ours (defaults)")
	legend(&b, 150, 44, colourBaseline, "baseline (seed parameters)")
	fmt.Fprintf(&b, `<line x1="360" y1="40" x2="360" y2="52" stroke="#000" stroke-width="2"/>`)
	text(&b, 366, 48, "start", "12", "p50")
	fmt.Fprintf(&b, `<line x1="400" y1="40" x2="400" y2="52" stroke="#000" stroke-width="2" stroke-dasharray="3,2"/>`)
	text(&b, 406, 48, "start", "12", "p95")
	fmt.Fprintf(&b, `<polygon points="446,41 446,51 454,46" fill="#000"/>`)
	text(&b, 458, 48, "start", "12", "never (off scale)")
	fmt.Fprintf(&b, `<line x1="580" y1="46" x2="600" y2="46" stroke="%s" stroke-width="2" stroke-dasharray="6,3"/>`, colourTarget)
	text(&b, 606, 48, "start", "12", "target")

	recoverGoal := goalRecoverBaseS
	if fc := float64(r.FakeConnectS); !math.IsNaN(fc) {
		recoverGoal += fc
	}
	panels := []struct {
		title  string
		x0     int
		pick   func(Run) *float64
		target float64
	}{
		{"detection (s)", svgLabelW, func(x Run) *float64 { return x.DetectS }, goalDetectS},
		{"recovery (s)", svgLabelW + panelW + svgPanelGap, func(x Run) *float64 { return x.RecoverS }, recoverGoal},
	}
	plotBottom := svgTop + svgBand*max(len(rows), 1)
	for _, p := range panels {
		xOf := func(s float64) float64 {
			s = math.Max(s, svgMinS)
			return float64(p.x0) + float64(panelW)*(math.Log10(s)-math.Log10(svgMinS))/(math.Log10(maxS)-math.Log10(svgMinS))
		}
		text(&b, float64(p.x0)+float64(panelW)/2, svgTop-6, "middle", "13", p.title)
		for t := svgMinS; t <= maxS*1.001; t *= 10 {
			x := xOf(t)
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>`+"\n", x, svgTop, x, plotBottom, colourGrid)
			text(&b, x, float64(plotBottom+16), "middle", "11", fmtNum(t))
		}
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/>`+"\n", p.x0, svgTop, panelW, plotBottom-svgTop)
		if p.target > 0 {
			x := xOf(p.target)
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="1.5" stroke-dasharray="6,3"/>`+"\n", x, svgTop, x, plotBottom, colourTarget)
		}
		for i, row := range rows {
			yBand := svgTop + i*svgBand
			for j, side := range []struct {
				m      *Measured
				colour string
			}{{row.Ours, colourOurs}, {row.Baseline, colourBaseline}} {
				y := float64(yBand + 15 + j*svgStrip)
				if side.m == nil {
					continue
				}
				var vals []*float64
				for _, run := range side.m.Runs {
					if run.Error != "" {
						continue // not carried out: no figure
					}
					v := p.pick(run)
					vals = append(vals, v)
					if v == nil {
						xe := float64(p.x0 + panelW)
						fmt.Fprintf(&b, `<polygon points="%.1f,%.1f %.1f,%.1f %.1f,%.1f" fill="%s"/>`+"\n", xe-8, y-5, xe-8, y+5, xe, y, side.colour)
						continue
					}
					fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="%.1f" fill="%s" fill-opacity="0.55"/>`+"\n", xOf(*v), y, svgDotRadius, side.colour)
				}
				for _, q := range []struct {
					pct  float64
					dash string
				}{{50, ""}, {95, ` stroke-dasharray="3,2"`}} {
					v := Percentile(vals, q.pct)
					if math.IsNaN(v) || math.IsInf(v, 0) {
						continue
					}
					x := xOf(v)
					fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>`+"\n", x, y-7, x, y+7, side.colour, q.dash)
				}
			}
			if i > 0 {
				fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s"/>`+"\n", p.x0, yBand, p.x0+panelW, yBand, colourGrid)
			}
		}
	}
	for i, row := range rows {
		text(&b, svgLabelW-8, float64(svgTop+i*svgBand+svgBand/2+4), "end", "12", rowLabel(row))
	}
	if len(rows) == 0 {
		text(&b, svgWidth/2, svgTop+svgBand/2, "middle", "12", "no scenario was measured")
	}
	text(&b, svgWidth/2, float64(plotBottom+36), "middle", "11", "seconds after the fault was injected (log scale)")
	b.WriteString("</svg>\n")
	_, err := w.Write(b.Bytes())
	return err
}

func text(b *bytes.Buffer, x, y float64, anchor, size, s string) {
	var esc strings.Builder
	_ = xml.EscapeText(&esc, []byte(s))
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="%s" font-size="%s">%s</text>`+"\n", x, y, anchor, size, esc.String())
}

func legend(b *bytes.Buffer, x, y float64, colour, label string) {
	fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="5" fill="%s"/>`+"\n", x+5, y, colour)
	text(b, x+14, y+4, "start", "12", label)
}
