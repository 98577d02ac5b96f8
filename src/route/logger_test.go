package route

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

// Route's lines reach the logger the program installed, as lines of their
// own with the subsystem — not the default handler of package init time.
func TestRouteLogsThroughTheInstalledLogger(t *testing.T) {
	_, h := freshNS(t)
	buf := captureLog(t)
	if _, err := h.EnsureTunnel(context.Background(), IPv4); err != nil {
		t.Fatal(err)
	}
	if out := buf.String(); !strings.Contains(out, `level=INFO msg="tunnel routing installed" subsystem=route family=`) {
		t.Errorf("route line not in the installed logger:\n%s", out)
	}
}
