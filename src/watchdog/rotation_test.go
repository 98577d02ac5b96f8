package watchdog

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"surflare-watchdog/src/preflight"
	"surflare-watchdog/src/surflare"
)

// failDallas makes Dallas fail from now and lets the threshold be reached.
func failDallas(h *harness) {
	h.advance(time.Minute)
	h.world.set(func(w *world) { w.dead["Dallas"] = true })
	h.advance(80 * time.Second)
}

func TestDeadNodeSkipped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		wd.logErrors["Los Angeles"] = 25
		wd.logErrors["Chicago"] = 3
		h := start(t, testSettings(t), wd)
		wd.set(func(w *world) { w.logUpdated = time.Now() })
		failDallas(h)
		if got := h.connects(); !slices.Equal(got, []string{"Dallas", "Chicago"}) {
			t.Errorf("connects = %q, want Los Angeles skipped", got)
		}
		if h.logged("LOG_HEALTH: skipping Los Angeles via auto (25 errors)") != 1 {
			t.Errorf("skip not logged:\n%s", strings.Join(h.logs(), "\n"))
		}
		if h.logged("Node rotation: Dallas -> Chicago (2/6)") != 1 {
			t.Errorf("rotation not logged:\n%s", strings.Join(h.logs(), "\n"))
		}
		h.requireState(StateHealthy)
		h.stop()
	})
}

func TestStaleNodeHealthIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		wd.logErrors["Los Angeles"] = 25
		h := start(t, testSettings(t), wd)
		wd.set(func(w *world) { w.logUpdated = time.Now().Add(-21 * time.Minute) })
		failDallas(h)
		if got := h.connects(); !slices.Equal(got, []string{"Dallas", "Los Angeles"}) {
			t.Errorf("connects = %q, want Los Angeles tried (its log health is stale)", got)
		}
		if h.logged("LOG_HEALTH") != 0 {
			t.Errorf("stale log health used:\n%s", strings.Join(h.logs(), "\n"))
		}
		h.stop()
	})
}

func TestEveryRemainingDeadTriesFirstAnyway(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		for _, n := range DefaultSettings().Candidates[1:] {
			wd.logErrors[n] = 50
		}
		h := start(t, testSettings(t), wd)
		wd.set(func(w *world) { w.logUpdated = time.Now() })
		failDallas(h)
		if got := h.connects(); !slices.Equal(got, []string{"Dallas", "Los Angeles"}) {
			t.Errorf("connects = %q", got)
		}
		if h.logged("every remaining candidate is marked dead; trying Los Angeles anyway") != 1 {
			t.Errorf("fallback not logged:\n%s", strings.Join(h.logs(), "\n"))
		}
		h.stop()
	})
}

func TestFailedReconnectRetriesThenCascades(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		boom := errors.New("exit 1: proxy failed to start")
		wd.connectErr["Los Angeles"] = []error{boom, boom}
		wd.connectErr["Chicago"] = []error{boom}
		h := start(t, testSettings(t), wd)
		failDallas(h)
		// LA fails: retried once on LA after 10 s; the second failure
		// cascades: Chicago at once, its failure moves to New York at once.
		h.advance(15 * time.Second)
		want := []string{"Dallas", "Los Angeles", "Los Angeles", "Chicago", "New York"}
		if got := h.connects(); !slices.Equal(got, want) {
			t.Errorf("connects = %q, want %q", got, want)
		}
		if h.logged("Cascade: 2 failed reconnects, fast-rotating") != 1 {
			t.Errorf("cascade not logged:\n%s", strings.Join(h.logs(), "\n"))
		}
		h.requireState(StateHealthy)
		if fr := h.w.Status().Counters.FailedReconnects; fr != 0 {
			t.Errorf("failed reconnects = %d after recovery, want 0", fr)
		}
		h.stop()
	})
}

func TestAccountAPIDownDuringReconnectStaysOnNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		h := start(t, testSettings(t), wd)
		h.advance(time.Minute)
		api := errors.Join(surflare.ErrAccountCheck, errors.New("✘ Account check failed"))
		wd.set(func(w *world) { w.proxyDown = true; w.connectErr["Dallas"] = []error{api} })
		h.advance(40 * time.Second)
		want := []string{"Dallas", "Dallas", "Dallas"} // crash -> reconnect fails -> retried, same node
		if got := h.connects(); !slices.Equal(got, want) {
			t.Errorf("connects = %q, want %q", got, want)
		}
		h.requireState(StateHealthy)
		h.stop()
	})
}

func TestProxyCrashReconnectsSameNodeWithoutCutting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		h := start(t, testSettings(t), wd)
		h.advance(time.Minute)
		wd.set(func(w *world) { w.proxyDown = true })
		h.advance(31 * time.Second) // one check sees LOCAL_FAIL: no waiting for the threshold
		if got := h.connects(); !slices.Equal(got, []string{"Dallas", "Dallas"}) {
			t.Errorf("connects = %q", got)
		}
		if cuts := wd.get().cuts; len(cuts) != 0 {
			t.Errorf("cut connections %q on a same-node reconnect", cuts)
		}
		h.requireState(StateHealthy)
		h.stop()
	})
}

func TestDomesticExitRotatesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		h := start(t, testSettings(t), wd)
		h.advance(time.Minute)
		wd.set(func(w *world) { w.domestic["Dallas"] = true })
		h.advance(31 * time.Second)
		if got := h.connects(); !slices.Equal(got, []string{"Dallas", "Los Angeles"}) {
			t.Errorf("connects = %q, want an immediate rotation", got)
		}
		h.stop()
	})
}

func TestStormCooldownAndRecovery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		s := testSettings(t)
		s.ReconnectLimit = 100 // this test is about the storm alone
		h := start(t, s, wd)
		h.advance(time.Minute)
		wd.set(func(w *world) {
			for _, n := range s.Candidates {
				w.dead[n] = true
			}
		})
		// Detection (~60 s), then each failing connect costs phase 2 (60 s):
		// LA twice (retry), then the cascade through the other four.
		h.advance(10 * time.Minute)
		h.requireState(StateCooldown)
		want := []string{"Dallas", "Los Angeles", "Los Angeles", "Chicago", "New York", "Atlanta", "Miami"}
		if got := h.connects(); !slices.Equal(got, want) {
			t.Fatalf("connects = %q, want %q", got, want)
		}
		if h.logged("Storm protection triggered: all 6 candidates failed") != 1 {
			t.Errorf("storm not logged:\n%s", strings.Join(h.logs(), "\n"))
		}
		if !slices.Contains(wd.callsAfterLast("vendor.Connect"), "fw.Set kill-switch") || wd.lastFirewallMode() != "kill-switch" ||
			wd.count("fw.Set stopped") != 0 || wd.count("fw.Set fail-open") != 0 {
			t.Errorf("storm firewall calls wrong (kill switch must stay): %q", wd.get().calls)
		}
		if wd.get().connected != "" {
			t.Error("the vendor still runs a dead node during the cooldown")
		}
		st := h.w.Status()
		if st.Conditions.StormCooldownUntil == nil || st.Counters.Storms != 1 {
			t.Errorf("status signals %+v storms %d", st.Conditions, st.Counters.Storms)
		}

		// Nothing is attempted during the cooldown; Chicago comes back.
		wd.set(func(w *world) { w.dead["Chicago"] = false })
		n := len(h.connects())
		h.advance(5 * time.Minute)
		if len(h.connects()) != n {
			t.Errorf("connect attempted during the cooldown: %q", h.connects())
		}
		// After the cooldown a fresh cycle from Dallas finds Chicago.
		h.advance(10 * time.Minute)
		h.requireState(StateHealthy)
		if st := h.w.Status(); st.Node != "Chicago" {
			t.Errorf("recovered on %s, want Chicago", st.Node)
		}
		if wd.lastFirewallMode() != "lan-proxy" || slices.Contains(wd.callsAfterLast("fw.Set lan-proxy"), "vendor.Connect Chicago") {
			t.Errorf("the LAN is not back in the verified proxy after the cooldown: %q", wd.get().calls)
		}
		h.stop()
	})
}

func TestUserRotateEndsCooldown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		s := testSettings(t)
		s.Candidates = []string{"Dallas", "Miami"}
		h := start(t, s, wd)
		h.advance(time.Minute)
		wd.set(func(w *world) { w.dead["Dallas"], w.dead["Miami"] = true, true })
		h.advance(6 * time.Minute)
		h.requireState(StateCooldown)
		wd.set(func(w *world) { w.dead["Miami"] = false })
		if err := h.w.Rotate(t.Context(), "Miami"); err != nil {
			t.Fatal(err)
		}
		h.advance(time.Second)
		h.requireState(StateHealthy)
		if wd.lastFirewallMode() != "lan-proxy" {
			t.Errorf("the LAN is not back in the proxy after the rotate: %q", wd.get().calls)
		}
		h.stop()
	})
}

func TestReconnectRateLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		s := testSettings(t)
		s.ReconnectLimit = 3
		h := start(t, s, wd) // attempt 1 at t=0
		// A crash loop: the proxy dies 5 s after every connect, before its
		// tunnel passes a check, so every attempt stays counted
		// (refundAttemptLocked). Each attempt's time is kept.
		t0 := time.Now()
		var at []time.Duration
		for time.Since(t0) < time.Hour {
			if n := len(h.connects()); n > len(at) {
				at = append(at, time.Since(t0))
				h.advance(5 * time.Second)
				wd.set(func(w *world) { w.proxyDown = true })
				continue
			}
			h.advance(time.Second)
		}
		if len(at) < 4 {
			t.Fatalf("attempts at %v: want the loop to go on, spaced out", at)
		}
		// The first three go at the checks' pace; beyond the limit each
		// waits 30 s, 1 min, 2 min, … after the last (1/20 of the window,
		// doubling), or until the window has room again.
		for i := 1; i < 3; i++ {
			if gap := at[i] - at[i-1]; gap > time.Minute {
				t.Errorf("attempt %d came %s after the one before: held back within the limit (attempts at %v)", i+1, gap, at)
			}
		}
		if gap := at[3] - at[2]; gap < 30*time.Second {
			t.Errorf("attempt 4 came %s after attempt 3, want the 30 s backoff (attempts at %v)", gap, at)
		}
		if gap := at[4] - at[3]; gap < time.Minute {
			t.Errorf("attempt 5 came %s after attempt 4, want the doubled backoff (attempts at %v)", gap, at)
		}
		// Storm protection holds: 3 at the checks' pace (the start and two
		// reconnects), then 30 s, 1, 2, 4, 8 min and every 10 min after:
		// 12 in the hour, no more than the hard limit of 3 per 10 min that
		// this replaced (18 an hour), never the checks' pace (~100).
		if len(at) > 18 {
			t.Errorf("%d attempts in an hour of a crash loop, want at most 18 (attempts at %v)", len(at), at)
		}
		for i := 8; i < len(at); i++ {
			if gap := at[i] - at[i-1]; gap < s.ReconnectWindow {
				t.Errorf("attempt %d came %s after the one before, want the backoff's cap (%s) by now (attempts at %v)", i+1, gap, s.ReconnectWindow, at)
			}
		}
		if h.logged("attempts without a lasting tunnel; next attempt in 30s") != 1 {
			t.Errorf("rate limit not logged:\n%s", strings.Join(h.logs(), "\n"))
		}
		// While held back nothing claims to reconnect: every "Reconnecting
		// to" line is followed by a connect.
		if r, c := h.logged("Reconnecting to "), len(h.connects()); r > c {
			t.Errorf("%d \"Reconnecting to\" lines for %d connects: the held-back ones claimed to reconnect", r, c)
		}
		if st := h.w.Status(); st.Counters.Storms != 0 {
			t.Errorf("storms %d: a crash loop on one node is not a storm", st.Counters.Storms)
		}
		// The proxy stops crashing: the held-back attempt brings it back.
		wd.set(func(w *world) { w.proxyDown = false })
		h.advance(s.ReconnectWindow + time.Minute)
		h.requireState(StateHealthy)
		h.stop()
	})
}

// A storm over the limit costs a backoff, not the rest of a ten-minute
// window, and once a tunnel lasts the next, unrelated fault goes at once:
// the hard "limit per window" this replaced held a burst of the 30 min
// chaos at shipped timings for 5 min after a run of faults.
func TestReconnectRateLimitLetsALaterFaultGoSoon(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		s := testSettings(t)
		s.ReconnectLimit = 3
		h := start(t, s, wd) // attempt 1
		crash := func() {
			h.advance(5 * time.Second)
			wd.set(func(w *world) { w.proxyDown = true })
			h.advance(s.CheckInterval + 6*time.Second)
		}
		crash() // attempts 2 and 3: a quick crash loop
		crash()
		if n := len(h.connects()); n != 3 {
			t.Fatalf("%d connects, want 3", n)
		}
		crash() // over the limit: 30 s after the last, long before the window (10 min)
		if n := len(h.connects()); n != 4 {
			t.Fatalf("%d connects, want the 4th after the 30 s backoff:\n%s", n, strings.Join(h.logs(), "\n"))
		}
		h.advance(2 * time.Minute) // this tunnel lasts: the storm is over
		h.requireState(StateHealthy)
		crash() // an unrelated fault: no backoff at all
		if n := len(h.connects()); n != 5 || h.logged("Reconnect rate limit") != 0 {
			t.Errorf("%d connects, want the later fault's reconnect at once:\n%s", n, strings.Join(h.logs(), "\n"))
		}
		h.requireState(StateHealthy)
		h.stop()
	})
}

// The WAN's return gives the engine a fresh reconnect budget: the attempts
// before an outage must not hold back the recovery after it (the chaos
// run at shipped timings: a proxy crash right after a WAN outage waited
// 8 min 43 s for the window). Without a WAN outage the limit holds as in
// TestReconnectRateLimit.
func TestReconnectBudgetFreshAfterWANReturns(t *testing.T) {
	for _, via := range []string{"hotplug", "preflight"} {
		t.Run(via, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				wd := newWorld()
				s := testSettings(t)
				// Full when the crash after the WAN's return comes: the
				// preflight's way spends one attempt on the connect after
				// "Preflight clear".
				s.ReconnectLimit = map[string]int{"hotplug": 3, "preflight": 4}[via]
				pf := &fakePreflight{}
				h := start(t, s, wd, withPreflight(pf)) // attempt 1 at t=0
				for range 2 {                           // two proxy crashes: attempts 2 and 3
					h.advance(time.Minute)
					wd.set(func(w *world) { w.proxyDown = true })
					h.advance(31 * time.Second)
				}
				if n := len(h.connects()); n != 3 {
					t.Fatalf("%d connects, want 3", n)
				}
				h.advance(time.Minute)
				switch via {
				case "hotplug":
					if err := h.w.WANDown(context.Background()); err != nil {
						t.Fatal(err)
					}
					h.advance(20 * time.Second)
					if err := h.w.WANUp(context.Background()); err != nil {
						t.Fatal(err)
					}
				case "preflight":
					// The blocker matters once the engine wants to connect:
					// the proxy crashes while the WAN is gone.
					pf.set(&preflight.Finding{Check: preflight.CheckWAN, Severity: preflight.Blocker, Why: "The router has no Internet connection", Fix: "check the modem"})
					h.advance(s.CheckInterval + 5*time.Second)
					wd.set(func(w *world) { w.proxyDown = true })
					h.advance(31 * time.Second)
					if n := len(h.connects()); n != 3 {
						t.Fatalf("%d connects while the WAN is gone, want 3 (not connecting)", n)
					}
					pf.set(nil)
					h.advance(s.CheckInterval + 5*time.Second)
				}
				h.requireState(StateHealthy)
				before := len(h.connects())
				wd.set(func(w *world) { w.proxyDown = true })
				h.advance(31 * time.Second)
				if n := len(h.connects()); n != before+1 {
					t.Errorf("%d connects after the crash that followed the WAN's return, want %d: held back by the budget the outage's attempts used:\n%s",
						n, before+1, strings.Join(h.logs(), "\n"))
				}
				if h.logged("Reconnect rate limit") != 0 {
					t.Errorf("rate limited after the WAN came back:\n%s", strings.Join(h.logs(), "\n"))
				}
				h.requireState(StateHealthy)
				h.stop()
			})
		})
	}
}

// A connect whose tunnel then passed a check was no part of a storm: its
// attempt leaves the window (refundAttemptLocked). Four proxy crashes a
// minute apart, each after its tunnel worked, all reconnect at once with a
// budget of 3; the chaos run at shipped timings had the LAN without a
// tunnel for 5-9 min after six such recoveries in ten minutes.
func TestReconnectBudgetRefundsTunnelsThatWorked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		s := testSettings(t)
		s.ReconnectLimit = 3
		h := start(t, s, wd) // attempt 1 at t=0
		for i := range 4 {
			h.advance(time.Minute) // the tunnel passes its checks
			wd.set(func(w *world) { w.proxyDown = true })
			h.advance(31 * time.Second)
			if n := len(h.connects()); n != i+2 {
				t.Fatalf("crash %d: %d connects, want %d (held back by tunnels that had worked):\n%s", i+1, n, i+2, strings.Join(h.logs(), "\n"))
			}
			h.requireState(StateHealthy)
		}
		if h.logged("Reconnect rate limit") != 0 {
			t.Errorf("rate limited:\n%s", strings.Join(h.logs(), "\n"))
		}
		h.stop()
	})
}

// A rotation the rate limit holds back is logged and counted when it goes,
// not when it is asked for: until then nothing rotates.
func TestRotationHeldByTheRateLimitIsLoggedWhenItGoes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		s := testSettings(t)
		s.ReconnectLimit = 1
		s.ReconnectWindow = time.Hour // the first backoff: 3 min after the last attempt
		h := start(t, s, wd)          // attempt 1, the limit's only free one
		h.advance(time.Second)
		wd.set(func(w *world) { w.dead["Dallas"] = true }) // before any tunnel lasted
		h.advance(100 * time.Second)
		if got, st := h.connects(), h.w.Status(); !slices.Equal(got, []string{"Dallas"}) ||
			h.logged("Node rotation") != 0 || st.Counters.Rotations != 0 || st.Conditions.RateLimitedUntil == nil {
			t.Fatalf("held back: connects %q, rotations %d, rate limited until %v; logs:\n%s",
				got, st.Counters.Rotations, st.Conditions.RateLimitedUntil, strings.Join(h.logs(), "\n"))
		}
		h.advance(2 * time.Minute) // past the backoff (t ≈ 3 min 41 s)
		if got, st := h.connects(), h.w.Status(); !slices.Equal(got, []string{"Dallas", "Los Angeles"}) ||
			h.logged("Node rotation: Dallas -> Los Angeles") != 1 || st.Counters.Rotations != 1 {
			t.Errorf("after the backoff: connects %q, rotations %d; logs:\n%s", got, st.Counters.Rotations, strings.Join(h.logs(), "\n"))
		}
		h.requireState(StateHealthy)
		h.stop()
	})
}
