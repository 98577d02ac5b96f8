package main

import (
	"strings"
	"testing"

	"surflare-watchdog/src/runfiles"
)

// procd's restart (and the postinst's, on an upgrade) writes the handover
// request in the configured run dir before procd's SIGTERM, so the daemon
// leaves the tunnel to the next one; a plain stop or shutdown writes
// nothing, so the daemon ends the tunnel on purpose.
func TestInitScriptRestartHandsTheTunnelOver(t *testing.T) {
	const script = "files/etc/init.d/surflare-watchdog"
	for _, c := range []struct {
		action string
		want   bool
	}{{"restart", true}, {"stop", false}, {"shutdown", false}} {
		fn := `STUB_WAN="$STUB_DIR"; action=` + c.action + `; stop_service && ls "$STUB_DIR"`
		out, _ := initHarness(t, script, fn)
		if got := strings.Contains(out, runfiles.HandoverFile); got != c.want {
			t.Errorf("%s: handover request written = %v, want %v; run dir:\n%s", c.action, got, c.want, out)
		}
	}
}
