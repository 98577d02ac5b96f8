package storm503

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// captureLog installs a default logger writing into the returned buffer,
// as the daemon installs its own at start; the previous one comes back at
// the end of the test.
func captureLog(t *testing.T) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(old) })
	return &buf
}

// The storm line reaches the logger the program installed, at its level and
// with the subsystem — not the default handler of package init time.
func TestStormLogsThroughTheInstalledLogger(t *testing.T) {
	buf := captureLog(t)
	m, clk, _, _ := newMonitor(t)
	for range 10 {
		m.Record(clk.Now())
	}
	if out := buf.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "503 storm:") || !strings.Contains(out, "subsystem=storm503") {
		t.Errorf("storm line not in the installed logger:\n%s", out)
	}
}
