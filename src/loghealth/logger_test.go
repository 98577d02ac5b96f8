package loghealth

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
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

// The monitor's lines reach the logger the program installed, as lines of
// their own (message, attributes, subsystem) — not the default handler of
// package init time.
func TestMonitorLogsThroughTheInstalledLogger(t *testing.T) {
	buf := captureLog(t)
	synctest.Test(t, func(t *testing.T) {
		m, err := NewMonitor(Options{LogPath: filepath.Join(t.TempDir(), "missing.log")})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { m.Run(ctx); close(done) }()
		synctest.Wait()
		cancel()
		<-done
	})
	out := buf.String()
	if !strings.Contains(out, `level=INFO msg="proxy log not there yet; waiting for it" subsystem=loghealth path=`) {
		t.Errorf("monitor line not in the installed logger:\n%s", out)
	}
}
