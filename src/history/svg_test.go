package history

import (
	"encoding/xml"
	"io"
	"strings"
	"testing"
	"time"
)

func TestSVGIsWellFormedAndSaysWhatHappened(t *testing.T) {
	r := New(0)
	r.Observe(at(0), Up)
	r.Observe(at(20), Down)
	r.Rotation(at(22))
	r.Observe(at(22), Up)
	s := r.Strip(at(60), time.Hour, 60)
	svg := s.SVG()
	d := xml.NewDecoder(strings.NewReader(svg))
	rects, titles := 0, 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, svg)
		}
		if se, ok := tok.(xml.StartElement); ok {
			switch se.Name.Local {
			case "rect":
				rects++
			case "title":
				titles++
			case "script", "foreignObject", "image", "use":
				t.Fatalf("the strip must be inert: <%s>", se.Name.Local)
			}
		}
	}
	if rects < 60 || titles != 61 {
		t.Errorf("rects %d titles %d; want ≥60 and 61 (one per bucket and the whole)", rects, titles)
	}
	for _, want := range []string{
		`aria-label="Last hour: 96.7% up, 1 outage (2 min), 1 node switch"`,
		colourDown, `40 min ago to 39 min ago: no Internet for 1 min`, `>now</text>`, `>60 min ago</text>`, `>30 min ago</text>`,
		`<path d="M`, // the rotation marker
	} {
		if !strings.Contains(svg, want) {
			t.Errorf("svg lacks %q", want)
		}
	}
}

func TestSummaryWords(t *testing.T) {
	r := New(0)
	if got := r.Strip(at(60), time.Hour, 4).Summary(); got != "Last hour: no data yet" {
		t.Errorf("empty: %q", got)
	}
	r.Observe(at(0), Up)
	if got := r.Strip(at(60), 24*time.Hour, 24).Summary(); got != "Last 24 hours: 100% up, no outage" {
		t.Errorf("healthy day: %q", got)
	}
	r.Observe(at(10), Down)
	r.Observe(at(11), Up)
	r.Observe(at(30), Down)
	if got := r.Strip(at(60), time.Hour, 4).Summary(); got != "Last hour: 48.3% up, 2 outages (31 min in all)" {
		t.Errorf("two outages, one still open: %q", got)
	}
}
