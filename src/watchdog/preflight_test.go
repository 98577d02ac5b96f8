package watchdog

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"surflare-watchdog/src/preflight"
)

// fakePreflight answers with whatever finding the test set.
type fakePreflight struct {
	mu   sync.Mutex
	f    *preflight.Finding
	runs int
	// from, when set, is the run from which on f is reported (earlier
	// runs are clean): a cause that appears between two runs.
	from int
}

func (p *fakePreflight) set(f *preflight.Finding) { p.mu.Lock(); p.f = f; p.mu.Unlock() }

func (p *fakePreflight) run(context.Context) preflight.Report {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.runs++
	r := preflight.Report{At: time.Now()}
	if p.f != nil && p.runs >= p.from {
		r.Findings = []preflight.Finding{*p.f}
	}
	return r
}

var (
	noVendor = &preflight.Finding{Check: preflight.CheckVendor, Severity: preflight.Blocker,
		Why: "Surflare client not found at /usr/bin/surflare", Fix: "install the Surflare client first",
		Detail: "stat /usr/bin/surflare: no such file or directory"}
	noAccount = &preflight.Finding{Check: preflight.CheckCredentials, Severity: preflight.Blocker,
		Why: "No Surflare account is set up on this router", Fix: "enter your Surflare e-mail and password"}
)

func withPreflight(p *fakePreflight) func(*Deps) {
	return func(d *Deps) { d.Preflight = p.run }
}

// noNodeBlamed reports a node marked failed or a connect attempt made.
func noNodeBlamed(h *harness) {
	h.t.Helper()
	st := h.w.Status()
	if n := len(h.connects()); n != 0 || st.Counters.ConnectAttempts != 0 {
		h.t.Errorf("%d vendor connects, %d attempts counted; want none while blocked", n, st.Counters.ConnectAttempts)
	}
	for _, c := range st.Candidates {
		if c.Failed {
			h.t.Errorf("candidate %s marked failed for a local cause", c.Node)
		}
	}
}

// A first start without the vendor client: no node is tried or blamed,
// the why line names the client, the log says it in plain words, the
// kill switch stays armed, and `check` after installing it connects at
// once.
func TestPreflightBlockerTriesNoNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		pf := &fakePreflight{f: noVendor}
		h := start(t, usedRouter(t), wd, withPreflight(pf))
		h.advance(2 * time.Minute) // several check intervals: still nothing tried
		h.requireState(StateBlocked)
		noNodeBlamed(h)
		st := h.w.Status()
		if !strings.Contains(st.Why.Line, "Surflare client not found at /usr/bin/surflare") || st.Why.Severity != WhyAction {
			t.Errorf("why = %+v, want the missing client, severity action", st.Why)
		}
		if !strings.Contains(st.Why.Detail, "preflight=vendor_client") || strings.Contains(st.Why.Line, "vendor_client") {
			t.Errorf("why = %+v: the check's code belongs in detail only", st.Why)
		}
		if h.logged("Not connecting: Surflare client not found at /usr/bin/surflare — install") != 1 {
			t.Errorf("want one plain log line for the blocker:\n%s", strings.Join(h.logs(), "\n"))
		}
		if m := wd.lastFirewallMode(); m != "kill-switch" {
			t.Errorf("firewall %s while blocked, want kill-switch", m)
		}
		if err := h.w.Rotate(context.Background(), "Dallas"); !errors.Is(err, ErrBlocked) {
			t.Errorf("rotate while blocked = %v, want ErrBlocked", err)
		}
		if st.Preflight == nil || len(st.Preflight.Findings) != 1 {
			t.Errorf("status preflight = %+v, want the finding", st.Preflight)
		}

		pf.set(nil) // the client is installed
		if err := h.w.Check(context.Background()); err != nil {
			t.Fatal(err)
		}
		if st := h.w.Status(); st.State != StateConnecting {
			t.Errorf("right after check the state is %s, want connecting: check runs the preflight at once", st.State)
		}
		h.advance(5 * time.Second)
		h.requireState(StateHealthy)
		if got := h.connects(); len(got) != 1 {
			t.Errorf("connects after the fix = %q, want one", got)
		}
		if st := h.w.Status(); st.Why.Severity != WhyOK || !strings.Contains(st.Why.Line, "Internet is working through") {
			t.Errorf("why = %+v once healthy", st.Why)
		}
		h.stop()
	})
}

// The cause goes away by itself (the WAN comes back): the next preflight,
// one check interval later, clears it without any command.
func TestPreflightRetriesEveryCheckInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		wan := &preflight.Finding{Check: preflight.CheckWAN, Severity: preflight.Blocker, Why: "The router has no Internet connection", Fix: "check the modem"}
		pf := &fakePreflight{f: wan}
		s := testSettings(t)
		h := start(t, s, wd, withPreflight(pf))
		h.requireState(StateWANDown)
		if st := h.w.Status(); !strings.Contains(st.Why.Line, "(WAN down) — check the modem") || !strings.Contains(st.Why.Detail, "preflight=wan") {
			t.Errorf("why = %+v", st.Why)
		}
		noNodeBlamed(h)
		runs := pf.runs
		pf.set(nil)
		h.advance(s.CheckInterval + 5*time.Second)
		if pf.runs <= runs {
			t.Errorf("preflight ran %d times in a check interval, want again", pf.runs-runs)
		}
		h.requireState(StateHealthy)
		noFailed := true
		for _, c := range h.w.Status().Candidates {
			noFailed = noFailed && !c.Failed
		}
		if !noFailed || h.logged("Preflight clear: wan fixed; connecting") != 1 {
			t.Errorf("want a clear line and no failed node:\n%s", strings.Join(h.logs(), "\n"))
		}
		h.stop()
	})
}

// A fresh install without an account does not lock the LAN: the kill
// switch is off (and the why line says so) until the account is set up,
// then it is armed before the first connect.
func TestPreflightFreshInstallWithoutAccountLeavesLANOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		pf := &fakePreflight{f: noAccount}
		h := start(t, testSettings(t), wd, withPreflight(pf))
		h.requireState(StateBlocked)
		noNodeBlamed(h)
		if m := wd.lastFirewallMode(); m != "fail-open" {
			t.Errorf("firewall %s on a fresh install without an account, want fail-open", m)
		}
		if st := h.w.Status(); !strings.Contains(st.Why.Line, "No Surflare account") || !strings.Contains(st.Why.Line, "kill switch is off") {
			t.Errorf("why = %+v", st.Why)
		}
		h.stop()
	})
}

// A fresh install without the client is open too (the client's download
// needs the Internet); a WAN or kernel blocker on it keeps the kill switch.
func TestPreflightFreshInstallOpenOnlyForWhatSetUpLacks(t *testing.T) {
	kernel := &preflight.Finding{Check: preflight.CheckKernel, Severity: preflight.Blocker, Why: "The router's kernel lacks parts", Fix: "opkg install"}
	for _, c := range []struct {
		f    *preflight.Finding
		want string
	}{{noVendor, "fail-open"}, {noAccount, "fail-open"}, {kernel, "kill-switch"}} {
		synctest.Test(t, func(t *testing.T) {
			wd := newWorld()
			h := start(t, testSettings(t), wd, withPreflight(&fakePreflight{f: c.f}))
			if m := wd.lastFirewallMode(); m != c.want {
				t.Errorf("%s on a fresh install: firewall %s, want %s", c.f.Check, m, c.want)
			}
			noNodeBlamed(h)
			h.stop()
		})
	}
}

// Stopping a fresh install without an account leaves its LAN open: there
// was no kill switch to keep.
func TestPreflightFreshInstallStopsOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		h := start(t, testSettings(t), wd, withPreflight(&fakePreflight{f: noAccount}))
		h.requireState(StateBlocked)
		h.stop()
		if m := wd.lastFirewallMode(); m != "stopped-open" {
			t.Errorf("firewall %s after stopping a fresh install without an account, want stopped-open", m)
		}
	})
}

// Setting the account up arms the kill switch before the first connect.
func TestPreflightAccountSetUpArmsBeforeConnecting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		pf := &fakePreflight{f: noAccount}
		h := start(t, testSettings(t), wd, withPreflight(pf))
		pf.set(nil)
		if err := h.w.Check(context.Background()); err != nil {
			t.Fatal(err)
		}
		h.advance(5 * time.Second)
		h.requireState(StateHealthy)
		calls := wd.get().calls
		armed, connect := -1, -1
		for i, c := range calls {
			if c == "fw.Set kill-switch" && armed < 0 && i > indexOf(calls, "fw.Set fail-open") {
				armed = i
			}
			if strings.HasPrefix(c, "vendor.Connect ") && connect < 0 {
				connect = i
			}
		}
		if armed < 0 || connect < armed {
			t.Errorf("the kill switch must be re-armed before the first connect: %q", calls)
		}
		h.stop()
	})
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return len(s)
}

// A log line's attributes reach subscribers (the web log): the err of a
// failure is where its cause is.
func TestLogEventsCarryFields(t *testing.T) {
	got := logFields([]any{"err", errors.New("fork/exec /usr/bin/surflare: no such file or directory"), "n", 3})
	if got["err"] != "fork/exec /usr/bin/surflare: no such file or directory" || got["n"] != "3" || len(got) != 2 {
		t.Errorf("fields = %q", got)
	}
	if logFields(nil) != nil {
		t.Error("no args: want no fields")
	}
}

// usedRouter: settings whose memory file says the tunnel worked before.
func usedRouter(t *testing.T) Settings {
	s := testSettings(t)
	s.MemoryFile = filepath.Join(t.TempDir(), MemoryFileName)
	writeMemory(t, s.MemoryFile, memory{Node: "Dallas", Transit: "auto", ConfigTransit: "auto", At: time.Now().Add(-2 * time.Hour)})
	return s
}

// A router that has had a working tunnel keeps the kill switch armed when
// its account goes missing: offline, nothing leaks.
func TestPreflightMissingAccountOnAUsedRouterKeepsKillSwitch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		h := start(t, usedRouter(t), wd, withPreflight(&fakePreflight{f: noAccount}))
		h.requireState(StateBlocked)
		noNodeBlamed(h)
		if n := wd.count("fw.Set fail-open"); n != 0 {
			t.Errorf("the kill switch was dropped %d times on a router that worked before", n)
		}
		if st := h.w.Status(); strings.Contains(st.Why.Line, "kill switch is off") {
			t.Errorf("why = %q, but the kill switch is armed", st.Why.Line)
		}
		h.stop()
	})
}

// The client disappears while the tunnel runs and then the node fails its
// checks: the next preflight finds the local cause, and the watchdog
// neither rotates nor marks the node failed.
func TestPreflightLocalCauseAtRuntimeBlamesNoNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		pf := &fakePreflight{}
		h := start(t, testSettings(t), wd, withPreflight(pf))
		h.requireState(StateHealthy)
		before := len(h.connects())
		pf.set(noVendor)
		failDallas(h)
		st := h.w.Status()
		if got := h.connects(); len(got) != before || st.Counters.Rotations != 0 {
			t.Errorf("connects %q, rotations %d after the client vanished: want no new connect", got, st.Counters.Rotations)
		}
		for _, c := range st.Candidates {
			if c.Failed {
				t.Errorf("candidate %s marked failed for a local cause", c.Node)
			}
		}
		if !strings.Contains(st.Why.Line, "Surflare client not found") {
			t.Errorf("why = %q, want the local cause", st.Why.Line)
		}
		h.stop()
	})
}

// The client disappears between two preflight runs and a connect fails:
// before the node is blamed the preflight runs again, and the node is
// neither marked failed nor counted as a failed reconnect.
func TestPreflightFailedConnectWithLocalCauseBlamesNoNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		pf := &fakePreflight{}
		h := start(t, testSettings(t), wd, withPreflight(pf))
		h.requireState(StateHealthy)
		pf.mu.Lock()
		pf.f, pf.from = noVendor, pf.runs+2 // clean for the rotate's own run, blocked from the next
		pf.mu.Unlock()
		wd.set(func(w *world) {
			w.connectErr["Los Angeles"] = []error{errors.New("fork/exec /usr/bin/surflare: no such file or directory")}
		})
		if err := h.w.Rotate(context.Background(), "Los Angeles"); err != nil {
			t.Fatal(err)
		}
		h.advance(5 * time.Second)
		st := h.w.Status()
		for _, c := range st.Candidates {
			if c.Failed {
				t.Errorf("candidate %s marked failed for a local cause", c.Node)
			}
		}
		if st.Counters.FailedReconnects != 0 || st.State != StateBlocked {
			t.Errorf("state %s, failed reconnects %d: want blocked, none counted", st.State, st.Counters.FailedReconnects)
		}
		if h.logged("Connect to Los Angeles failed: the cause is on this router") != 1 {
			t.Errorf("no plain line for the failed connect:\n%s", strings.Join(h.logs(), "\n"))
		}
		h.stop()
	})
}

// The WAN comes back (hotplug): the preflight runs at once and the
// watchdog connects without waiting for the next check interval.
func TestPreflightWANUpConnectsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		wan := &preflight.Finding{Check: preflight.CheckWAN, Severity: preflight.Blocker, Why: "The router has no Internet connection", Fix: "check the modem"}
		pf := &fakePreflight{f: wan}
		h := start(t, testSettings(t), wd, withPreflight(pf))
		ctx := context.Background()
		if err := h.w.WANDown(ctx); err != nil {
			t.Fatal(err)
		}
		h.advance(time.Second)
		pf.set(nil)
		if err := h.w.WANUp(ctx); err != nil {
			t.Fatal(err)
		}
		h.advance(2 * time.Second) // far less than the 30 s check interval
		h.requireState(StateHealthy)
		h.stop()
	})
}
