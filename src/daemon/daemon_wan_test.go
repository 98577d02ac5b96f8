package daemon

import "testing"

func TestIsWANInterface(t *testing.T) {
	wans := []string{"wan", "wan6 wwan"}
	for iface, want := range map[string]bool{"wan": true, "wan6": true, "wwan": true, "lan": false, "": false, "wan6 wwan": false} {
		if got := isWANInterface(wans, iface); got != want {
			t.Errorf("isWANInterface(%q) = %v, want %v", iface, got, want)
		}
	}
	if isWANInterface(nil, "wan") {
		t.Error("with no configured uplink nothing is the WAN")
	}
}
