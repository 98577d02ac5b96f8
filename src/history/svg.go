package history

import (
	"fmt"
	"html"
	"math"
	"strings"
	"time"
)

// Colours of the strip, the web UI's palette: red only where the LAN had no
// Internet, amber where a fault was being handled, grey for pauses the
// household chose (or a WAN outage, which is not the tunnel's fault).
const (
	colourUp       = "#138a4b"
	colourDegraded = "#b7791f"
	colourDown     = "#c53030"
	colourPaused   = "#98a2b3"
	colourUnknown  = "#e3e6eb"
	colourText     = "#667085"
)

// SVG geometry (a viewBox: it scales to any width).
const (
	svgW, svgH   = 720, 64
	barTop, barH = 12, 30
	labelY       = 58
)

// SVG draws the strip as a self-contained SVG (no script, no external
// reference), for the web UI and LuCI to insert as it is. Times are relative
// ("30 min ago") so the router's time zone does not matter. Every bucket has
// a tooltip; rotations are marked with a small triangle above the bar.
func (s Strip) SVG() string {
	var b strings.Builder
	n := len(s.Buckets)
	if n == 0 {
		return ""
	}
	length := s.To.Sub(s.From)
	// The outer picture is as wide as its box and of a fixed height; the
	// bars are drawn in a viewBox stretched to that width, and the labels
	// are placed in percent, so a phone gets the same bar height and
	// readable text instead of a scaled-down sliver.
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="100%%" height="%d" role="img" aria-label="%s" class="health-strip">`,
		svgH, html.EscapeString(s.Summary()))
	fmt.Fprintf(&b, `<title>%s</title>`, html.EscapeString(s.Summary()))
	fmt.Fprintf(&b, `<svg x="0" y="0" width="100%%" height="%d" viewBox="0 0 %d %d" preserveAspectRatio="none">`, barTop+barH, svgW, barTop+barH)
	w := float64(svgW) / float64(n)
	for i, bk := range s.Buckets {
		x := float64(i) * w
		fill := colourUnknown
		switch bk.Worst {
		case Up:
			fill = colourUp
		case Degraded:
			fill = colourDegraded
		case Down:
			fill = colourUp // the red share is drawn over it, to scale
			if bk.UpS == 0 {
				fill = colourDown
			}
		case Paused:
			fill = colourPaused
		}
		tip := s.bucketTip(i, length)
		fmt.Fprintf(&b, `<g><title>%s</title><rect x="%.2f" y="%d" width="%.2f" height="%d" fill="%s"/>`,
			html.EscapeString(tip), x, barTop, math.Max(w-0.6, 0.4), barH, fill)
		if bk.Worst == Down && bk.UpS > 0 && bk.KnownS > 0 {
			// At least a third of the bar, so a 20 s outage in a 24 min bucket is seen.
			h := math.Max(float64(barH)*bk.DownS/bk.KnownS, float64(barH)/3)
			fmt.Fprintf(&b, `<rect x="%.2f" y="%.2f" width="%.2f" height="%.2f" fill="%s"/>`,
				x, float64(barTop+barH)-h, math.Max(w-0.6, 0.4), h, colourDown)
		}
		if bk.Rotations > 0 {
			cx := x + w/2
			fmt.Fprintf(&b, `<path d="M%.2f %d l-4 -7 h8 z" fill="%s"/>`, cx, barTop-2, colourDegraded)
		}
		b.WriteString(`</g>`)
	}
	b.WriteString(`</svg>`)
	// Three labels (the start, the middle, now): five overlap on a phone.
	for k := 0; k <= 4; k += 2 {
		ago := length - time.Duration(k)*length/4
		anchor := "middle"
		switch k {
		case 0:
			anchor = "start"
		case 4:
			anchor = "end"
		}
		text := "now"
		if k < 4 {
			text = agoText(ago)
		}
		fmt.Fprintf(&b, `<text x="%d%%" y="%d" font-size="12" font-family="system-ui,sans-serif" fill="%s" text-anchor="%s">%s</text>`,
			k*25, labelY, colourText, anchor, html.EscapeString(text))
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// Summary is the strip in one sentence: "Last hour: 98.3% up, 1 outage (2 min), 1 rotation".
func (s Strip) Summary() string {
	span := "Last " + spanText(s.To.Sub(s.From))
	if s.UptimePct < 0 {
		return span + ": no data yet"
	}
	parts := []string{fmt.Sprintf("%s up", pct(s.UptimePct))}
	var down time.Duration
	for _, o := range s.Outages {
		down += o.To.Sub(maxTime(o.From, s.From))
	}
	switch len(s.Outages) {
	case 0:
		parts = append(parts, "no outage")
	case 1:
		parts = append(parts, "1 outage ("+durText(down)+")")
	default:
		parts = append(parts, fmt.Sprintf("%d outages (%s in all)", len(s.Outages), durText(down)))
	}
	rot := 0
	for _, bk := range s.Buckets {
		rot += bk.Rotations
	}
	switch rot {
	case 0:
	case 1:
		parts = append(parts, "1 node switch")
	default:
		parts = append(parts, fmt.Sprintf("%d node switches", rot))
	}
	return span + ": " + strings.Join(parts, ", ")
}

func (s Strip) bucketTip(i int, length time.Duration) string {
	bk := s.Buckets[i]
	step := time.Duration(s.BucketS * float64(time.Second))
	from := s.To.Sub(bk.From)
	to := from - step
	when := agoText(from) + " to " + agoText(to)
	if to <= 0 {
		when = agoText(from) + " to now"
	}
	var what string
	switch bk.Worst {
	case Unknown:
		what = "no data"
	case Paused:
		what = "paused (diagnostics or WAN down)"
	case Up:
		what = "working"
	case Degraded:
		what = "working, a fault was being handled"
	case Down:
		what = "no Internet for " + durText(time.Duration(bk.DownS*float64(time.Second)))
	}
	if bk.Rotations == 1 {
		what += ", 1 node switch"
	} else if bk.Rotations > 1 {
		what += fmt.Sprintf(", %d node switches", bk.Rotations)
	}
	_ = length
	return when + ": " + what
}

func pct(p float64) string {
	if p >= 99.95 && p < 100 {
		return "99.9%"
	}
	if p == 100 {
		return "100%"
	}
	return fmt.Sprintf("%.1f%%", p)
}

func agoText(d time.Duration) string {
	switch {
	case d <= 0:
		return "now"
	case d <= time.Hour:
		return fmt.Sprintf("%d min ago", int(math.Round(d.Minutes())))
	default:
		h := d.Hours()
		if h == math.Trunc(h) {
			return fmt.Sprintf("%d h ago", int(h))
		}
		return fmt.Sprintf("%.1f h ago", h)
	}
}

func spanText(d time.Duration) string {
	switch {
	case d == time.Hour:
		return "hour"
	case d == 24*time.Hour:
		return "24 hours"
	case d < time.Hour:
		return fmt.Sprintf("%d minutes", int(d.Minutes()))
	default:
		return fmt.Sprintf("%g hours", d.Hours())
	}
}

func durText(d time.Duration) string {
	switch {
	case d < time.Second:
		return "under 1 s"
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(math.Round(d.Seconds())))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(math.Round(d.Minutes())))
	default:
		return fmt.Sprintf("%.1f h", d.Hours())
	}
}
