// Package idleprobe sends one small request through an idle tunnel every
// Interval, so a node that dies while nobody uses it is found within one
// interval, not at the vendor's next urltest (every 3 minutes in stock
// sing-box) or the next full health check.
//
// It stays quiet while LAN traffic proves the path (the caller's Proven
// reports that replies came back through the proxy since the last beat): a
// busy tunnel is watched by its own failed connections (package connfail),
// and a request of ours would add nothing but load. A miss is not a verdict:
// it asks the engine for a confirming check, which alone decides. The
// default interval and its cost are argued in docs/idle-probe.md.
package idleprobe

import (
	"context"
	"time"
)

// Defaults.
const (
	// DefaultInterval: one beat every 10 s finds an idle dead node within
	// 12 s (interval + timeout), against about 25 s for mwan3's defaults
	// (5 s tracking, several misses before "down"), at ~1 request a beat.
	DefaultInterval = 10 * time.Second
	// DefaultTimeout bounds one beat; a healthy tunnel answers a 204 in
	// well under a second, a dead node never.
	DefaultTimeout = 2 * time.Second
)

// Options configure Run.
type Options struct {
	// Interval between beats; 0 turns the idle probe off.
	Interval time.Duration
	// Timeout of one beat (DefaultTimeout when 0).
	Timeout time.Duration
	// Beat makes one small request through the tunnel. Required.
	Beat func(ctx context.Context) error
	// Proven reports whether LAN traffic came back through the tunnel since
	// the last call; nil means never (always beat).
	Proven func() bool
	// Miss is told about a failed beat; it must not block (the engine's
	// request inbox). Required.
	Miss func(err error)
	// Active reports whether the tunnel should be up now (not connecting,
	// not paused for a WAN outage or diagnostics); nil means always.
	Active func() bool
	// Observe, when set, is told about every beat (for status and tests).
	Observe func(Result)
}

// Result is one beat.
type Result struct {
	At       time.Time
	Skipped  bool // LAN traffic proved the path, or the tunnel was not active
	Err      error
	Duration time.Duration
}

// Run beats until ctx ends. Time comes from the time package, so tests run
// it in a testing/synctest bubble.
func Run(ctx context.Context, o Options) {
	if o.Interval <= 0 || o.Beat == nil || o.Miss == nil {
		return
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	t := time.NewTimer(o.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r := beat(ctx, o)
		if o.Observe != nil {
			o.Observe(r)
		}
		if r.Err != nil && ctx.Err() == nil {
			o.Miss(r.Err)
		}
		t.Reset(o.Interval)
	}
}

func beat(ctx context.Context, o Options) Result {
	start := time.Now()
	r := Result{At: start}
	// Proven is asked every interval even when inactive, so traffic seen
	// while connecting does not count for the next beat.
	proven := o.Proven != nil && o.Proven()
	if proven || (o.Active != nil && !o.Active()) {
		r.Skipped = true
		return r
	}
	bctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	r.Err = o.Beat(bctx)
	r.Duration = time.Since(start)
	return r
}
