package bench

import (
	"context"
	"math/rand/v2"
	"strconv"
	"time"

	"surflare-watchdog/src/lab"
)

// How the lossy-but-working path is made. The lab has no netem (DESIGN.md
// §9): loss is the lab's nft loss fault on the WAN link (both directions),
// and jitter is the lab's user-space latency fault on every relay (every
// tunnel crosses one), redrawn uniformly from [0, jitter] every
// jitterPeriod.
const (
	jitterPeriod       = time.Second
	soakTrafficPeriod  = time.Second
	soakRequestTimeout = requestTimeout
)

// soak runs the daemon on a lossy-but-working path for d and counts the
// rotations (every one is false: every node works) and reconnects.
func soak(ctx context.Context, env labEnv, p Params, d time.Duration, lossPct, jitterMS int) Soak {
	s := Soak{Variant: p.Variant, DurationS: Num(d.Seconds()), LossPct: lossPct, JitterMS: jitterMS}
	l, err := env.up(ctx)
	if err != nil {
		s.Error = err.Error()
		return s
	}
	defer l.Close()
	defer stopDaemon(l)
	if _, err := startHealthy(ctx, l, p.Sets); err != nil {
		s.Error = err.Error()
		return s
	}
	before, err := l.DaemonStatus(ctx)
	if err == nil {
		_, err = l.ResetLeaks(ctx)
	}
	if err == nil {
		err = l.Fault(ctx, lab.FaultLoss, true, strconv.Itoa(lossPct))
	}
	if err != nil {
		s.Error = err.Error()
		return s
	}
	jctx, stopJitter := context.WithCancel(ctx)
	jitterDone := make(chan error, 1)
	go func() { jitterDone <- jitter(jctx, l, jitterMS) }()
	tr := startTraffic(ctx, l, soakTrafficPeriod, false)
	err = sleep(ctx, d)
	tr.stop()
	stopJitter()
	jerr := <-jitterDone
	after, serr := l.DaemonStatus(ctx)
	lc, lerr := l.Leaks(ctx)
	if e := firstErr(err, jerr, serr, lerr); e != nil {
		s.Error = e.Error()
		return s
	}
	s.Rotations = after.Counters.Rotations - before.Counters.Rotations
	s.Reconnects = after.Counters.ConnectAttempts - before.Counters.ConnectAttempts
	s.Checks = after.Counters.Checks - before.Counters.Checks
	s.FailedCheck = after.Counters.FailedChecks - before.Counters.FailedChecks
	s.ClientOK, s.ClientFail, _, _ = tr.counts()
	s.Leaked = int64(lc.Total())
	return s
}

// jitter redraws every relay's added latency from [0, maxMS] every
// jitterPeriod until ctx ends, then removes it.
func jitter(ctx context.Context, l *lab.Lab, maxMS int) error {
	t := time.NewTicker(jitterPeriod)
	defer t.Stop()
	set := func(c context.Context, ms func() int) error {
		for _, r := range lab.Relays {
			if err := l.Fault(c, lab.FaultLatency, true, r.Name, strconv.Itoa(ms())); err != nil {
				return err
			}
		}
		return nil
	}
	for {
		if err := set(ctx, func() int { return rand.IntN(maxMS + 1) }); err != nil && ctx.Err() == nil {
			return err
		}
		select {
		case <-ctx.Done():
			cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return set(cctx, func() int { return 0 })
		case <-t.C:
		}
	}
}
