package main

import (
	"context"

	"github.com/vishvananda/netns"

	"surflare-watchdog/src/config"
	"surflare-watchdog/src/detect"
	"surflare-watchdog/src/firewall"
	"surflare-watchdog/src/loopguard"
)

// startLoopGuard builds the loop guard with its own sampler, socket killer
// and kernel wake-ups (the NFLOG group of the kill switch's wake-up rule,
// in our own namespace) and runs it, independently of the early
// detector's 3 s samples: it checks its gate when the kernel sees a flood
// of new tunnel connections, and every 2 s for safety — or every 100 ms
// where NFLOG is missing (KernelEvents warns). Off (min_active < 0), it
// only shows in status.
func (d *daemon) startLoopGuard(ctx context.Context, c *config.Config) {
	o := loopguard.FromConfig(c, d.fw.fw)
	if !c.LoopGuard.Enabled() {
		d.sig.guard, _ = loopguard.New(o)
		return
	}
	sampler, err := detect.NewProxySampler(detect.SamplerOptions{PIDs: d.procs.PIDs(c.Vendor.ProxyComm)})
	if err != nil {
		d.log.Error("Loop guard disabled", "err", err)
		return
	}
	o.Sampler = sampler
	k, err := loopguard.NewSocketKiller(netns.None())
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
	d.sig.guard = g
	d.goAux(ctx, "loop guard", func(ctx context.Context) error {
		defer release()
		return g.Run(ctx)
	})
}
