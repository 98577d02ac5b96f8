package watchdog

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"surflare-watchdog/src/surflare"
)

// intact makes Deps.TunnelIntact answer ok (the kernel holds the tunnel).
func intact(ok bool) func(*Deps) {
	return func(d *Deps) {
		d.TunnelIntact = func(context.Context) (bool, string) {
			if ok {
				return true, "vendor table, fwmark rule, proxy listening"
			}
			return false, "nothing listens on the proxy port"
		}
	}
}

// A restart over a healthy tunnel the kernel holds whole keeps it: no
// connect, no disconnect, the tunnel-ending cleanup skipped, the LAN never
// reset (no kill-switch apply, which tombstones the LAN tproxy), healthy at
// once, and the next check one interval later.
func TestStartupAdoptsHealthyTunnel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		wd.connected, wd.transit = "Dallas", "auto"
		h := start(t, testSettings(t), wd, intact(true))
		h.requireState(StateHealthy)
		calls := wd.get().calls
		for _, c := range calls {
			if strings.HasPrefix(c, "vendor.Connect") || strings.HasPrefix(c, "vendor.Disconnect") ||
				c == "fw.Set kill-switch" || c == "fw.FlushVendor" || strings.HasPrefix(c, "cleanup.") {
				t.Errorf("adopting called %q; calls: %q", c, calls)
			}
		}
		if want := []string{"fw.Set lan-proxy", "vendor.Status", "fw.Set lan-proxy"}; !slices.Equal(calls[:3], want) {
			t.Errorf("calls = %q, want prefix %q", calls, want)
		}
		st := h.w.Status()
		if st.Node != "Dallas" || st.Counters.ConnectAttempts != 0 || st.Exit.Country != "US" {
			t.Errorf("status node %q, connect attempts %d, exit %+v", st.Node, st.Counters.ConnectAttempts, st.Exit)
		}
		if h.logged("Adopted the running tunnel on Dallas via auto: no reconnect") != 1 {
			t.Errorf("adoption not logged:\n%s", strings.Join(h.logs(), "\n"))
		}
		h.advance(31 * time.Second)
		if got := wd.get().checks; got != 2 {
			t.Errorf("%d checks 31 s after adopting, want the look and one more", got)
		}
		h.stop()
	})
}

// Anything less than a whole, healthy tunnel in the configured mode is
// cleaned up and connected anew, as before.
func TestStartupDoesNotAdoptUnlessWholeAndHealthy(t *testing.T) {
	for _, tc := range []struct {
		name   string
		intact bool
		dead   bool
		mode   string
	}{
		{"kernel state incomplete", false, false, ""},
		{"probes fail", true, true, ""},
		{"other mode", true, false, "global"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				wd := newWorld()
				wd.connected, wd.transit = "Dallas", "auto"
				wd.dead["Dallas"] = tc.dead
				s := testSettings(t)
				tweak := []func(*Deps){intact(tc.intact)}
				if tc.mode != "" {
					tweak = append(tweak, func(d *Deps) { d.Vendor = modeVendor{fakeVendor{wd}, tc.mode} })
				}
				h := start(t, s, wd, tweak...)
				h.advance(5 * time.Second)
				calls := wd.get().calls
				if !slices.Contains(calls, "cleanup.stale-proxy") || len(h.connects()) == 0 {
					t.Errorf("no cleanup and reconnect; calls %q", calls)
				}
				// The LAN is reset before the cleanup ends the old tunnel.
				if i, j := slices.Index(calls, "fw.Set kill-switch"), slices.Index(calls, "cleanup.stale-proxy"); i < 0 || i > j {
					t.Errorf("no kill-switch apply before the cleanup; calls %q", calls)
				}
				if h.logged("Adopted") != 0 {
					t.Errorf("adopted anyway:\n%s", strings.Join(h.logs(), "\n"))
				}
				h.stop()
			})
		})
	}
}

// modeVendor reports the tunnel in another mode than the config's.
type modeVendor struct {
	fakeVendor
	mode string
}

func (v modeVendor) Status(ctx context.Context) (st surflare.Status, err error) {
	st, err = v.fakeVendor.Status(ctx)
	st.Mode = v.mode
	return st, err
}

// A handover stop leaves everything to the next instance: no disconnect,
// no firewall change; a plain stop still disconnects.
func TestHandoverStopKeepsTunnel(t *testing.T) {
	for _, handover := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			wd := newWorld()
			h := start(t, testSettings(t), wd)
			h.requireState(StateHealthy)
			if handover {
				if err := h.w.Handover(context.Background()); err != nil {
					t.Fatal(err)
				}
				<-h.done
				synctest.Wait()
			} else {
				h.stop()
			}
			after := wd.callsAfterLast("fw.Set lan-proxy")
			disconnected := slices.Contains(after, "vendor.Disconnect")
			touched := slices.ContainsFunc(after, func(c string) bool { return strings.HasPrefix(c, "fw.") })
			if handover && (disconnected || touched) {
				t.Errorf("handover stop: calls after the tunnel was up %q", after)
			}
			if !handover && !disconnected {
				t.Errorf("plain stop did not disconnect: %q", after)
			}
			if handover && !wd.get().released {
				t.Error("handover stop did not release the instance lock")
			}
		})
	}
}

// The steps adoption keeps running are named as CrashCleanup names them: a
// rename must not silently turn a harmless step off (or, by a new name, on).
func TestAdoptSafeStepsExist(t *testing.T) {
	var names []string
	for _, st := range CrashCleanup(CleanupHooks{RunDir: t.TempDir(), FlushVendor: func(context.Context) error { return nil },
		OrphanedTrace: func(context.Context) error { return nil }}) {
		names = append(names, st.Name)
	}
	for n := range adoptSafeSteps {
		if !slices.Contains(names, n) {
			t.Errorf("adoptSafeSteps names %q, which CrashCleanup does not have (%q)", n, names)
		}
	}
	for _, n := range []string{"stale proxy holding the proxy port", "flush vendor table"} {
		if adoptSafeSteps[n] {
			t.Errorf("%q ends the tunnel, yet it runs while adopting", n)
		}
	}
}
