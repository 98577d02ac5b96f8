package loopguard

import (
	"context"
	"strings"
	"surflare-watchdog/src/testenv"
	"testing"
)

// The circuit-open line reaches the logger the program installed, at WARN
// and with the subsystem — not the default handler of package init time.
func TestGuardLogsThroughTheInstalledLogger(t *testing.T) {
	buf := testenv.CaptureLog(t)
	g, _ := newGuard(t, &fakeBlocker{}, 100)
	g.Observe(context.Background(), sample(190, 10, 0))
	if out := buf.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "circuit open") || !strings.Contains(out, "subsystem=loopguard") {
		t.Errorf("loop guard line not in the installed logger:\n%s", out)
	}
}
