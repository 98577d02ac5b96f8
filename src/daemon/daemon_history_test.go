package daemon

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"surflare-watchdog/src/history"
	"surflare-watchdog/src/ubus"
)

// `ubus call surflare history` serves the recorder's view with the web
// API's limits: LuCI and the web page draw the same strip.
func TestUbusHistoryServesTheRecorder(t *testing.T) {
	d := &Daemon{hist: history.New(0)}
	now := time.Now()
	d.hist.Observe(now.Add(-20*time.Minute), history.Up)
	d.hist.Observe(now.Add(-10*time.Minute), history.Down)
	d.hist.Rotation(now.Add(-9 * time.Minute))
	d.hist.Observe(now.Add(-8*time.Minute), history.Up)

	f, err := d.ubusHistory(context.Background(), &ubus.Request{Args: ubus.Fields{
		{Name: "span", Value: ubus.Int32(1800)}, {Name: "buckets", Value: ubus.Int32(30)}}})
	if err != nil {
		t.Fatal(err)
	}
	m := f.Map()
	buckets, _ := m["buckets"].([]any)
	outages, _ := m["outages"].([]any)
	if svg, _ := m["svg"].(string); !strings.HasPrefix(svg, "<svg") || len(buckets) != 30 || len(outages) != 1 {
		t.Errorf("history: %d buckets, %d outages, svg %.30q", len(buckets), len(outages), m["svg"])
	}
	for _, args := range []ubus.Fields{
		{{Name: "span", Value: ubus.Int32(60)}},
		{{Name: "span", Value: ubus.Int32(2 * 86400)}},
		{{Name: "buckets", Value: ubus.Int32(0)}},
		{{Name: "buckets", Value: ubus.Int32(1000)}},
	} {
		if _, err := d.ubusHistory(context.Background(), &ubus.Request{Args: args}); !errors.Is(err, ubus.StatusInvalidArgument) {
			t.Errorf("history %v: err %v, want INVALID_ARGUMENT", args.Map(), err)
		}
	}
}
