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
	"surflare-watchdog/src/watchdog"
)

// fwAdapter is the watchdog's Firewall on top of the firewall package's
// declarative Apply: the engine decides the mode (watchdog.FirewallMode,
// derived from its facts beside nextState) and Set turns it into the Spec
// to apply; a Guard keeps that Spec in the kernel (fw4 restart, `nft flush
// ruleset`) until the tables are down on purpose.
//
//	mode           Spec
//	kill-switch    kill switch + moat, LAN tproxy tombstoned (ProxyDown)
//	lan-proxy      everything, LAN TCP into the proxy, tunnel routing ensured
//	fail-open      no tables at all, guard idle
//	stopped        kill switch only, guard off for good
//	stopped-open   no tables at all, guard off for good
type fwAdapter struct {
	fw  *firewall.Firewall
	log *slog.Logger

	mu   sync.Mutex
	base firewall.Spec // from the config; replaced on reload
	mode watchdog.FirewallMode
	// engaged: the engine has set a mode. Until then the kernel holds what
	// the previous instance left (a crashed one's kill switch, or the LAN
	// tables of a tunnel handed over for adoption), and a base change
	// only waits for the engine's first Set: applying the initial mode
	// would reset the LAN of a tunnel about to be adopted.
	engaged bool

	guardCtx    context.Context // parent of the guard (the daemon's)
	guardCancel context.CancelFunc
	guardDone   chan struct{}
}

func newFWAdapter(ctx context.Context, fw *firewall.Firewall, base firewall.Spec) *fwAdapter {
	return &fwAdapter{fw: fw, base: base, mode: watchdog.FirewallKillSwitch, guardCtx: ctx,
		log: slog.Default().With("subsystem", "firewall")}
}

// spec is the Spec the mode gives now; the guard calls it on every pass.
func (a *fwAdapter) spec() firewall.Spec {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.base
	s.ProxyDown = a.mode != watchdog.FirewallLANProxy
	return s
}

// tablesDownLocked: the mode has no tables of ours to keep (or keeps only
// the kill switch, for good); nothing applies or guards them.
func (a *fwAdapter) tablesDownLocked() bool {
	if !a.engaged {
		return true // nothing to apply before the engine's first Set
	}
	switch a.mode {
	case watchdog.FirewallFailOpen, watchdog.FirewallStopped, watchdog.FirewallStoppedOpen:
		return true
	}
	return false
}

// SetBase replaces the config part of the Spec (reload, learned relays)
// and applies it unless the tables are down on purpose.
func (a *fwAdapter) SetBase(ctx context.Context, s firewall.Spec) error {
	a.mu.Lock()
	a.base = s
	skip := a.tablesDownLocked()
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
	_, err := a.updateBase(ctx, func(s *firewall.Spec) bool {
		s.Relays = slices.Clone(s.Relays)
		changed := false
		for _, r := range relays {
			if p := netip.PrefixFrom(r, r.BitLen()); !slices.Contains(s.Relays, p) {
				s.Relays = append(s.Relays, p)
				changed = true
			}
		}
		return changed
	})
	return err
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
	if a.guardCancel != nil || a.tablesDownLocked() || a.guardCtx.Err() != nil {
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

// Set is watchdog.Firewall: it makes the tables match mode.
func (a *fwAdapter) Set(ctx context.Context, mode watchdog.FirewallMode) error {
	a.mu.Lock()
	a.mode, a.engaged = mode, true
	a.mu.Unlock()
	switch mode {
	case watchdog.FirewallKillSwitch:
		// Startup, every connect, the storm cooldown: LAN TCP is reset at
		// once rather than left hanging on a proxy about to restart.
		if err := a.apply(ctx); err != nil {
			return fmt.Errorf("installing moat and kill switch: %w", err)
		}
		return nil
	case watchdog.FirewallLANProxy:
		if err := a.apply(ctx); err != nil {
			return err
		}
		if _, err := a.fw.EnsureRouting(ctx, a.spec()); err != nil {
			return fmt.Errorf("tunnel routing: %w", err)
		}
		return nil
	case watchdog.FirewallFailOpen:
		// The guard stops first so it does not put the tables back; a
		// later kill-switch Set re-arms.
		a.stopGuard()
		if _, err := a.fw.Teardown(ctx, false); err != nil {
			return fmt.Errorf("fail-open teardown: %w", err)
		}
		a.log.Warn("FAIL-OPEN: kill switch removed; traffic leaves without the tunnel until a login succeeds")
		return nil
	case watchdog.FirewallStopped, watchdog.FirewallStoppedOpen:
		a.stopGuard()
		_, err := a.fw.Teardown(ctx, mode == watchdog.FirewallStopped)
		return err
	}
	return fmt.Errorf("unknown firewall mode %d", int(mode))
}

// FlushVendor removes what the vendor leaves behind when it is killed or
// half disconnected: its table, every fwmark rule (duplicates included)
// and table 100's route. The lan-proxy mode puts ours back once a new
// tunnel is verified.
func (a *fwAdapter) FlushVendor(ctx context.Context) error {
	return errors.Join(a.fw.FlushVendor(ctx), route.ClearTunnel(ctx))
}
