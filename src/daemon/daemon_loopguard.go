package daemon

import (
	"context"
	"net/netip"

	"surflare-watchdog/src/config"
	"surflare-watchdog/src/detectors/detect"
	"surflare-watchdog/src/firewall"
	"surflare-watchdog/src/loopguard"
	"surflare-watchdog/src/route"
)

// startLoopGuard builds the loop guard with its own sampler, socket killer
// and kernel wake-ups (the NFLOG group of the kill switch's wake-up rule,
// in our own namespace) and runs it, independently of the early
// detector's 3 s samples: it checks its gate when the kernel sees a flood
// of new tunnel connections, and every 2 s for safety — or every 100 ms
// where NFLOG is missing (KernelEvents warns). Off (min_active < 0), it
// only shows in status.
func (d *Daemon) startLoopGuard(ctx context.Context, c *config.Config) {
	o := loopguard.FromConfig(c, d.fw.fw)
	o.Siblings = relaySiblings(d.fw.Base)
	if !c.LoopGuard.Enabled() {
		d.dets.guard, _ = loopguard.New(o)
		return
	}
	sampler, err := detect.NewProxySampler(detect.SamplerOptions{PIDs: d.procs.PIDs(c.Vendor.ProxyComm)})
	if err != nil {
		d.log.Error("Loop guard disabled", "err", err)
		return
	}
	o.Sampler = sampler
	k, err := route.NewSocketKiller(0) // 0: our own namespace
	if err != nil {
		d.log.Warn("Loop guard: looped sockets will not be cut", "err", err)
	} else {
		o.Killer = k
	}
	events := loopguard.KernelEvents(ctx, firewall.LoopGuardLogGroup, o.Interval)
	if events != nil {
		o.Events = events.C()
	}
	release := func() {
		sampler.Close()
		if k != nil {
			k.Close()
		}
		if events != nil {
			events.Close()
		}
	}
	g, err := loopguard.New(o)
	if err != nil {
		release()
		d.log.Error("Loop guard disabled", "err", err)
		return
	}
	d.dets.guard = g
	d.goAux(ctx, "loop guard", func(ctx context.Context) error {
		defer release()
		return g.Run(ctx)
	})
}

// relaySiblings is the loop guard's Options.Siblings: a loop to one of the
// proxy's relays (an address the relay learner found the proxy using on a
// vendor server port, package relays, kept in the Spec's Relays) moves
// on to the other relays once it is blocked, because the proxy fails over,
// so their circuits open with its. A sibling is another learned relay at
// the looping endpoint's port (the vendor's relays share their ports) and
// of its address family (the guard's set holds one family). Anything that
// is not a learned relay has no siblings: the account API is never learned
// (the vendor CLI reaches it on its HTTPS port, not a server port, and the
// config's endpoints are not consulted), so it is never a sibling. base is
// read at each circuit opening, so relays learned later count.
func relaySiblings(base func() firewall.Spec) func(netip.AddrPort) []netip.AddrPort {
	return func(dst netip.AddrPort) []netip.AddrPort {
		a := dst.Addr().Unmap()
		relays := base().Relays
		isRelay := false
		for _, p := range relays {
			if p.Contains(a) {
				isRelay = true
				break
			}
		}
		if !isRelay {
			return nil
		}
		var out []netip.AddrPort
		for _, p := range relays {
			r := p.Addr().Unmap()
			if !p.IsSingleIP() || r == a || r.Is4() != a.Is4() {
				continue
			}
			out = append(out, netip.AddrPortFrom(r, dst.Port()))
		}
		return out
	}
}
