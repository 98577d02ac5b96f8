package config

import (
	"strings"
	"testing"
)

// Issue 18: the vendor's three modes (E2), the node `auto` and any node the
// vendor lists (E1, e.g. Tokyo) load offline: the vendor's list is known
// only at runtime, so the config does not judge names (the daemon checks
// them against `surflare nodes`); and probes can be marked as on the
// vendor's rule-mode list.
func TestModesNodesAndListedProbes(t *testing.T) {
	for _, mode := range []Mode{ModeRule, ModeGlobal, ModeDirect} {
		c, w := mustParse(t, "config surflare 'main'\n\toption mode '"+string(mode)+"'\n\toption node 'auto'\n"+
			"\tlist candidate 'auto'\n\tlist candidate 'Tokyo'\n\tlist candidate 'Los Angeles'\n"+
			"config probe 'p'\n\toption kind 'cdn-trace'\n\toption url 'http://198.18.30.11/cdn-cgi/trace'\n\toption listed '1'\n"+
			"config probe 'q'\n\toption kind 'ip-echo'\n\toption url 'http://198.18.30.1/'\n")
		if len(w) != 0 {
			t.Errorf("%s: warnings %v", mode, w)
		}
		if c.Main.Mode != mode || c.Main.Node != "auto" || strings.Join(c.Main.Candidates, ",") != "auto,Tokyo,Los Angeles" {
			t.Errorf("%s: got mode %q node %q candidates %q", mode, c.Main.Mode, c.Main.Node, c.Main.Candidates)
		}
		if len(c.Probes) != 2 || !c.Probes[0].Listed || c.Probes[1].Listed {
			t.Errorf("%s: probes %+v, want p listed and q not", mode, c.Probes)
		}
		// The canonical text round-trips the new values.
		again, _ := mustParse(t, string(Format(c)))
		if !Equal(c, again) {
			t.Errorf("%s: Format does not round-trip:\n%s", mode, Format(c))
		}
	}
	_, _, err := Parse("/etc/config/surflare", []byte("config surflare 'main'\n\toption mode 'smart'\n"))
	if err == nil || !strings.Contains(err.Error(), `/etc/config/surflare:2: main.mode: "smart" is not one of rule, global, direct`) {
		t.Errorf("bad mode: %v", err)
	}
}
