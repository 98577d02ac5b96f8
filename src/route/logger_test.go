package route

import (
	"context"
	"strings"
	"surflare-watchdog/src/testenv"
	"testing"
)

// Route's lines reach the logger the program installed, as lines of their
// own with the subsystem — not the default handler of package init time.
func TestRouteLogsThroughTheInstalledLogger(t *testing.T) {
	_, h := freshNS(t)
	buf := testenv.CaptureLog(t)
	if _, err := h.EnsureTunnel(context.Background(), IPv4); err != nil {
		t.Fatal(err)
	}
	if out := buf.String(); !strings.Contains(out, `level=INFO msg="tunnel routing installed" subsystem=route family=`) {
		t.Errorf("route line not in the installed logger:\n%s", out)
	}
}
