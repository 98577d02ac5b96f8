package detect

import (
	"bytes"
	"context"
	"errors"
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

// The detector's lines reach the logger the program installed, at their
// level and with the subsystem — not the default handler of package init
// time.
func TestDetectorLogsThroughTheInstalledLogger(t *testing.T) {
	buf := captureLog(t)
	s := &fakeSampler{}
	s.set(nil, errors.New("sock_diag: permission denied"))
	d, err := New(Options{Sampler: s})
	if err != nil {
		t.Fatal(err)
	}
	d.Tick(context.Background())
	if out := buf.String(); !strings.Contains(out, `level=WARN msg="early detector: sampling failed" subsystem=detect err=`) {
		t.Errorf("detector line not in the installed logger:\n%s", out)
	}
}
