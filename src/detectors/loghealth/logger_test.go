package loghealth

import (
	"context"
	"path/filepath"
	"strings"
	"surflare-watchdog/src/testenv"
	"testing"
	"testing/synctest"
)

// The monitor's lines reach the logger the program installed, as lines of
// their own (message, attributes, subsystem) — not the default handler of
// package init time.
func TestMonitorLogsThroughTheInstalledLogger(t *testing.T) {
	buf := testenv.CaptureLog(t)
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
