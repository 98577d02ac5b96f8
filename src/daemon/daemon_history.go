package daemon

import (
	"context"
	"fmt"
	"strings"
	"time"

	"surflare-watchdog/src/history"
	"surflare-watchdog/src/ubus"
	"surflare-watchdog/src/watchdog"
)

// History limits for ubus, the same as the web API's: a day at most (what
// the recorder keeps), at least five minutes, no more buckets than a wide
// screen has pixels to spare.
const (
	historyMaxSpan    = 24 * time.Hour
	historyMinSpan    = 5 * time.Minute
	historyMaxBuckets = 288
)

// startHistory feeds the recorder from every engine transition and
// rotation (the "Node rotation:" lines, automatic and requested alike).
func (d *Daemon) startHistory(ctx context.Context) {
	d.hist.Observe(time.Now(), history.ForEngineState(string(d.w.Status().State)))
	d.followEvents(ctx, "history", func(_ context.Context, ev watchdog.Event) {
		switch {
		case ev.Transition != nil:
			d.hist.Observe(ev.At, history.ForEngineState(string(ev.Transition.To)))
		case ev.Log != nil && strings.HasPrefix(ev.Log.Message, "Node rotation:"):
			d.hist.Rotation(ev.At)
		}
	})
}

// History is api.Historian: the strip over the last span, drawn.
func (b apiBackend) History(_ context.Context, span time.Duration, buckets int) (any, error) {
	return b.d.hist.View(time.Now(), span, buckets), nil
}

// ubusHistory is `ubus call surflare history {span, buckets}`: the same
// view as the web API's (span in seconds, 1 h in 60 buckets by default).
func (d *Daemon) ubusHistory(_ context.Context, req *ubus.Request) (ubus.Fields, error) {
	span, buckets := time.Hour, 60
	if v, ok := req.Int("span"); ok {
		span = time.Duration(v) * time.Second
		if span < historyMinSpan || span > historyMaxSpan {
			return badArgument(fmt.Errorf("span %d: want seconds from %d to %d", v, int(historyMinSpan.Seconds()), int(historyMaxSpan.Seconds())))
		}
	}
	if v, ok := req.Int("buckets"); ok {
		if v < 1 || v > historyMaxBuckets {
			return badArgument(fmt.Errorf("buckets %d: want a number from 1 to %d", v, historyMaxBuckets))
		}
		buckets = int(v)
	}
	return toFields(d.hist.View(time.Now(), span, buckets))
}
