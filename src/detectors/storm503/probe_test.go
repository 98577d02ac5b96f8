package storm503

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// exit is a scripted exit: each Ask takes the next answer (the last one
// repeats); 0 is "no answer".
type exit struct {
	mu      sync.Mutex
	answers []int
	asked   int
}

func (e *exit) ask(context.Context) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.asked++
	a := e.answers[0]
	if len(e.answers) > 1 {
		e.answers = e.answers[1:]
	}
	if a == 0 {
		return 0, errors.New("i/o timeout")
	}
	return a, nil
}

func (e *exit) set(answers ...int) {
	e.mu.Lock()
	e.answers = answers
	e.mu.Unlock()
}

type probeRig struct {
	p     *Probe
	exit  *exit
	node  string
	asks  []string
	mu    sync.Mutex
	start time.Time
}

func newProbeRig(answers ...int) *probeRig {
	r := &probeRig{exit: &exit{answers: answers}, node: "Dallas", start: time.Now()}
	r.p = NewProbe(ProbeOptions{
		Interval: 2 * time.Second, ActiveWindow: time.Minute, URL: "http://198.18.30.21/generate_204",
		Ask: r.exit.ask,
		Node: func() string {
			r.mu.Lock()
			defer r.mu.Unlock()
			return r.node
		},
		Trigger: func(why string) {
			r.mu.Lock()
			r.asks = append(r.asks, why)
			r.mu.Unlock()
		},
	})
	return r
}

func (r *probeRig) triggered() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.asks...)
}

// A storm of the exit in use is seen within one interval whatever any
// urltest does: two 503s in a row ask for one check, and the storm names
// the node until the exit answers otherwise.
func TestProbeSeesAStormWithinOneInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newProbeRig(http.StatusNoContent)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go r.p.Run(ctx)

		time.Sleep(5 * time.Second) // two healthy rounds
		synctest.Wait()
		if a := r.triggered(); len(a) != 0 {
			t.Fatalf("a healthy exit asked for a check: %v", a)
		}
		r.exit.set(http.StatusServiceUnavailable)
		faultAt := time.Now()
		for len(r.triggered()) == 0 && time.Since(faultAt) < time.Minute {
			time.Sleep(100 * time.Millisecond)
			synctest.Wait()
		}
		a := r.triggered()
		if took := time.Since(faultAt); len(a) != 1 || took > 2*time.Second {
			t.Fatalf("storm seen after %s, asked %v; want one check within the 2 s interval", took, a)
		}
		if !strings.Contains(a[0], "STORM503_PROBE: the exit of Dallas") {
			t.Errorf("reason %q", a[0])
		}
		why, on := r.p.Storm("Dallas", time.Now())
		if !on || !strings.Contains(why, "503 from the exit of Dallas") {
			t.Fatalf("Storm(Dallas) = %q %v during the storm", why, on)
		}
		if _, on := r.p.Storm("Chicago", time.Now()); on {
			t.Error("Dallas's storm names Chicago")
		}
		time.Sleep(10 * time.Second) // the storm goes on: still one check
		synctest.Wait()
		if a := r.triggered(); len(a) != 1 {
			t.Errorf("a lasting storm asked %d times: %v", len(a), a)
		}
		if _, on := r.p.Storm("Dallas", time.Now()); !on {
			t.Error("a lasting storm ended")
		}
		r.exit.set(http.StatusNoContent)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if why, on := r.p.Storm("Dallas", time.Now()); on {
			t.Errorf("the exit answers 204 again, yet the storm goes on: %s", why)
		}
	})
}

// One 503 is one busy server: the confirming ask answers, and nothing
// happens. No answer at all is not a 503 (dead nodes are the other
// detectors'), and a storm whose answers stop ends after ActiveWindow.
func TestProbeIgnoresOne503AndSilence(t *testing.T) {
	r := newProbeRig(http.StatusServiceUnavailable, http.StatusNoContent)
	r.p.Round(t.Context())
	if a := r.triggered(); len(a) != 0 || r.exit.asked != 2 {
		t.Fatalf("one 503 then 204: asked %d times, triggered %v; want the confirming ask and no check", r.exit.asked, a)
	}
	r.exit.set(http.StatusServiceUnavailable, 0)
	r.p.Round(t.Context())
	r.exit.set(0)
	r.p.Round(t.Context())
	if a := r.triggered(); len(a) != 0 {
		t.Fatalf("a 503 and a timeout, or timeouts: triggered %v", a)
	}
	r.exit.set(http.StatusServiceUnavailable)
	r.p.Round(t.Context())
	if _, on := r.p.Storm("Dallas", time.Now()); !on {
		t.Fatal("two 503s in a row: no storm")
	}
	r.exit.set(0) // the exit stops answering at all
	r.p.Round(t.Context())
	if _, on := r.p.Storm("Dallas", time.Now().Add(59*time.Second)); !on {
		t.Error("a storm ended by one unanswered ask")
	}
	if _, on := r.p.Storm("Dallas", time.Now().Add(61*time.Second)); on {
		t.Error("a storm whose last 503 is older than ActiveWindow still counts")
	}
}

// A new tunnel (reconnect, rotation) forgets the storm and asks at once,
// so the override's reconnect-first rule learns quickly whether the fresh
// tunnel still gets 503s; a rotation to another node never inherits it.
func TestProbeNewTunnelAsksAgainAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newProbeRig(http.StatusServiceUnavailable)
		r.p.Round(t.Context())
		if len(r.triggered()) != 1 {
			t.Fatal("no storm")
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go r.p.Run(ctx)
		synctest.Wait()
		asked := r.exit.asked
		r.p.NewTunnel() // the reconnect to the same node
		if _, on := r.p.Storm("Dallas", time.Now()); on {
			t.Fatal("the storm outlived NewTunnel")
		}
		synctest.Wait() // no time passes: the poke alone runs the round
		if r.exit.asked == asked {
			t.Fatal("NewTunnel did not ask at once")
		}
		if a := r.triggered(); len(a) != 2 {
			t.Fatalf("the storm on the fresh tunnel did not ask for a check: %v", a)
		}
		r.mu.Lock()
		r.node = "Los Angeles"
		r.mu.Unlock()
		r.exit.set(http.StatusNoContent)
		r.p.NewTunnel()
		synctest.Wait()
		if _, on := r.p.Storm("Los Angeles", time.Now()); on {
			t.Error("Dallas's storm follows us to Los Angeles")
		}
	})
}

// The probe's requests keep the idle probe quiet, so it is the heartbeat
// while it runs: two unanswered asks in a row are a miss (one is a lost
// handshake), at most one per MissGap; an answer of any status is none.
func TestProbeMissIsTwoUnansweredAsks(t *testing.T) {
	var misses []string
	r := newProbeRig(0, http.StatusNoContent)
	now := time.Unix(1000, 0)
	r.p.o.Now = func() time.Time { return now }
	r.p.o.Miss = func(node string, err error) { misses = append(misses, node+": "+err.Error()) }
	r.p.Round(t.Context())
	if len(misses) != 0 {
		t.Fatalf("one unanswered ask then a 204 is a miss: %v", misses)
	}
	r.exit.set(0)
	r.p.Round(t.Context())
	if len(misses) != 1 || misses[0] != "Dallas: i/o timeout" {
		t.Fatalf("two unanswered asks: misses %v, want one on Dallas", misses)
	}
	now = now.Add(5 * time.Second)
	r.p.Round(t.Context())
	if len(misses) != 1 {
		t.Fatalf("a second miss within MissGap: %v", misses)
	}
	now = now.Add(6 * time.Second)
	r.p.Round(t.Context())
	if len(misses) != 2 {
		t.Fatalf("no miss after MissGap: %v", misses)
	}
	if a := r.triggered(); len(a) != 0 {
		t.Errorf("misses started a 503 storm: %v", a)
	}
}
