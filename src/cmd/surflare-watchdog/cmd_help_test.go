package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestFlagHelpOnce: `--help` on the firewall, routes, teardown and version
// subcommands prints its usage once, to stdout, and nothing to stderr (the
// flag package's default Usage used to print every flag a second time, to
// stderr, and `version --help` printed the version).
func TestFlagHelpOnce(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		run  func(stdout, stderr *bytes.Buffer) int
		want []string // in stdout
	}{
		{"firewall plan", func(o, e *bytes.Buffer) int { return firewallMain(ctx, []string{"plan", "--help"}, o, e) }, []string{"-config", "-leases"}},
		{"firewall apply", func(o, e *bytes.Buffer) int { return firewallMain(ctx, []string{"apply", "-h"}, o, e) }, []string{"-no-routing"}},
		{"firewall teardown", func(o, e *bytes.Buffer) int { return firewallMain(ctx, []string{"teardown", "--help"}, o, e) }, []string{"-keep-kill-switch"}},
		{"firewall status", func(o, e *bytes.Buffer) int { return firewallMain(ctx, []string{"status", "--help"}, o, e) }, []string{"-json"}},
		{"teardown", func(o, e *bytes.Buffer) int { return teardownMain(ctx, []string{"--help"}, o, e) }, []string{"kill switch"}},
		{"routes update", func(o, e *bytes.Buffer) int { return routesMain(ctx, []string{"update", "--help"}, o, e) }, []string{"-url", "-out4"}},
		{"version", func(o, e *bytes.Buffer) int { return versionMain([]string{"--help"}, o, e) }, []string{"Usage: surflare-watchdog version"}},
	}
	for _, c := range cases {
		var out, errb bytes.Buffer
		if code := c.run(&out, &errb); code != exitOK {
			t.Errorf("%s --help: exit %d, want %d", c.name, code, exitOK)
		}
		if errb.Len() != 0 {
			t.Errorf("%s --help wrote to stderr: %q", c.name, errb.String())
		}
		o := out.String()
		if !strings.HasPrefix(o, "Usage: surflare-watchdog "+c.name) {
			t.Errorf("%s --help: no usage line first:\n%s", c.name, o)
		}
		for _, w := range c.want {
			if n := strings.Count(o, w); n != 1 {
				t.Errorf("%s --help: %q appears %d times, want once:\n%s", c.name, w, n, o)
			}
		}
	}
}

// TestBadFlagUsageOnStderr: a wrong flag exits 2 and says which flag, on stderr.
func TestBadFlagUsageOnStderr(t *testing.T) {
	var out, errb bytes.Buffer
	if code := firewallMain(context.Background(), []string{"plan", "--bogus"}, &out, &errb); code != exitUsage {
		t.Errorf("firewall plan --bogus: exit %d, want %d", code, exitUsage)
	}
	if out.Len() != 0 || !strings.Contains(errb.String(), "-bogus") || !strings.Contains(errb.String(), "Usage:") {
		t.Errorf("firewall plan --bogus: stdout %q, stderr %q", out.String(), errb.String())
	}
}
