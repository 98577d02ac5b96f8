package detectors

import (
	"strings"
	"testing"
	"time"

	"surflare-watchdog/src/detectors/fastsignal"
	"surflare-watchdog/src/detectors/loghealth"
	"surflare-watchdog/src/detectors/storm503"
)

// One urltest round of 503s from the node in use via two relays starts
// the G2 override although the monitor's count (10) is far off; it does
// not follow us to the node we rotate to.
func TestStorm503OverrideByBreadth(t *testing.T) {
	now := time.Now()
	m := storm503.New(storm503.Options{Count: 10, Window: 5 * time.Minute, ActiveWindow: time.Minute, Now: func() time.Time { return now }})
	lw, err := fastsignal.NewLogWatch(fastsignal.LogOptions{
		Current: func() (string, string) { return "Dallas", "auto" },
		Nodes:   []string{"Dallas", "Los Angeles", "Chicago", "New York", "Atlanta", "Miami"},
	})
	if err != nil {
		t.Fatal(err)
	}
	o := NewStorm503Override(m, lw)
	o.Follow("Dallas")
	feed := func(node, transit string) {
		l := loghealth.Line{Time: time.Now(), Node: node, Transit: transit, Error: "unexpected status: 503 Service Unavailable"}
		o.Record(l)
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
	o.Follow("Los Angeles")
	if why, on := o.Override(now); on {
		t.Errorf("Dallas's 503s veto Los Angeles: %s", why)
	}
}

func TestStorm503OverrideFollowsTheMonitor(t *testing.T) {
	now := time.Now()
	m := storm503.New(storm503.Options{Count: 3, Window: time.Minute, ActiveWindow: 30 * time.Second, Now: func() time.Time { return now }})
	o := NewStorm503Override(m, nil)
	o.Follow("Dallas")
	if _, on := o.Override(now); on {
		t.Fatal("override active without 503s")
	}
	line := func(n string) loghealth.Line {
		return loghealth.Line{Time: now, Node: n, Transit: "auto", Error: "unexpected status: 503 Service Unavailable"}
	}
	for range 3 {
		o.Record(line("Miami")) // another node's storm is not ours
	}
	if _, on := o.Override(now); on {
		t.Fatal("override active for another node's 503s")
	}
	for range 3 {
		o.Record(line("Dallas"))
	}
	why, on := o.Override(now)
	if !on || !strings.Contains(why, "3 urltest 503s") {
		t.Errorf("after 3 503s: %q %v", why, on)
	}
	if _, on := o.Override(now.Add(time.Minute)); on {
		t.Error("override still active after the active window")
	}
	for range 3 {
		o.Record(line("Dallas"))
	}
	o.Follow("Los Angeles") // rotated away: Dallas's storm must not veto it
	if _, on := o.Override(now); on {
		t.Error("override active on the node we rotated to")
	}
}
