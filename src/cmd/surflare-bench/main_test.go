package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestUsageAndBadFlags(t *testing.T) {
	cases := []struct {
		args []string
		code int
		want string // in stderr
	}{
		{[]string{"--help"}, exitOK, "Usage: surflare-bench"},
		{[]string{"--skip", "everything"}, exitUsage, `--skip "everything": not a part`},
		{[]string{"--runs", "-1"}, exitUsage, "runs must be >= 1"},
		{[]string{"--loss", "150"}, exitUsage, "loss 0..100"},
		{[]string{"--cadences", "5,thirty"}, exitUsage, `cadence "thirty": want whole seconds`},
		{[]string{"--baseline-cadences", "0"}, exitUsage, `cadence "0": want whole seconds`},
		{[]string{"--help"}, exitOK, "-cadences string"},
		{[]string{"extra"}, exitUsage, `unexpected argument "extra"`},
		{[]string{"--no-such-flag"}, exitUsage, "flag provided but not defined"},
	}
	for _, c := range cases {
		var out, errb bytes.Buffer
		code := run(c.args, &out, &errb)
		if code != c.code || !strings.Contains(errb.String(), c.want) {
			t.Errorf("surflare-bench %v: exit %d, stderr %q; want exit %d and %q", c.args, code, errb.String(), c.code, c.want)
		}
		if out.Len() != 0 {
			t.Errorf("surflare-bench %v wrote to stdout: %q", c.args, out.String())
		}
	}
}
