package firewall

import (
	"net/netip"
	"strings"
	"testing"
)

// The LAN probe's source keeps reaching the proxy while the LAN is
// tombstoned, ahead of the tombstone; without a tombstone no extra rule is
// needed (the general tproxy rule covers it).
func TestProbeSourceBypassesTombstone(t *testing.T) {
	s := DefaultSpec()
	s.ProbeSrc = []netip.Addr{netip.MustParseAddr("198.18.1.254")}
	s.ProxyDown = true
	plan, err := Render(s)
	if err != nil {
		t.Fatal(err)
	}
	probe := strings.Index(plan, "ip saddr 198.18.1.254 meta l4proto tcp tproxy to 127.0.0.1:10800")
	tomb := strings.Index(plan, `comment "tombstone`)
	if probe < 0 || tomb < 0 || probe > tomb {
		t.Errorf("want the probe's tproxy rule before the tombstone (probe at %d, tombstone at %d):\n%s", probe, tomb, plan)
	}
	s.ProxyDown = false
	if plan, _ = Render(s); strings.Contains(plan, "ip saddr 198.18.1.254") {
		t.Errorf("probe rule present without a tombstone:\n%s", plan)
	}
	s.ProbeSrc = []netip.Addr{{}}
	if err := s.Validate(); err == nil {
		t.Error("an invalid probe address passed Validate")
	}
}
