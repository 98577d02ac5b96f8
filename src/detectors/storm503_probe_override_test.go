package detectors

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"surflare-watchdog/src/detectors/storm503"
)

// The 503 probe's storm starts the G2 override with no urltest line at all
// (the vendor's urltest may run every 3 min), and only for the node in use.
func TestStorm503OverrideByOurProbe(t *testing.T) {
	now := time.Now()
	m := storm503.New(storm503.Options{Count: 10, Window: 5 * time.Minute, ActiveWindow: time.Minute, Now: func() time.Time { return now }})
	status := http.StatusNoContent
	p := storm503.NewProbe(storm503.ProbeOptions{Interval: 2 * time.Second, ActiveWindow: time.Minute,
		Ask:     func(context.Context) (int, error) { return status, nil },
		Node:    func() string { return "Dallas" },
		Trigger: func(string) {}})
	o := NewStorm503Override(m, nil)
	o.SetProbe(p)
	o.Follow("Dallas")
	p.Round(t.Context())
	if why, on := o.Override(now); on {
		t.Fatalf("the exit answers 204, yet the override is on: %s", why)
	}
	status = http.StatusServiceUnavailable
	p.Round(t.Context())
	why, on := o.Override(time.Now())
	if !on || !strings.Contains(why, "503 from the exit of Dallas") {
		t.Fatalf("override %q %v after our probe's storm; want on", why, on)
	}
	o.Follow("Los Angeles")
	if why, on := o.Override(time.Now()); on {
		t.Errorf("Dallas's storm vetoes Los Angeles: %s", why)
	}
}
