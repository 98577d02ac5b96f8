package daemon

import (
	"errors"
	"strings"
	"testing"

	"surflare-watchdog/src/preflight"
)

// A settings file broken after start does not stop the tunnel (the last
// good config runs), but the finding stays in the status as a warning.
func TestSettingsErrorAfterStartIsAWarning(t *testing.T) {
	r := preflight.Report{Findings: []preflight.Finding{
		{Check: preflight.CheckConfig, Severity: preflight.Blocker, Why: "The settings in /etc/config/surflare have errors", Detail: errors.New("line 3").Error()},
		{Check: preflight.CheckCgroup, Severity: preflight.Warning, Why: "cgroup2"},
	}}
	got := settingsErrorIsWarning(r)
	if !got.OK() || len(got.Findings) != 2 {
		t.Fatalf("report %+v: want no blocker, both findings", got)
	}
	if f := got.Findings[0]; f.Severity != preflight.Warning || !strings.Contains(f.Why, "the last good settings stay in use") {
		t.Errorf("settings finding %+v", f)
	}
}
