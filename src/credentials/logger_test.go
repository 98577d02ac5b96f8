package credentials

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

// The rewrite warning reaches the logger the program installed, at WARN
// and with the subsystem — not the default handler of package init time.
func TestCredentialsLogThroughTheInstalledLogger(t *testing.T) {
	buf := captureLog(t)
	path := writeConfig(t, "config surflare 'main'\n\toption node 'Dallas'; option username 'old@x.y'\n", 0o644)
	if _, err := SetUsername(path, "new@x.y"); err != nil {
		t.Fatal(err)
	}
	if out := buf.String(); !strings.Contains(out, `level=WARN msg="config file rewritten in uci's canonical form`) || !strings.Contains(out, "subsystem=credentials") {
		t.Errorf("credentials line not in the installed logger:\n%s", out)
	}
}
