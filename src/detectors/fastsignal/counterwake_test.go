package fastsignal

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// kernelCounters is the firewall as the woken watch sees it: counters that
// packets move, and an NFLOG wake-up for each packet a watched counter
// counts (coalesced, as nflog.Sub delivers them).
type kernelCounters struct {
	mu    sync.Mutex
	v     map[string]uint64
	reads atomic.Int32
	wake  chan struct{}
}

func newKernelCounters() *kernelCounters {
	return &kernelCounters{v: map[string]uint64{"rst_in": 0, "blocked_out": 0, "syn_out": 0}, wake: make(chan struct{}, 1)}
}

func (k *kernelCounters) read(context.Context) (map[string]uint64, error) {
	k.reads.Add(1)
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make(map[string]uint64, len(k.v))
	for n, v := range k.v {
		out[n] = v
	}
	return out, nil
}

// packets counts n packets of name; watched ones log a wake-up.
func (k *kernelCounters) packets(name string, n uint64) {
	k.mu.Lock()
	k.v[name] += n
	k.mu.Unlock()
	if name != "syn_out" && n > 0 {
		select {
		case k.wake <- struct{}{}:
		default:
		}
	}
}

// stream counts perSecond packets of name, spread over each second, for d.
func (k *kernelCounters) stream(name string, perSecond int, d time.Duration) {
	step := time.Second / time.Duration(perSecond)
	for end := time.Now().Add(d); time.Now().Before(end); {
		k.packets(name, 1)
		time.Sleep(step)
	}
}

type firing struct {
	mu sync.Mutex
	at []time.Time
	rs []string
}

func (f *firing) add(r string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.at, f.rs = append(f.at, time.Now()), append(f.rs, r)
}

func (f *firing) get() ([]time.Time, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.at...), append([]string(nil), f.rs...)
}

func startWoken(t *testing.T, k *kernelCounters, wake <-chan struct{}) (*CounterWatch, *firing, context.CancelFunc) {
	t.Helper()
	var f firing
	w, err := NewCounterWatch(CounterOptions{
		Read: k.read,
		Watch: Names(map[string]Rule{"rst_in": {Meaning: "RSTs from relays"},
			"blocked_out": {Meaning: "router traffic dropped"}}),
		Trigger: f.add,
		Wake:    wake,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go w.Run(ctx)
	return w, &f, cancel
}

// With the kernel's wake-ups, a quiet tunnel is never read (issue 19: the
// once-a-second read was 3,600 wake-ups an hour), however much the
// counters nobody judges move; a burst after a long quiet spell is still
// judged at once (the sleep counts as quiet seconds, not as no history),
// a sharp one at the peek; and a counter that moves at a steady rate keeps
// the watch reading every second, as before, without firing.
func TestCounterWatchWokenReadsNothingWhileQuietAndKeepsItsLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newKernelCounters()
		_, f, cancel := startWoken(t, k, k.wake)
		defer cancel()
		for range 600 { // 10 quiet minutes; the moat's SYN counter moves with every probe
			k.packets("syn_out", 3)
			time.Sleep(time.Second)
		}
		synctest.Wait()
		if n := k.reads.Load(); n > 1 {
			t.Fatalf("a quiet tunnel for 10 min: %d reads, want the first one only", n)
		}

		// A sharp burst (injected RSTs): judged at the peek.
		start := time.Now()
		k.packets("rst_in", 40)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		at, rs := f.get()
		if len(rs) != 1 || !strings.Contains(rs[0], "rst_in +40") {
			t.Fatalf("a burst of 40 RSTs after 10 quiet minutes: triggers %q, want one naming rst_in +40", rs)
		}
		if d := at[0].Sub(start); d > wakePeek+10*time.Millisecond {
			t.Errorf("a sharp burst fired %v after it began, want at the peek (%v)", d, wakePeek)
		}

		// Quiet again: the watch goes back to sleep after the counters stop.
		time.Sleep(time.Minute)
		synctest.Wait()
		r0 := k.reads.Load()
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if n := k.reads.Load() - r0; n != 0 {
			t.Fatalf("quiet again for 5 min: %d reads, want none", n)
		}

		// A slower burst, 8 a second (strict direct refusing a proxy gone
		// direct): not 5 at the first peek, but fired at the first peek
		// after its fifth packet (500 ms in), sooner than a poll's mean
		// half Interval plus the 500 ms, after DefaultTriggerGap.
		time.Sleep(DefaultTriggerGap)
		start = time.Now()
		go k.stream("blocked_out", 8, 3*time.Second)
		time.Sleep(4 * time.Second)
		synctest.Wait()
		at, rs = f.get()
		if len(rs) != 2 || !strings.Contains(rs[1], "blocked_out") {
			t.Fatalf("8 drops a second after a quiet spell: triggers %q, want a second one naming blocked_out", rs)
		}
		if d := at[1].Sub(start); d > 500*time.Millisecond+peekEvery+10*time.Millisecond {
			t.Errorf("8 drops a second fired %v after they began, want at the first peek after the fifth (within %v)", d, 500*time.Millisecond+peekEvery)
		}

		// A steady rate (a router service that keeps trying to go direct):
		// read every second while it lasts, never a jump.
		time.Sleep(time.Minute)
		synctest.Wait()
		r0 = k.reads.Load()
		n0 := len(rs)
		go k.stream("blocked_out", 20, 2*time.Minute)
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		_, rs = f.get()
		reads := k.reads.Load() - r0
		// The first seconds of the stream are a jump against the quiet
		// before it (as with polling); then it is a rate.
		if len(rs) > n0+1 {
			t.Errorf("a steady 20 drops a second fired %d times: %q", len(rs)-n0, rs[n0:])
		}
		if reads < 110 || reads > 125 {
			t.Errorf("a steady stream for 2 min: %d reads, want one a second", reads)
		}
	})
}

// Without wake-ups (the subscription ended: a closed channel), the watch
// reads every Interval, as it did before there were any.
func TestCounterWatchPollsWhenTheWakeUpsEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newKernelCounters()
		ch := make(chan struct{})
		close(ch)
		_, f, cancel := startWoken(t, k, ch)
		defer cancel()
		time.Sleep(30*time.Second + time.Millisecond)
		synctest.Wait()
		if n := k.reads.Load(); n < 30 || n > 32 {
			t.Fatalf("no wake-ups, 30 s: %d reads, want one a second", n)
		}
		time.Sleep(5 * time.Second)
		k.mu.Lock() // no wake-up: the poll alone must see it
		k.v["rst_in"] += 50
		k.mu.Unlock()
		time.Sleep(1100 * time.Millisecond)
		synctest.Wait()
		if _, rs := f.get(); len(rs) != 1 {
			t.Fatalf("polling, 50 RSTs: triggers %q, want one", rs)
		}
	})
}
