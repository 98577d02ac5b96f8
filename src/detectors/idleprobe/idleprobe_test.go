package idleprobe

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestBeatsWhenIdleAndReportsAMiss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var beats, misses atomic.Int32
		var dead atomic.Bool
		start := time.Now()
		var missAt time.Time
		go Run(ctx, Options{
			Interval: 10 * time.Second,
			Beat: func(ctx context.Context) error {
				beats.Add(1)
				if dead.Load() {
					<-ctx.Done() // a dead node never answers
					return ctx.Err()
				}
				return nil
			},
			Miss: func(error) {
				if misses.Add(1) == 1 {
					missAt = time.Now()
				}
			},
		})
		time.Sleep(35 * time.Second)
		synctest.Wait()
		if beats.Load() != 3 || misses.Load() != 0 {
			t.Fatalf("healthy: %d beats %d misses; want 3, 0", beats.Load(), misses.Load())
		}
		dead.Store(true) // the node dies at 35 s
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if misses.Load() != 1 {
			t.Fatalf("misses %d; want 1", misses.Load())
		}
		// Found at the next beat plus its timeout: within interval + 2 s of dying.
		if d := missAt.Sub(start.Add(35 * time.Second)); d > 12*time.Second {
			t.Fatalf("miss %v after the death; want ≤ 12 s", d)
		}
	})
}

func TestQuietWhileLANTrafficProvesThePath(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var beats, skipped atomic.Int32
		var busy atomic.Bool
		busy.Store(true)
		go Run(ctx, Options{
			Interval: 5 * time.Second,
			Beat:     func(context.Context) error { beats.Add(1); return nil },
			Proven:   busy.Load,
			Miss:     func(error) {},
			Observe: func(r Result) {
				if r.Skipped {
					skipped.Add(1)
				}
			},
		})
		time.Sleep(21 * time.Second)
		synctest.Wait()
		if beats.Load() != 0 || skipped.Load() != 4 {
			t.Fatalf("busy: %d beats %d skipped; want 0, 4", beats.Load(), skipped.Load())
		}
		busy.Store(false)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if beats.Load() != 2 {
			t.Fatalf("idle again: %d beats; want 2", beats.Load())
		}
	})
}

func TestInactiveTunnelIsNotBeaten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var misses atomic.Int32
		go Run(ctx, Options{
			Interval: time.Second,
			Beat:     func(context.Context) error { return errors.New("down") },
			Active:   func() bool { return false }, // WAN down: supervision paused
			Miss:     func(error) { misses.Add(1) },
		})
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if misses.Load() != 0 {
			t.Fatalf("misses while inactive: %d", misses.Load())
		}
	})
}

func TestOffAndStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		done := make(chan struct{})
		go func() {
			Run(context.Background(), Options{Interval: 0, Beat: func(context.Context) error { return nil }, Miss: func(error) {}})
			close(done)
		}()
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("interval 0 turns it off: Run returns at once")
		}
		ctx, cancel := context.WithCancel(context.Background())
		done = make(chan struct{})
		go func() {
			Run(ctx, Options{Interval: time.Second, Beat: func(context.Context) error { return nil }, Miss: func(error) {}})
			close(done)
		}()
		time.Sleep(3 * time.Second)
		cancel()
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("Run ends with its context")
		}
	})
}
