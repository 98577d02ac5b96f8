package daemon

import (
	"strings"
	"testing"
	"time"

	"surflare-watchdog/src/fastsignal"
	"surflare-watchdog/src/loghealth"
	"surflare-watchdog/src/storm503"
)

// One urltest round of 503s from the node in use via two relays starts
// the G2 override although the monitor's count (10) is far off; it does
// not follow us to the node we rotate to.
func TestStormOverrideByBreadth(t *testing.T) {
	now := time.Now()
	m := storm503.New(storm503.Options{Count: 10, Window: 5 * time.Minute, ActiveWindow: time.Minute, Now: func() time.Time { return now }})
	lw, err := fastsignal.NewLogWatch(fastsignal.LogOptions{
		Current: func() (string, string) { return "Dallas", "auto" },
		Nodes:   []string{"Dallas", "Los Angeles", "Chicago", "New York", "Atlanta", "Miami"},
	})
	if err != nil {
		t.Fatal(err)
	}
	o := &stormOverride{m: m, fast: lw}
	o.follow("Dallas")
	feed := func(node, transit string) {
		l := loghealth.Line{Time: time.Now(), Node: node, Transit: transit, Error: "unexpected status: 503 Service Unavailable"}
		o.record(l)
		lw.Observe(l)
	}
	feed("Dallas", "Tokyo")
	if why, on := o.Override(now); on {
		t.Fatalf("one relay's 503 started the override: %s", why)
	}
	feed("Dallas", "auto")
	why, on := o.Override(now)
	if !on || !strings.Contains(why, "urltest 503 from Dallas via Tokyo, auto") {
		t.Fatalf("after one round via two relays: %q %v; want the override on", why, on)
	}
	o.follow("Los Angeles")
	if why, on := o.Override(now); on {
		t.Errorf("Dallas's 503s veto Los Angeles: %s", why)
	}
}
