package credentials

import (
	"strings"
	"surflare-watchdog/src/testenv"
	"testing"
)

// The rewrite warning reaches the logger the program installed, at WARN
// and with the subsystem — not the default handler of package init time.
func TestCredentialsLogThroughTheInstalledLogger(t *testing.T) {
	buf := testenv.CaptureLog(t)
	path := writeConfig(t, "config surflare 'main'\n\toption node 'Dallas'; option username 'old@x.y'\n", 0o644)
	if _, err := SetUsername(path, "new@x.y"); err != nil {
		t.Fatal(err)
	}
	if out := buf.String(); !strings.Contains(out, `level=WARN msg="config file rewritten in uci's canonical form`) || !strings.Contains(out, "subsystem=credentials") {
		t.Errorf("credentials line not in the installed logger:\n%s", out)
	}
}
