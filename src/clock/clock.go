// Package clock is the one time source the watchdog's parts take, so a
// test can drive time instead of sleeping: the engine, the detectors, the
// firewall's rate limits and the relay learner all read Now and wait on
// After through it.
package clock

import "time"

// Clock is what a part needs of time.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// Real is the system clock.
type Real struct{}

// Now is time.Now.
func (Real) Now() time.Time { return time.Now() }

// After is time.After.
func (Real) After(d time.Duration) <-chan time.Time { return time.After(d) }
