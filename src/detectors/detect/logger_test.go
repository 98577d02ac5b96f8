package detect

import (
	"context"
	"errors"
	"strings"
	"surflare-watchdog/src/testenv"
	"testing"
)

// The detector's lines reach the logger the program installed, at their
// level and with the subsystem — not the default handler of package init
// time.
func TestDetectorLogsThroughTheInstalledLogger(t *testing.T) {
	buf := testenv.CaptureLog(t)
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
