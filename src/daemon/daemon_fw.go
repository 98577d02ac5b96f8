package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"

	"surflare-watchdog/src/firewall"
	"surflare-watchdog/src/route"
)

// fwAdapter is the watchdog's imperative Firewall interface on top of the
// firewall package's declarative Apply: every call changes one of two
// flags and applies the Spec they give, and a Guard keeps that Spec in the
// kernel (fw4 restart, `nft flush ruleset`) until the watchdog stops.
//
//	state                       Spec
//	startup / connecting        kill switch + moat, LAN tproxy tombstoned (ProxyDown)
//	tunnel verified (RestoreLAN) everything, LAN TCP into the proxy
//	storm cooldown              as connecting: LAN TCP reset, domestic direct
//	fail-open                   no tables at all, guard idle
//	stopped                     kill switch only (or nothing with --open-on-exit)
//
// The kill switch itself never changes between these: the relay and
// account-API endpoints are in it all along, so nothing needs opening for a
// reconnect.
type fwAdapter struct {
	fw  *firewall.Firewall
	log *slog.Logger

	mu        sync.Mutex
	base      firewall.Spec // from the config; replaced on reload
	proxyDown bool          // LAN tproxy tombstoned
	open      bool          // fail-open: nothing installed
	stopped   bool          // torn down for good: the guard stays off

	guardCtx    context.Context // parent of the guard (the daemon's)
	guardCancel context.CancelFunc
	guardDone   chan struct{}
}

func newFWAdapter(ctx context.Context, fw *firewall.Firewall, base firewall.Spec) *fwAdapter {
	return &fwAdapter{fw: fw, base: base, proxyDown: true, guardCtx: ctx,
		log: slog.Default().With("subsystem", "firewall")}
}

// spec is the Spec the flags give now; the guard calls it on every pass.
func (a *fwAdapter) spec() firewall.Spec {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.base
	s.ProxyDown = a.proxyDown
	return s
}

// SetBase replaces the config part of the Spec (reload, learned relays)
// and applies it unless the tables are down on purpose.
func (a *fwAdapter) SetBase(ctx context.Context, s firewall.Spec) error {
	a.mu.Lock()
	a.base = s
	skip := a.open || a.stopped
	a.mu.Unlock()
	if skip {
		return nil
	}
	return a.apply(ctx)
}

// AddRelays puts relays the daemon learned (package relays) into the
// Spec's Relays, so the moat counts on their paths and the loop guard
// knows them as siblings.
func (a *fwAdapter) AddRelays(ctx context.Context, relays []netip.Addr) error {
	s := a.Base()
	for _, r := range relays {
		p := netip.PrefixFrom(r, r.BitLen())
		if !slices.Contains(s.Relays, p) {
			s.Relays = append(s.Relays, p)
		}
	}
	return a.SetBase(ctx, s)
}

// Base is the config part of the Spec.
func (a *fwAdapter) Base() firewall.Spec {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.base
}

func (a *fwAdapter) apply(ctx context.Context) error {
	if _, err := a.fw.Apply(ctx, a.spec()); err != nil {
		return err
	}
	a.ensureGuard()
	return nil
}

// ensureGuard starts the guard unless it runs or the tables are down on
// purpose.
func (a *fwAdapter) ensureGuard() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.guardCancel != nil || a.open || a.stopped || a.guardCtx.Err() != nil {
		return
	}
	ctx, cancel := context.WithCancel(a.guardCtx)
	done := make(chan struct{})
	a.guardCancel, a.guardDone = cancel, done
	go func() {
		defer close(done)
		if err := a.fw.Guard(ctx, a.spec); err != nil && ctx.Err() == nil {
			a.log.Error("Firewall guard stopped: tables deleted behind our back are no longer restored", "err", err)
		}
	}()
}

// stopGuard ends the guard and waits for it, so it cannot re-apply what a
// teardown is about to remove.
func (a *fwAdapter) stopGuard() {
	a.mu.Lock()
	cancel, done := a.guardCancel, a.guardDone
	a.guardCancel, a.guardDone = nil, nil
	a.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

func (a *fwAdapter) set(f func()) {
	a.mu.Lock()
	f()
	a.mu.Unlock()
}

// InstallMoat applies the whole Spec with the LAN tproxy tombstoned: the
// moat and the kill switch go in together, in one batch, before anything
// else (arming the kill switch early is only safer).
func (a *fwAdapter) InstallMoat(ctx context.Context) error {
	a.set(func() { a.proxyDown, a.open = true, false })
	if err := a.apply(ctx); err != nil {
		return fmt.Errorf("installing moat and kill switch: %w", err)
	}
	return nil
}

// ArmKillSwitch (startup and the start of every connect) re-applies with
// the LAN tproxy tombstoned: the proxy is about to be restarted, and LAN
// TCP is better reset at once than left hanging on a closed port.
func (a *fwAdapter) ArmKillSwitch(ctx context.Context) error {
	a.set(func() { a.proxyDown, a.open = true, false })
	return a.apply(ctx)
}

// RestoreLAN sends LAN TCP into the verified proxy and makes sure the
// fwmark rule and table 100 deliver it locally.
func (a *fwAdapter) RestoreLAN(ctx context.Context) error {
	a.set(func() { a.proxyDown = false })
	if err := a.apply(ctx); err != nil {
		return err
	}
	if _, err := a.fw.EnsureRouting(ctx, a.spec()); err != nil {
		return fmt.Errorf("tunnel routing: %w", err)
	}
	return nil
}

// Cooldown on: LAN TCP is reset (the proxy is stopped), domestic and
// bypassed traffic keep going direct, the kill switch stays.
func (a *fwAdapter) Cooldown(ctx context.Context, on bool) error {
	a.set(func() { a.proxyDown = on })
	return a.apply(ctx)
}

// FailOpen removes every table of ours (the user chose availability over
// privacy after repeated login failures); the guard stops so it does not
// put them back. ArmKillSwitch re-arms.
func (a *fwAdapter) FailOpen(ctx context.Context) error {
	a.set(func() { a.open = true })
	a.stopGuard()
	if _, err := a.fw.Teardown(ctx, false); err != nil {
		return fmt.Errorf("fail-open teardown: %w", err)
	}
	a.log.Warn("FAIL-OPEN: kill switch removed; traffic leaves without the tunnel until a login succeeds")
	return nil
}

// Teardown is the stop: the guard ends first, then the tables go (all
// but the kill switch when keepKillSwitch).
func (a *fwAdapter) Teardown(ctx context.Context, keepKillSwitch bool) error {
	a.set(func() { a.stopped = true })
	a.stopGuard()
	_, err := a.fw.Teardown(ctx, keepKillSwitch)
	return err
}

// FlushVendor removes what the vendor leaves behind when it is killed or
// half disconnected: its table, every fwmark rule (duplicates included)
// and table 100's route. RestoreLAN puts ours back once a new tunnel is
// verified.
func (a *fwAdapter) FlushVendor(ctx context.Context) error {
	return errors.Join(a.fw.FlushVendor(ctx), route.ClearTunnel(ctx))
}
