package watchdog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"surflare-watchdog/src/health"
	"surflare-watchdog/src/surflare"
)

func TestMain(m *testing.M) {
	// The log lines are asserted through Subscribe; keep test output quiet
	// unless asked.
	if os.Getenv("WATCHDOG_TEST_LOG") == "" {
		slog.SetDefault(slog.New(slog.NewTextHandler(discard{}, nil)))
	}
	os.Exit(m.Run())
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// world is the simulated router, vendor and internet behind every fake.
type world struct {
	mu sync.Mutex
	t0 time.Time

	calls      []string // ordered vendor and firewall calls
	connected  string   // node the vendor runs, "" = down
	dead       map[string]bool
	blackhole  map[string]bool // nodes whose probes hang until their timeout (a silent black-hole)
	domestic   map[string]bool
	connectErr map[string][]error // queued errors per node; nil entry = success
	status     surflare.State     // forced status ("" = derive)
	proxyDown  bool               // the proxy process crashed
	wanDown    bool               // probes see the WAN itself down
	authGone   bool               // the session expired: the tunnel stops working
	logins     []error            // queued login results; empty = success
	loginHang  bool               // login blocks until cancelled
	loginAt    []time.Duration    // when Login was called, since t0
	checks     int
	checkAt    []time.Duration
	logErrors  map[string]int
	logUpdated time.Time
	cuts       []string
	armErr     error
	released   bool

	transit    string             // transit of the running tunnel
	badTransit map[string]bool    // tunnels via these transits carry nothing
	connectAt  []time.Duration    // when Connect was called, since t0
	pairs      map[string]pairErr // per "NODE via TRANSIT" urltest errors (fakePairs)
	urltest    []string           // transits a running proxy urltests (fakePairs); nil = none
	proxySince time.Time          // when the running proxy started
}

func newWorld() *world {
	return &world{t0: time.Now(), dead: map[string]bool{}, blackhole: map[string]bool{}, domestic: map[string]bool{},
		connectErr: map[string][]error{}, logErrors: map[string]int{}, logUpdated: time.Now(),
		badTransit: map[string]bool{}, pairs: map[string]pairErr{}}
}

func (w *world) call(s string) {
	w.calls = append(w.calls, s)
}

func (w *world) since() time.Duration { return time.Since(w.t0) }

// set changes the world under its lock.
func (w *world) set(f func(w *world)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f(w)
}

func (w *world) get() *world { // snapshot of the scalar fields
	w.mu.Lock()
	defer w.mu.Unlock()
	c := &world{calls: slices.Clone(w.calls), connected: w.connected, checks: w.checks,
		loginAt: slices.Clone(w.loginAt), cuts: slices.Clone(w.cuts), released: w.released,
		checkAt: slices.Clone(w.checkAt), connectAt: slices.Clone(w.connectAt), transit: w.transit}
	return c
}

func (w *world) count(prefix string) int {
	n := 0
	for _, c := range w.get().calls {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

// vendor fake.
type fakeVendor struct{ w *world }

func (v fakeVendor) Status(ctx context.Context) (surflare.Status, error) {
	w := v.w
	w.mu.Lock()
	defer w.mu.Unlock()
	w.call("vendor.Status")
	switch {
	case w.status != "":
		return surflare.Status{State: w.status, Reason: string(w.status)}, nil
	case w.authGone:
		return surflare.Status{State: surflare.StateAuthNeeded, Reason: "session expired"}, nil
	case w.connected != "":
		return surflare.Status{State: surflare.StateConnected, Node: w.connected, Transit: w.transit}, nil
	}
	return surflare.Status{State: surflare.StateDisconnected}, nil
}

func (v fakeVendor) Connect(ctx context.Context, node, mode, transit string) error {
	w := v.w
	w.mu.Lock()
	defer w.mu.Unlock()
	w.call("vendor.Connect " + node)
	w.connectAt = append(w.connectAt, w.since())
	if q := w.connectErr[node]; len(q) > 0 {
		err := q[0]
		w.connectErr[node] = q[1:]
		if err != nil {
			return err
		}
	}
	w.connected, w.transit = node, transit
	w.proxySince = time.Now()
	w.proxyDown = false
	return nil
}

func (v fakeVendor) Disconnect(ctx context.Context) error {
	w := v.w
	w.mu.Lock()
	defer w.mu.Unlock()
	w.call("vendor.Disconnect")
	w.connected = ""
	return nil
}

func (v fakeVendor) Login(ctx context.Context) error {
	w := v.w
	w.mu.Lock()
	w.call("vendor.Login")
	w.loginAt = append(w.loginAt, w.since())
	hang := w.loginHang
	var err error
	if len(w.logins) > 0 {
		err = w.logins[0]
		w.logins = w.logins[1:]
	}
	if err == nil && !hang {
		w.authGone = false
		if w.status == surflare.StateAuthNeeded {
			w.status = ""
		}
	}
	w.mu.Unlock()
	if hang {
		<-ctx.Done()
		return ctx.Err()
	}
	time.Sleep(2 * time.Second) // a login takes a while
	return err
}

// firewall fake.
type fakeFirewall struct{ w *world }

func (f fakeFirewall) rec(s string) {
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	f.w.call(s)
}
func (f fakeFirewall) Set(_ context.Context, mode FirewallMode) error {
	f.rec("fw.Set " + mode.String())
	if mode != FirewallKillSwitch {
		return nil
	}
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	return f.w.armErr
}
func (f fakeFirewall) FlushVendor(context.Context) error { f.rec("fw.FlushVendor"); return nil }

// lastFirewallMode is the mode of the last fw.Set call, "" when none.
func (w *world) lastFirewallMode() string {
	calls := w.get().calls
	for i := len(calls) - 1; i >= 0; i-- {
		if m, ok := strings.CutPrefix(calls[i], "fw.Set "); ok {
			return m
		}
	}
	return ""
}

// callsAfterLast are the calls after the last one starting with prefix.
func (w *world) callsAfterLast(prefix string) []string {
	calls := w.get().calls
	for i := len(calls) - 1; i >= 0; i-- {
		if strings.HasPrefix(calls[i], prefix) {
			return calls[i+1:]
		}
	}
	return nil
}

// prober fake: the outcome follows the world.
type fakeProber struct{ w *world }

func (p fakeProber) Local(ctx context.Context) health.Result {
	w := p.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.connected == "" || w.proxyDown {
		return health.Result{Outcome: health.LocalFail, Reason: "proxy process not running"}
	}
	return health.Result{Outcome: health.OK}
}

// fakeProbeTimeout is the fake's configured probe timeout: what a probe
// of a black-holed node waits before failing, unless the check is a
// confirming one (health.WithProbeTimeout).
const fakeProbeTimeout = 5 * time.Second

func (p fakeProber) Check(ctx context.Context) health.Result {
	w := p.w
	w.mu.Lock()
	silent := w.connected != "" && w.blackhole[w.connected]
	w.mu.Unlock()
	if silent {
		d := fakeProbeTimeout
		if c, ok := health.ProbeTimeoutFrom(ctx); ok && c < d {
			d = c
		}
		// Nothing answers: every probe runs into its timeout, or into the
		// check's bound when that tightens (health.ProbeBound).
		end := time.Now().Add(d)
		b := health.ProbeBoundFrom(ctx)
		for {
			var changed <-chan struct{}
			if b != nil {
				dl, ok, ch := b.Watch()
				if ok && dl.Before(end) {
					end = dl
				}
				changed = ch
			}
			t := time.NewTimer(time.Until(end))
			select {
			case <-t.C:
			case <-changed:
				t.Stop()
				continue
			}
			break
		}
		w.mu.Lock()
		w.checks++
		w.checkAt = append(w.checkAt, w.since())
		w.mu.Unlock()
		return health.Result{Outcome: health.ProxyBroken, Reason: "no probe answered (timeout)"}
	}
	time.Sleep(200 * time.Millisecond) // probes take a moment
	if ctx.Err() != nil {
		return health.Result{Outcome: health.ProxyBroken, Reason: "cancelled"}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.checks++
	w.checkAt = append(w.checkAt, w.since())
	n := w.connected
	switch {
	case n == "" || w.proxyDown:
		return health.Result{Outcome: health.LocalFail, Reason: "proxy process not running"}
	case w.wanDown:
		return health.Result{Outcome: health.LocalFail, WANDown: true, Reason: "WAN egress down"}
	case w.dead[n] || w.authGone || w.badTransit[w.transit]:
		return health.Result{Outcome: health.ProxyBroken, Reason: "no probe answered"}
	case w.domestic[n]:
		return health.Result{Outcome: health.DomesticExit, ExitCountry: "CN", ExitIP: "198.18.2.2", Reason: "domestic"}
	}
	return health.Result{Outcome: health.OK, ExitCountry: "US", ExitIP: "198.18.20." + fmt.Sprint(len(n)), Reason: "ok"}
}

type fakeNodeHealth struct{ w *world }

func (h fakeNodeHealth) Errors(node, transit string) (int, time.Time, bool) {
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	n, ok := h.w.logErrors[node]
	return n, h.w.logUpdated, ok
}

type fakeKiller struct{ w *world }

func (k fakeKiller) CutConnections(_ context.Context, old string) error {
	k.w.mu.Lock()
	defer k.w.mu.Unlock()
	k.w.cuts = append(k.w.cuts, old)
	return nil
}

type fakeNetwork struct{}

func (fakeNetwork) ISPAddr(context.Context) (netip.Addr, error) {
	return netip.MustParseAddr("198.18.2.2"), nil
}

type fakeLock struct{ w *world }

func (l fakeLock) Release() error {
	l.w.mu.Lock()
	defer l.w.mu.Unlock()
	l.w.call("lock.Release")
	l.w.released = true
	return nil
}

// harness runs a watchdog inside a synctest bubble.
type harness struct {
	t      *testing.T
	w      *Watchdog
	world  *world
	cancel context.CancelFunc
	done   chan error
	mu     sync.Mutex
	events []Event
}

func testSettings(t *testing.T) Settings {
	s := DefaultSettings()
	s.StateFile = filepath.Join(t.TempDir(), "state.json")
	return s
}

// start builds and runs a watchdog; call inside synctest.Test.
func start(t *testing.T, s Settings, wd *world, tweak ...func(*Deps)) *harness {
	t.Helper()
	d := Deps{
		Vendor: fakeVendor{wd}, Firewall: fakeFirewall{wd}, Prober: fakeProber{wd},
		NodeHealth: fakeNodeHealth{wd}, ConnKiller: fakeKiller{wd}, Network: fakeNetwork{},
		Lock: fakeLock{wd},
		Cleanup: []Step{
			{"stale proxy", func(context.Context) error { wd.set(func(w *world) { w.call("cleanup.stale-proxy") }); return nil }},
			{"stale fwmark rules", func(context.Context) error {
				wd.set(func(w *world) { w.call("cleanup.fwmark") })
				return errors.New("boom")
			}},
		},
	}
	for _, f := range tweak {
		f(&d)
	}
	w, err := New(s, d)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, w: w, world: wd, done: make(chan error, 1)}
	ch, _ := w.Subscribe()
	go func() {
		for ev := range ch {
			h.mu.Lock()
			h.events = append(h.events, ev)
			h.mu.Unlock()
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- w.Run(ctx) }()
	h.advance(time.Second) // startup and the first connect
	return h
}

// stop ends Run (like SIGTERM) and waits for it.
func (h *harness) stop() error {
	h.cancel()
	err := <-h.done
	synctest.Wait()
	return err
}

// advance moves virtual time forward and lets everything settle.
func (h *harness) advance(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

func (h *harness) logs() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, e := range h.events {
		if e.Type == EventLog {
			out = append(out, e.Log.Message)
		}
	}
	return out
}

func (h *harness) logged(substr string) int {
	n := 0
	for _, l := range h.logs() {
		if strings.Contains(l, substr) {
			n++
		}
	}
	return n
}

// requireState reports a wrong state without ending the bubble's goroutine
// (t.Fatal there would leave the watchdog running).
func (h *harness) requireState(want State) {
	h.t.Helper()
	if got := h.w.Status().State; got != want {
		h.t.Errorf("state = %s, want %s\nlogs:\n%s", got, want, strings.Join(h.logs(), "\n"))
	}
}

// connects lists the nodes the vendor was asked to connect to, in order.
func (h *harness) connects() []string {
	var out []string
	for _, c := range h.world.get().calls {
		if n, ok := strings.CutPrefix(c, "vendor.Connect "); ok {
			out = append(out, n)
		}
	}
	return out
}
