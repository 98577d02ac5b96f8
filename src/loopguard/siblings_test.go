package loopguard

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"surflare-watchdog/src/detectors/detect"
	"surflare-watchdog/src/testenv"
)

// relaysOf is an Options.Siblings over a fixed set of relay endpoints, as
// the daemon builds it from the learned relays: a relay's siblings are the
// other relays, anything else has none.
func relaysOf(relays ...netip.AddrPort) func(netip.AddrPort) []netip.AddrPort {
	return func(dst netip.AddrPort) []netip.AddrPort {
		var out []netip.AddrPort
		isRelay := false
		for _, r := range relays {
			if r == dst {
				isRelay = true
				continue
			}
			out = append(out, r)
		}
		if !isRelay {
			return nil
		}
		return out
	}
}

var loopDst3 = netip.MustParseAddrPort("198.18.30.23:8443") // a third relay

func newSiblingGuard(t *testing.T, b Blocker, k Killer) (*Guard, *clock) {
	t.Helper()
	clk := &clock{t: t0}
	g, err := New(Options{MinActive: 200, Blocker: b, Killer: k, Now: clk.now,
		Siblings: relaysOf(loopDst, loopDst2, loopDst3)})
	if err != nil {
		t.Fatal(err)
	}
	return g, clk
}

// A loop to one relay opens the circuits of the proxy's other relays at
// the same moment: the proxy fails over the instant its relay is blocked,
// and the loop must find the next relay closed. The looping relay is
// blocked first (its loop is the one burning descriptors now).
func TestGuardOpensSiblingRelays(t *testing.T) {
	buf := testenv.CaptureLog(t)
	u := &unblocker{}
	g, _ := newSiblingGuard(t, u, &fakeKiller{})
	g.Observe(context.Background(), loopTo(loopDst, 400, 0))
	want := []call{{"block", loopDst, DefaultTTL}, {"block", loopDst2, DefaultTTL}, {"block", loopDst3, DefaultTTL}}
	if len(u.calls) != len(want) {
		t.Fatalf("calls %v, want %v", u.calls, want)
	}
	for i := range want {
		if u.calls[i] != want[i] {
			t.Fatalf("calls %v, want %v (the looping relay, then its siblings)", u.calls, want)
		}
	}
	st := g.State()
	if len(st.Circuits) != 3 || st.Blocks != 3 || st.Cut != 400 {
		t.Fatalf("state %+v, want three circuits and the loop's 400 sockets cut", st)
	}
	for _, c := range st.Circuits {
		wantOf := loopDst
		if c.Dst == loopDst {
			wantOf = netip.AddrPort{}
		}
		if c.SiblingOf != wantOf {
			t.Errorf("circuit %v: sibling of %v, want %v", c.Dst, c.SiblingOf, wantOf)
		}
	}
	out := buf.String()
	for _, s := range []string{
		"loopguard: circuit open for 198.18.30.21:8443 (in-flight 400/400",
		"loopguard: circuit open for 198.18.30.22:8443 (sibling of 198.18.30.21:8443: the proxy fails over between its relays",
		"loopguard: circuit open for 198.18.30.23:8443 (sibling of 198.18.30.21:8443",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("log lacks %q:\n%s", s, out)
		}
	}
	// The loop that moved on nowhere: later samples open nothing more.
	g.Observe(context.Background(), loopTo(loopDst2, 300, 1000))
	if u.count("block") != 3 {
		t.Errorf("a sibling's own loop re-blocked it: %v", u.calls)
	}
}

// A destination that is not a relay endpoint has no siblings: only its
// own circuit opens.
func TestGuardNonRelayOpensOnlyItsOwnCircuit(t *testing.T) {
	buf := testenv.CaptureLog(t)
	u := &unblocker{}
	g, _ := newSiblingGuard(t, u, nil)
	other := netip.MustParseAddrPort("198.18.40.1:80") // the account API, say
	g.Observe(context.Background(), loopTo(other, 400, 0))
	if len(u.calls) != 1 || u.calls[0] != (call{"block", other, DefaultTTL}) {
		t.Fatalf("calls %v, want only %v blocked", u.calls, other)
	}
	if st := g.State(); len(st.Circuits) != 1 || st.Circuits[0].SiblingOf.IsValid() {
		t.Errorf("state %+v", st)
	}
	if strings.Contains(buf.String(), "sibling") {
		t.Errorf("a sibling was logged:\n%s", buf)
	}
}

// Siblings close by themselves once nothing has looped to them for their
// hold, even while the relay that opened them still loops; and the relay
// closes later on its own.
func TestGuardSiblingsCloseByThemselves(t *testing.T) {
	u := &unblocker{}
	g, clk := newSiblingGuard(t, u, nil) // no killer: Tokyo's loop stays
	ctx := context.Background()
	g.Observe(ctx, loopTo(loopDst, 400, 0))
	for range 5 {
		clk.t = clk.t.Add(time.Second)
		g.Observe(ctx, loopTo(loopDst, 400, 0))
	}
	st := g.State()
	if len(st.Circuits) != 1 || st.Circuits[0].Dst != loopDst {
		t.Fatalf("after the hold: circuits %+v, want only Tokyo's (still looping)", st.Circuits)
	}
	if u.count("unblock") != 2 {
		t.Errorf("calls %v, want both siblings unblocked", u.calls)
	}
	// Tokyo drains and closes after its own hold.
	clk.t = clk.t.Add(time.Second)
	g.Observe(ctx, []detect.Conn{})
	clk.t = clk.t.Add(DefaultHold)
	g.Observe(ctx, []detect.Conn{})
	if st := g.State(); st.Open || u.count("unblock") != 3 {
		t.Errorf("after Tokyo drained: %+v calls %v", st, u.calls)
	}
}

// A sibling whose block fails is not an open circuit (the failure shows);
// the looping relay's own circuit and the other sibling's open all the
// same. A looping relay whose own block fails opens no sibling: it is
// retried on the next sample, siblings and all.
func TestGuardSiblingBlockFailure(t *testing.T) {
	b := &failOn{dst: loopDst2}
	g, _ := newSiblingGuard(t, b, nil)
	g.Observe(context.Background(), loopTo(loopDst, 400, 0))
	st := g.State()
	if len(st.Circuits) != 2 || st.Err == "" {
		t.Errorf("state %+v, want Tokyo and the third relay open and Singapore's failure shown", st)
	}
	for _, c := range st.Circuits {
		if c.Dst == loopDst2 {
			t.Errorf("Singapore open although its block failed: %+v", st.Circuits)
		}
	}
	b2 := &failOn{dst: loopDst}
	g2, _ := newSiblingGuard(t, b2, nil)
	g2.Observe(context.Background(), loopTo(loopDst, 400, 0))
	if st := g2.State(); st.Open || len(b2.calls) != 0 {
		t.Errorf("Tokyo's block failed: state %+v calls %v, want nothing open", st, b2.calls)
	}
}

// failOn is a Blocker that fails for one destination.
type failOn struct {
	fakeBlocker
	dst netip.AddrPort
}

func (f *failOn) Block(ctx context.Context, dst netip.AddrPort, ttl time.Duration) error {
	if dst == f.dst {
		return context.DeadlineExceeded
	}
	return f.fakeBlocker.Block(ctx, dst, ttl)
}
