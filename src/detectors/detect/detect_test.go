package detect

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeSampler returns whatever the test set last.
type fakeSampler struct {
	mu    sync.Mutex
	conns []Conn
	err   error
	calls int
}

func (f *fakeSampler) set(conns []Conn, err error) {
	f.mu.Lock()
	f.conns, f.err = conns, err
	f.mu.Unlock()
}

func (f *fakeSampler) Sample(context.Context) ([]Conn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return f.conns, f.err
}

var relay = netip.MustParseAddrPort("198.18.20.1:8443")

func conn(cwnd uint32, rto time.Duration, backoff uint8) Conn {
	return Conn{Local: netip.MustParseAddrPort("198.18.0.2:40000"), Remote: relay, State: StateEstablished,
		Outbound: true, HasInfo: true, Cwnd: cwnd, RTO: rto, Backoff: backoff}
}

func TestScore(t *testing.T) {
	healthy := conn(10, 200*time.Millisecond, 0)
	cases := []struct {
		name string
		c    Conn
		want int
	}{
		{"healthy", healthy, 0},
		{"cwnd collapsed", conn(1, 200*time.Millisecond, 0), 2},
		{"backoff 3", conn(10, 1600*time.Millisecond, 3), 2},
		{"rto exactly 8 s is not above", conn(10, 8*time.Second, 0), 0},
		{"all three", conn(1, 9*time.Second, 5), 6},
		{"accepted LAN socket is not the tunnel", func() Conn { c := conn(1, 9*time.Second, 5); c.Outbound = false; return c }(), 0},
		{"no tcp_info", func() Conn { c := conn(1, 9*time.Second, 5); c.HasInfo = false; return c }(), 0},
		{"syn-sent", func() Conn { c := conn(1, 9*time.Second, 5); c.State = StateSynSent; return c }(), 0},
	}
	for _, c := range cases {
		if got := Score(c.c); got != c.want {
			t.Errorf("%s: score %d, want %d", c.name, got, c.want)
		}
	}
}

func sick(n int) []Conn {
	out := make([]Conn, n)
	for i := range out {
		out[i] = conn(1, time.Second, 3) // 4 points each
	}
	return out
}

func TestDetectorFiresOnceThenCoolsDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &fakeSampler{}
		var mu sync.Mutex
		var firedAt []time.Time
		var seenConns int
		fired := func() []time.Time { mu.Lock(); defer mu.Unlock(); return append([]time.Time(nil), firedAt...) }
		d, err := New(Options{Sampler: s, Threshold: 16, Interval: 3 * time.Second, Cooldown: 300 * time.Second,
			Trigger:  func(string) { mu.Lock(); firedAt = append(firedAt, time.Now()); mu.Unlock() },
			OnSample: func(_ context.Context, _ time.Time, c []Conn) { mu.Lock(); seenConns = len(c); mu.Unlock() }})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go d.Run(ctx)
		start := time.Now()

		// Three sick connections (12 points): below the threshold.
		s.set(sick(3), nil)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if len(fired()) != 0 {
			t.Fatalf("fired at score 12 < 16")
		}
		mu.Lock()
		if seenConns != 3 {
			t.Errorf("OnSample saw %d conns, want 3", seenConns)
		}
		mu.Unlock()
		// A fourth: 16 points, fires at the next sample (within 3 s).
		s.set(sick(4), nil)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if f := fired(); len(f) != 1 || f[0].Sub(start) > 13*time.Second {
			t.Fatalf("fired %v (want once, by 13 s)", f)
		}
		if st := d.Status(time.Now()); st.Score != 16 || st.Conns != 4 || st.Stale {
			t.Errorf("status %+v", st)
		}
		// Still sick: nothing more during the cooldown, once more after it.
		time.Sleep(290 * time.Second)
		synctest.Wait()
		if n := len(fired()); n != 1 {
			t.Fatalf("fired %d times within the cooldown", n)
		}
		time.Sleep(12 * time.Second)
		synctest.Wait()
		f := fired()
		if len(f) != 2 {
			t.Fatalf("after the cooldown: fired %d times, want 2", len(f))
		}
		if got := f[1].Sub(f[0]); got < 300*time.Second || got > 303*time.Second {
			t.Errorf("second trigger %v after the first, want 300-303 s", got)
		}
	})
}

func TestDetectorStaleWhenSamplingFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &fakeSampler{}
		d, _ := New(Options{Sampler: s, Interval: 3 * time.Second})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go d.Run(ctx)
		synctest.Wait()
		hb := d.Heartbeat()
		if hb.IsZero() {
			t.Fatal("no heartbeat after the first sample")
		}
		s.set(nil, errors.New("sock_diag: permission denied"))
		time.Sleep(9 * time.Second)
		synctest.Wait()
		if st := d.Status(time.Now()); st.Stale || st.Err == "" {
			t.Errorf("9 s (3 intervals) without a sample: %+v, want not yet stale, error shown", st)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if st := d.Status(time.Now()); !st.Stale || !st.LastSample.Equal(hb) {
			t.Errorf("12 s without a sample: %+v, want stale with the old heartbeat", st)
		}
		s.set(nil, nil)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if st := d.Status(time.Now()); st.Stale || st.Err != "" || !d.Heartbeat().After(hb) {
			t.Errorf("sampling again: %+v", st)
		}
	})
}

func TestNewNeedsSampler(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Error("New without a sampler succeeded")
	}
}
