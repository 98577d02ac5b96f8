package firewall

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/google/nftables"
)

// guardDebounce gathers the burst of events one deletion causes (table,
// chains, rules, sets) into one re-apply.
const guardDebounce = 20 * time.Millisecond

// Guard keeps the firewall applied until ctx ends. It listens to nftables
// change events (NFNLGRP_NFTABLES) and re-applies spec() within a few tens of
// milliseconds when one of our tables or objects is deleted (fw4 restart,
// `firewall stop`, a user's `nft flush ruleset`), when the vendor recreates
// its table (global mode extends it) or when a boot lock reappears. Every
// guard interval it also re-applies (a no-op when nothing drifted), syncs the
// domestic set and checks fw4's masquerade. spec is called each time, so a
// config reload takes effect on the next pass.
//
// The periodic pass reads every rule and set of our tables back from the
// kernel, which is most of an idle daemon's CPU (issue 19). The kernel
// announces every committed nftables transaction on the event group the
// monitor listens to, so when no event at all came since a pass that found
// nothing to do, with the same spec, the nftables part cannot have drifted:
// such a periodic pass only checks the routing layer (ip rules and routes
// send no nftables event), and skips that too while no rtnetlink change
// came since its last clean check (guard_routes.go). Every
// guardFullEvery-th periodic pass reads everything anyway, and a
// lost-events notice (socket overrun) re-opens the monitor and re-checks
// at once, as before.
func (f *Firewall) Guard(ctx context.Context, spec func() Spec) error {
	events, closeMon, err := f.monitor()
	if err != nil {
		return err
	}
	defer func() { closeMon() }()
	if stopRoutes, err := f.routeMonitor(); err != nil {
		f.log.Info("no routing change events; the routing layer is checked on every guard pass", "err", err)
	} else {
		defer stopRoutes()
	}

	var (
		clean     bool   // the last full pass found nothing to do
		cleanGen  uint64 // f.nftEvents when that pass began
		cleanSpec Spec   // and the spec it checked
		skipped   int    // periodic passes since the last full one
		// The routing layer's own check: clean when the last check of it
		// (either kind of pass) changed nothing, as of f.rtEvents = routesGen.
		routesClean bool
		routesGen   uint64
	)
	pass := func(reason string, periodic bool) {
		if ctx.Err() != nil {
			return
		}
		gen := f.nftEvents.Load()
		rgen := f.rtEvents.Load()
		s := spec()
		if periodic && clean && gen == cleanGen && skipped < f.guardFull-1 && reflect.DeepEqual(s, cleanSpec) {
			skipped++
			f.guardSkips.Add(1)
			// The same for the routing layer: no rtnetlink message since
			// a check that changed nothing, and the monitor still runs.
			if routesClean && rgen == routesGen && f.rtMonitoring.Load() {
				f.routeSkips.Add(1)
				return
			}
			ch, err := f.SyncRoutes(ctx, s)
			routesClean, routesGen = err == nil && ch.Empty(), rgen
			if err != nil {
				clean = false
				f.log.Error("re-applying the routing layer failed", "reason", reason, "err", err)
			} else if !ch.Empty() {
				f.log.Warn("firewall drift repaired", "changes", ch.String())
			}
			return
		}
		if periodic {
			skipped = 0
		}
		ch, err := f.Apply(ctx, s)
		ok := err == nil && ch.Empty()
		routesClean, routesGen = ok, rgen
		switch {
		case err != nil:
			f.log.Error("re-applying firewall failed", "reason", reason, "err", err)
		case !ch.Empty() && !periodic:
			f.log.Warn("firewall re-applied", "reason", reason, "changes", ch.String())
		case !ch.Empty():
			f.log.Warn("firewall drift repaired", "changes", ch.String())
		}
		if n, err := f.SyncDomestic(ctx, DomesticSource); err != nil {
			ok = false
			f.log.Warn("domestic set sync failed", "err", err)
		} else if n > 0 {
			ok = false
		}
		if periodic {
			masq, err := f.recoverMasquerade(ctx)
			if err != nil {
				f.log.Warn("fw4 masquerade recovery failed", "err", err)
			}
			ok = ok && masq && err == nil
		} else {
			ok = false // the masquerade is checked by the next periodic pass
		}
		clean, cleanGen, cleanSpec = ok, gen, s
	}
	pass("start", false)

	ticker := time.NewTicker(f.guardInterval)
	defer ticker.Stop()
	var debounce <-chan time.Time
	reason := ""
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok || ev.Type == nftables.MonitorEventTypeOOB {
				// Lost events (socket overrun) or a dead monitor: re-open and
				// re-check everything.
				closeMon()
				if events, closeMon, err = f.monitor(); err != nil {
					return fmt.Errorf("re-opening nftables monitor: %w", err)
				}
				pass("monitor restarted", false)
				continue
			}
			if r := relevant(ev); r != "" && debounce == nil {
				reason = r
				debounce = time.After(guardDebounce)
			}
		case <-debounce:
			debounce = nil
			pass(reason, false)
		case <-ticker.C:
			pass("periodic", true)
		}
	}
}

// guardFullEvery: every this many periodic passes Guard reads everything
// back even when no nftables event came (12 × 5 s = a minute): a bound for
// a change the kernel would not announce.
const guardFullEvery = 12

// NFTEvents counts the nftables change events Guard's monitor has received,
// and says whether a monitor runs (ok false: the count means nothing and
// a caller must read the kernel). A reader that remembers the count from
// before its last read of the kernel, and finds it unchanged, knows that
// no nftables transaction has been committed since: the vendor's server
// ports, say, are as it read them.
func (f *Firewall) NFTEvents() (n uint64, ok bool) {
	return f.nftEvents.Load(), f.monitoring.Load()
}

// NFTChanged fires (at most one pending) after nftables events the
// guard's monitor received: a reader that would poll the kernel can wait on
// it instead while NFTEvents says a monitor runs. One reader.
func (f *Firewall) NFTChanged() <-chan struct{} { return f.nftNotify }

func (f *Firewall) notifyNFT() {
	select {
	case f.nftNotify <- struct{}{}:
	default:
	}
}

// GuardSkips is how many periodic passes found no nftables event since the
// last clean one and checked only the routing layer (tests, status).
func (f *Firewall) GuardSkips() int64 { return f.guardSkips.Load() }

func (f *Firewall) monitor() (chan *nftables.MonitorEvent, func(), error) {
	var opts []nftables.ConnOption
	if f.netnsFD >= 0 {
		opts = append(opts, nftables.WithNetNSFd(f.netnsFD))
	}
	c, err := nftables.New(opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("opening nftables monitor: %w", err)
	}
	mon := nftables.NewMonitor(nftables.WithMonitorEventBuffer(1024))
	in, err := c.AddMonitor(mon)
	if err != nil {
		return nil, nil, fmt.Errorf("joining the nftables event group: %w", err)
	}
	// Count every event as it arrives, not when Guard's loop gets to it
	// (a pass may hold the loop for tens of milliseconds): NFTEvents'
	// readers skip a kernel read on an unchanged count. A new monitor
	// counts as a change too, as events may have been lost meanwhile.
	f.nftEvents.Add(1)
	f.monitoring.Store(true)
	f.notifyNFT()
	events := make(chan *nftables.MonitorEvent, 64)
	go func() {
		defer close(events)
		for ev := range in {
			f.nftEvents.Add(1)
			f.notifyNFT()
			events <- ev
		}
		f.monitoring.Store(false)
		f.nftEvents.Add(1)
		f.notifyNFT() // readers waiting on it go back to polling
	}()
	return events, func() {
		f.monitoring.Store(false)
		f.nftEvents.Add(1)
		f.notifyNFT()
		mon.Close()
		for range events { // let the forwarder end
		}
	}, nil
}

// relevant says why an event calls for a re-apply ("" = it does not).
func relevant(ev *nftables.MonitorEvent) string {
	var t *nftables.Table
	del := false
	switch ev.Type {
	case nftables.MonitorEventTypeDelTable:
		t, _ = ev.Data.(*nftables.Table)
		del = true
	case nftables.MonitorEventTypeNewTable:
		t, _ = ev.Data.(*nftables.Table)
	case nftables.MonitorEventTypeDelChain:
		if c, ok := ev.Data.(*nftables.Chain); ok {
			t, del = c.Table, true
		}
	case nftables.MonitorEventTypeNewChain:
		if c, ok := ev.Data.(*nftables.Chain); ok {
			t = c.Table
		}
	case nftables.MonitorEventTypeDelRule:
		if r, ok := ev.Data.(*nftables.Rule); ok {
			t, del = r.Table, true
		}
	case nftables.MonitorEventTypeDelSet:
		if s, ok := ev.Data.(*nftables.Set); ok {
			t, del = s.Table, true
		}
	}
	if t == nil {
		return ""
	}
	switch {
	case t.Name == TableVendor && t.Family == famInet:
		return "vendor table changed"
	case t.Name == TableBootLock && !del:
		return "boot lock reappeared"
	case del && isOurs(t) && t.Name != TableTrace && t.Name != TableBootLock:
		return "table " + tableKey(t.Family, t.Name) + " changed behind our back"
	}
	return ""
}

// SyncRoutes is Apply's routing-layer half alone: Guard's periodic pass
// when nftables cannot have changed (see Guard). ip rules and routes send
// no nftables event, so they are checked every pass as before.
func (f *Firewall) SyncRoutes(ctx context.Context, s Spec) (Changes, error) {
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("firewall spec: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.syncLayer(ctx, s)
}
