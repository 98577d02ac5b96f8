package watchdog

import (
	"context"
	"errors"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"surflare-watchdog/src/surflare"
)

func TestDiagModeIdlesAndKeepsTables(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		h := start(t, testSettings(t), wd)
		h.advance(time.Minute)
		if err := h.w.SetDiag(t.Context(), true); err != nil {
			t.Fatal(err)
		}
		h.requireState(StateDiag)
		before := wd.get()
		wd.set(func(w *world) { w.dead["Dallas"] = true })
		h.advance(10 * time.Minute)
		after := wd.get()
		if after.checks != before.checks {
			t.Errorf("%d checks ran in diag mode", after.checks-before.checks)
		}
		if got := after.calls[len(before.calls):]; len(got) != 0 {
			t.Errorf("diag mode touched tables or the vendor: %q", got)
		}
		if err := h.w.Rotate(t.Context(), "Miami"); !errors.Is(err, ErrDiag) {
			t.Errorf("rotate in diag: %v, want ErrDiag", err)
		}
		// SIGUSR1 still runs a check, for diagnosis only.
		if err := h.w.Signal(t.Context(), syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
		h.advance(time.Second)
		if wd.get().checks != before.checks+1 {
			t.Error("check-now did not run in diag mode")
		}
		if c := h.connects(); len(c) != 1 {
			t.Errorf("diag check acted: connects %q", c)
		}
		// Off: checks resume at once and the dead node is rotated away.
		if err := h.w.SetDiag(t.Context(), false); err != nil {
			t.Fatal(err)
		}
		h.advance(time.Second)
		if wd.get().checks != before.checks+2 {
			t.Error("no immediate check after diag off")
		}
		h.advance(time.Minute)
		if c := h.connects(); !slices.Equal(c, []string{"Dallas", "Los Angeles"}) {
			t.Errorf("connects = %q", c)
		}
		h.stop()
	})
}

func TestWANDownPausesProbingAndRotation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		h := start(t, testSettings(t), wd)
		h.advance(time.Minute)
		if err := h.w.WANDown(t.Context()); err != nil {
			t.Fatal(err)
		}
		h.requireState(StateWANDown)
		wd.set(func(w *world) { w.dead["Dallas"] = true })
		before := wd.get().checks
		h.advance(10 * time.Minute)
		if wd.get().checks != before || len(h.connects()) != 1 {
			t.Errorf("probing or rotation while the WAN is down: %d checks, connects %q", wd.get().checks-before, h.connects())
		}
		if err := h.w.WANUp(t.Context()); err != nil {
			t.Fatal(err)
		}
		h.advance(time.Second)
		if wd.get().checks != before+1 {
			t.Error("no immediate check after WAN up")
		}
		h.advance(time.Minute)
		if c := h.connects(); !slices.Equal(c, []string{"Dallas", "Los Angeles"}) {
			t.Errorf("connects = %q", c)
		}
		h.stop()
	})
}

func TestWANDownSeenByProbesDoesNotRotate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		h := start(t, testSettings(t), wd)
		h.advance(time.Minute)
		wd.set(func(w *world) { w.wanDown = true })
		h.advance(5 * time.Minute)
		h.requireState(StateWANDown)
		if c := h.connects(); len(c) != 1 {
			t.Errorf("rotated during an ISP outage: %q", c)
		}
		if h.logged("WAN egress down: pausing rotation") != 1 {
			t.Errorf("logs:\n%s", strings.Join(h.logs(), "\n"))
		}
		wd.set(func(w *world) { w.wanDown = false })
		h.advance(15 * time.Second) // still probing at the degraded interval
		h.requireState(StateHealthy)
		h.stop()
	})
}

func TestWANDownDuringConnectRetriesOnUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		wd.dead["Dallas"] = true // phase 2 keeps polling
		h := start(t, testSettings(t), wd)
		h.advance(5 * time.Second)
		h.w.WANDown(t.Context())
		wd.set(func(w *world) { w.dead["Dallas"] = false })
		h.advance(5 * time.Minute)
		if fr := h.w.Status().Counters.FailedReconnects; fr != 0 {
			t.Errorf("abandoned connect counted as %d failed reconnects", fr)
		}
		h.w.WANUp(t.Context())
		h.advance(5 * time.Second)
		h.requireState(StateHealthy)
		if c := h.connects(); !slices.Equal(c, []string{"Dallas", "Dallas"}) {
			t.Errorf("connects = %q", c)
		}
		h.stop()
	})
}

func TestStopKeepsKillSwitchThenProcessesThenLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		h := start(t, testSettings(t), wd)
		h.advance(time.Minute)
		n := len(wd.get().calls)
		h.stop()
		got := wd.get().calls[n:]
		want := []string{"fw.Set stopped", "vendor.Disconnect", "lock.Release"}
		if !slices.Equal(got, want) {
			t.Errorf("stop calls = %q, want %q", got, want)
		}
		if _, err := h.w.Status(), h.w.Check(t.Context()); !errors.Is(err, ErrNotRunning) {
			t.Errorf("command after stop: %v", err)
		}
	})
}

func TestStopOpenOnRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		h := start(t, testSettings(t), wd)
		if err := h.w.Shutdown(t.Context(), true); err != nil {
			t.Fatal(err)
		}
		if err := <-h.done; err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if wd.count("fw.Set stopped-open") != 1 {
			t.Errorf("calls %q", wd.get().calls)
		}
		h.requireState(StateStopped)
	})
}

func TestStopIsBoundedWhileLoginHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		wd.status = surflare.StateAuthNeeded
		wd.loginHang = true
		h := start(t, testSettings(t), wd)
		h.advance(10 * time.Second)
		t0 := time.Now()
		h.stop()
		if d := time.Since(t0); d >= 5*time.Second {
			t.Errorf("stop took %v, want < 5 s", d)
		}
		if !wd.get().released {
			t.Error("lock not released")
		}
	})
}

func TestSignalsAsCommands(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		reloaded := testSettings(t)
		reloaded.Node = "Miami"
		loads := 0
		h := start(t, testSettings(t), wd, func(d *Deps) {
			d.LoadSettings = func() (Settings, error) { loads++; return reloaded, nil }
		})
		h.advance(5 * time.Second)
		ctx := t.Context()
		before := wd.get().checks
		h.w.Signal(ctx, syscall.SIGUSR1)
		h.advance(time.Second)
		if wd.get().checks != before+1 {
			t.Error("SIGUSR1 did not check now")
		}
		h.w.Signal(ctx, syscall.SIGUSR2)
		h.requireState(StateDiag)
		h.w.Signal(ctx, syscall.SIGUSR2)
		h.advance(time.Second)
		h.requireState(StateHealthy)
		h.w.Signal(ctx, syscall.SIGHUP)
		h.advance(time.Second)
		if loads != 1 || h.w.Status().Node != "Miami" {
			t.Errorf("SIGHUP: %d loads, node %s; want the reloaded node Miami", loads, h.w.Status().Node)
		}
		h.w.Signal(ctx, syscall.SIGTERM)
		<-h.done
		synctest.Wait()
		if wd.count("fw.Set stopped") != 1 {
			t.Errorf("SIGTERM did not stop with the kill switch kept: %q", wd.get().calls)
		}
	})
}

func TestReloadFailureKeepsSettings(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		h := start(t, testSettings(t), wd, func(d *Deps) {
			d.LoadSettings = func() (Settings, error) { return Settings{}, errors.New("/etc/config/surflare:3: bad") }
		})
		if err := h.w.ReloadFromSource(t.Context()); err == nil || !strings.Contains(err.Error(), ":3:") {
			t.Errorf("err = %v", err)
		}
		bad := testSettings(t)
		bad.CheckInterval = 0
		if err := h.w.Reload(t.Context(), bad); err == nil {
			t.Error("invalid settings accepted")
		}
		h.requireState(StateHealthy)
		h.stop()
	})
}

func TestManualRotateAndReconnect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		wd.logErrors["Los Angeles"] = 99
		h := start(t, testSettings(t), wd)
		ctx := t.Context()
		if err := h.w.Rotate(ctx, ""); err != nil { // next usable candidate
			t.Fatal(err)
		}
		h.advance(time.Second)
		if err := h.w.Rotate(ctx, "Atlanta"); err != nil {
			t.Fatal(err)
		}
		h.advance(time.Second)
		if err := h.w.Reconnect(ctx); err != nil {
			t.Fatal(err)
		}
		h.advance(time.Second)
		want := []string{"Dallas", "Chicago", "Atlanta", "Atlanta"}
		if c := h.connects(); !slices.Equal(c, want) {
			t.Errorf("connects = %q, want %q", c, want)
		}
		if cuts := wd.get().cuts; !slices.Equal(cuts, []string{"Dallas", "Chicago"}) {
			t.Errorf("cuts = %q", cuts)
		}
		h.stop()
	})
}

func TestStartupFailsWithoutKillSwitch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		wd.armErr = errors.New("netlink: operation not permitted")
		w, err := New(testSettings(t), Deps{Vendor: fakeVendor{wd}, Firewall: fakeFirewall{wd}, Prober: fakeProber{wd}, Lock: fakeLock{wd}})
		if err != nil {
			t.Fatal(err)
		}
		err = w.Run(context.Background())
		if err == nil || !strings.Contains(err.Error(), "installing kill switch") {
			t.Errorf("Run = %v", err)
		}
		if slices.Contains(wd.get().calls, "vendor.Connect Dallas") {
			t.Error("connected without a kill switch")
		}
		if wd.count("fw.Set stopped") != 1 || !wd.get().released {
			t.Errorf("no orderly stop after a failed startup: %q", wd.get().calls)
		}
	})
}

func TestSubscribersNeverBlock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		h := start(t, testSettings(t), wd)
		slow, cancel := h.w.Subscribe() // never read
		defer cancel()
		h.advance(time.Hour) // > 64 events
		if h.w.Status().Counters.DroppedEvents == 0 {
			t.Error("no events dropped for a subscriber that never reads")
		}
		if len(slow) != subscriberBuffer {
			t.Errorf("slow subscriber holds %d events", len(slow))
		}
		var health, transitions int
		h.mu.Lock()
		for _, e := range h.events {
			switch e.Type {
			case EventHealth:
				health++
			case EventTransition:
				transitions++
			}
		}
		h.mu.Unlock()
		if health < 100 || transitions < 2 {
			t.Errorf("reading subscriber got %d health and %d transition events", health, transitions)
		}
		h.stop()
	})
}

func TestHandleCommand(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		h := start(t, testSettings(t), wd)
		ctx := t.Context()
		out, err := h.w.HandleCommand(ctx, "status", nil)
		if err != nil || out.(Status).State != StateHealthy {
			t.Fatalf("status = %v, %v", out, err)
		}
		if _, err := h.w.HandleCommand(ctx, "diag", map[string]any{"on": "on"}); err != nil {
			t.Fatal(err)
		}
		h.requireState(StateDiag)
		if _, err := h.w.HandleCommand(ctx, "rotate", map[string]any{"node": "Miami"}); !errors.Is(err, ErrDiag) {
			t.Errorf("rotate in diag: %v", err)
		}
		if _, err := h.w.HandleCommand(ctx, "diag", map[string]any{"on": false}); err != nil {
			t.Fatal(err)
		}
		if _, err := h.w.HandleCommand(ctx, "rotate", map[string]any{"node": "Los Angeles"}); err != nil {
			t.Fatal(err)
		}
		h.advance(2 * time.Second)
		if n := h.w.Status().Node; n != "Los Angeles" {
			t.Errorf("node %s after rotate", n)
		}
		for _, bad := range []struct {
			cmd  string
			args map[string]any
		}{{"frobnicate", nil}, {"diag", map[string]any{"on": "maybe"}}, {"rotate", map[string]any{"node": 7}}, {"wan", nil}} {
			if _, err := h.w.HandleCommand(ctx, bad.cmd, bad.args); err == nil {
				t.Errorf("%s %v accepted", bad.cmd, bad.args)
			}
		}
		if _, err := h.w.HandleCommand(ctx, "wan", map[string]any{"up": false}); err != nil {
			t.Fatal(err)
		}
		h.requireState(StateWANDown)
		if _, err := h.w.HandleCommand(ctx, "stop", map[string]any{"open": true}); err != nil {
			t.Fatal(err)
		}
		<-h.done
		synctest.Wait()
		if wd.count("fw.Set stopped-open") != 1 {
			t.Errorf("stop open: %q", wd.get().calls)
		}
	})
}
