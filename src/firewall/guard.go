package firewall

import (
	"context"
	"fmt"
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
func (f *Firewall) Guard(ctx context.Context, spec func() Spec) error {
	events, closeMon, err := f.monitor()
	if err != nil {
		return err
	}
	defer func() { closeMon() }()

	pass := func(reason string, periodic bool) {
		if ctx.Err() != nil {
			return
		}
		s := spec()
		ch, err := f.Apply(ctx, s)
		switch {
		case err != nil:
			f.log.Error("re-applying firewall failed", "reason", reason, "err", err)
		case !ch.Empty() && !periodic:
			f.log.Warn("firewall re-applied", "reason", reason, "changes", ch.String())
		case !ch.Empty():
			f.log.Warn("firewall drift repaired", "changes", ch.String())
		}
		if _, err := f.SyncDomestic(ctx, DomesticSource); err != nil {
			f.log.Warn("domestic set sync failed", "err", err)
		}
		if periodic {
			if _, err := f.RecoverMasquerade(ctx); err != nil {
				f.log.Warn("fw4 masquerade recovery failed", "err", err)
			}
		}
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
	events, err := c.AddMonitor(mon)
	if err != nil {
		return nil, nil, fmt.Errorf("joining the nftables event group: %w", err)
	}
	return events, func() { mon.Close() }, nil
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
