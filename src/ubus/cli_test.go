package ubus

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// A wrong command line is a usage error (2) with the usage; an absent bus
// is a failure (1) that says so, as the real tool does.
func TestRunCLIUsageAndNoBus(t *testing.T) {
	ctx := context.Background()
	for _, args := range [][]string{{}, {"frob"}, {"call", "only-path"}, {"-bogus", "list"}} {
		var out, errb bytes.Buffer
		if code := RunCLI(ctx, args, &out, &errb); code != cliUsageErr || !strings.Contains(errb.String(), "Usage: surflare-watchdog ubus") {
			t.Errorf("%q: exit %d, stderr %q", args, code, errb.String())
		}
	}
	var out, errb bytes.Buffer
	sock := filepath.Join(t.TempDir(), "ubus.sock")
	if code := RunCLI(ctx, []string{"-s", sock, "list"}, &out, &errb); code != cliFailed || !strings.HasPrefix(errb.String(), "Failed to connect to ubus") {
		t.Errorf("no bus: exit %d, stderr %q", code, errb.String())
	}
}
