package storm503

import (
	"strings"
	"surflare-watchdog/src/testenv"
	"testing"
)

// The storm line reaches the logger the program installed, at its level and
// with the subsystem — not the default handler of package init time.
func TestStormLogsThroughTheInstalledLogger(t *testing.T) {
	buf := testenv.CaptureLog(t)
	m, clk, _, _ := newMonitor(t)
	for range 10 {
		m.Record(clk.Now())
	}
	if out := buf.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "503 storm:") || !strings.Contains(out, "subsystem=storm503") {
		t.Errorf("storm line not in the installed logger:\n%s", out)
	}
}
