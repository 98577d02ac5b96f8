package fastsignal

import (
	"context"
	"fmt"
	"time"
)

// Reading only while the counters move (issue 19). Every counter the
// signal judges counts packets the firewall refuses or sees as trouble
// (the kill switch's drops, strict direct's refusals, RSTs from relays),
// and on an idle healthy tunnel none of them moves: a read every second
// is 3,600 wake-ups an hour that find nothing. So the firewall also logs
// those packets to an NFLOG group, rate-limited (firewall/counterwake.go),
// and Options.Wake says when one came. Run then:
//
//   - sleeps, reading nothing, after a read that saw no watched counter
//     move and no wake-up since the read before;
//   - on a wake-up, peeks wakePeek later and then every peekEvery (a
//     burst is judged as soon as its packets make a jump, sooner than a
//     poll at a random phase would: a sharp one such as injected RSTs at
//     the first peek, strict direct's refusals of a proxy gone direct a
//     few hundred ms in), and reads Interval after the wake-up: that
//     delta spans the same second a poll's would, so what is a jump is
//     unchanged, and a peek's delta, part of that second, is never a jump
//     the read would not have seen;
//   - reads every Interval from then on while the counters move or
//     wake-ups come, as before.
//
// The seconds it slept count as seconds in which every watched counter
// stood still (quietDeltas): the kernel logs the first packet after any
// quiet half second, so a sleep ends with the first packet any of them
// counts. A jump is thus judged against the same history a poll every
// Interval would have built, and a burst after a long quiet spell is
// judged at once instead of after minHistory new reads.
const (
	wakePeek  = 150 * time.Millisecond
	peekEvery = 250 * time.Millisecond
)

// runWoken is Run with Options.Wake.
func (w *CounterWatch) runWoken(ctx context.Context) error {
	wake := w.o.Wake
	w.tick(ctx, false)
	for {
		w.mu.Lock()
		quiet := w.reads > 0 && !w.moved && !w.errLogged
		w.mu.Unlock()
		woken := false
		if quiet && wake != nil {
			w.mu.Lock()
			w.slept = true
			w.mu.Unlock()
			select {
			case <-ctx.Done():
				return nil
			case _, ok := <-wake:
				if !ok {
					wake = nil
					w.stopped(ctx)
					continue
				}
			}
			// Peeks only follow a wake-up: a quiet tunnel costs none.
			at := w.o.Clock.Now()
			for p := wakePeek; p < w.o.Interval; p += peekEvery {
				if !w.sleep(ctx, at.Add(p).Sub(w.o.Clock.Now())) {
					return nil
				}
				if _, kept := w.tick(ctx, true); kept {
					break // judged: the read at Interval goes on from here
				}
			}
			if !w.sleep(ctx, at.Add(w.o.Interval).Sub(w.o.Clock.Now())) {
				return nil
			}
			w.tick(ctx, false)
			continue
		}
		// Polling: every Interval while the counters move or wake-ups
		// come (or the subscription ended, or a read failed).
		deadline := w.o.Clock.Now().Add(w.o.Interval)
		for {
			left := deadline.Sub(w.o.Clock.Now())
			if left <= 0 {
				break
			}
			select {
			case <-ctx.Done():
				return nil
			case _, ok := <-wake:
				if !ok {
					wake = nil
					w.stopped(ctx)
					continue
				}
				woken = true // still moving: no sleep after this read
				continue
			case <-w.o.Clock.After(left):
			}
		}
		if ok, _ := w.tick(ctx, false); ok && woken {
			w.mu.Lock()
			w.moved = true
			w.mu.Unlock()
		}
	}
}

// sleep waits d; false when ctx ended.
func (w *CounterWatch) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	select {
	case <-ctx.Done():
		return false
	case <-w.o.Clock.After(d):
		return true
	}
}

// stopped logs that the wake-ups ended (the subscription's socket failed).
func (w *CounterWatch) stopped(ctx context.Context) {
	if ctx.Err() == nil {
		log().Warn(fmt.Sprintf("counter watch: kernel wake-ups stopped; reading the counters every %s instead", w.o.Interval))
	}
}

// quietDeltas is h with a zero delta for every Interval that Run slept
// through since the last read (within Baseline of now): the history a
// read every Interval would have built, since nothing moved meanwhile.
func (w *CounterWatch) quietDeltas(h []sample, now time.Time) []sample {
	if w.lastRead.IsZero() {
		return h
	}
	out := append([]sample(nil), h...)
	at := w.lastRead.Add(w.o.Interval)
	if skip := now.Sub(at) - w.o.Baseline; skip > 0 { // older than the history keeps
		at = at.Add((skip + w.o.Interval - 1) / w.o.Interval * w.o.Interval)
	}
	for ; now.Sub(at) >= w.o.Interval/2; at = at.Add(w.o.Interval) {
		out = append(out, sample{at: at})
	}
	return out
}
