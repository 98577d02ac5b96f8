package loopguard

import (
	"bytes"
	"context"
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

// The circuit-open line reaches the logger the program installed, at WARN
// and with the subsystem — not the default handler of package init time.
func TestGuardLogsThroughTheInstalledLogger(t *testing.T) {
	buf := captureLog(t)
	g, _ := newGuard(t, &fakeBlocker{}, 100)
	g.Observe(context.Background(), sample(190, 10, 0))
	if out := buf.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "circuit open") || !strings.Contains(out, "subsystem=loopguard") {
		t.Errorf("loop guard line not in the installed logger:\n%s", out)
	}
}
