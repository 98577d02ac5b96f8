package firewall

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/nftables"
	"github.com/vishvananda/netns"

	"surflare-watchdog/src/route"
)

// Teardown removes exactly what the watchdog owns: its tables (all but the
// kill switch when keepKillSwitch, which is how the daemon stops without
// opening the gates), the trace and boot-lock tables, its extension of the
// vendor's table, and the fwmark rule it installed (the vendor's own rule and
// table are left to the vendor). One batch for nftables; routing after it.
func (f *Firewall) Teardown(ctx context.Context, keepKillSwitch bool) (Changes, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.conn()
	if err != nil {
		return nil, err
	}
	defer c.CloseLasting()
	tables, err := c.ListTables()
	if err != nil {
		return nil, fmt.Errorf("listing tables: %w", err)
	}
	var ch Changes
	if !keepKillSwitch {
		// The routing layer goes first, while the chains that release
		// what it holds are still there (permit.go).
		lc, err := f.removeLayer(ctx)
		ch = append(ch, lc...)
		if err != nil {
			return ch, err
		}
	}
	var vendor *nftables.Table
	for _, t := range tables {
		k := tableKey(t.Family, t.Name)
		switch {
		case t.Family == famInet && t.Name == TableVendor:
			vendor = t
		case keepKillSwitch && t.Family == famInet && t.Name == TableKillSwitch:
		case isOurs(t):
			c.DelTable(t)
			ch = append(ch, Change{Table: k, Action: "deleted"})
		}
	}
	// The vendor extension goes as in rule mode: nothing of ours stays.
	vc, err := stageVendor(c, Spec{Mode: ModeRule}, vendor)
	if err != nil {
		return nil, err
	}
	ch = append(ch, vc...)
	if !ch.Empty() {
		if err := c.Flush(); err != nil {
			return nil, fmt.Errorf("tearing down firewall (%s): %w", ch, err)
		}
	}
	rc, err := f.teardownRouting(ctx)
	ch = append(ch, rc...)
	if err != nil {
		return ch, err
	}
	f.lastSpec = nil
	if !ch.Empty() {
		f.log.Info("firewall torn down", "changes", ch.String(), "kill_switch_kept", keepKillSwitch)
	}
	return ch, nil
}

func isOurs(t *nftables.Table) bool {
	for _, o := range ownedTables {
		if t.Family == o.fam && t.Name == o.name {
			return true
		}
	}
	return t.Family == famInet && (t.Name == TableTrace || t.Name == TableBootLock)
}

func (f *Firewall) routeHandle() (*route.Handle, error) {
	ns := netns.None()
	if f.netnsFD >= 0 {
		ns = netns.NsHandle(f.netnsFD)
	}
	return route.Open(ns)
}

func (f *Firewall) teardownRouting(ctx context.Context) (Changes, error) {
	h, err := f.routeHandle()
	if err != nil {
		return nil, err
	}
	defer h.Close()
	var ch Changes
	var errs []error
	for _, fam := range []route.Family{route.IPv4, route.IPv6} {
		n, err := h.RemoveTunnel(ctx, fam, false)
		if err != nil {
			errs = append(errs, err)
		}
		if n > 0 {
			ch = append(ch, Change{Table: "routing " + fam.String(), Action: fmt.Sprintf("%d tunnel rule/route objects removed", n)})
		}
	}
	return ch, errors.Join(errs...)
}

// EnsureRouting installs the tunnel routing the LAN tproxy needs (fwmark
// rule and table 100's local route; IPv6 too with IPv6Proxy). The vendor adds
// the same on connect; ours keeps LAN TCP deliverable to the proxy when the
// vendor's is missing, and is told apart from it by priority.
func (f *Firewall) EnsureRouting(ctx context.Context, s Spec) (Changes, error) {
	if !s.router() {
		return nil, nil
	}
	h, err := f.routeHandle()
	if err != nil {
		return nil, err
	}
	defer h.Close()
	fams := []route.Family{route.IPv4}
	if s.IPv6 == IPv6Proxy {
		fams = append(fams, route.IPv6)
	}
	var ch Changes
	for _, fam := range fams {
		changed, err := h.EnsureTunnel(ctx, fam)
		if err != nil {
			return ch, err
		}
		if changed {
			ch = append(ch, Change{Table: "routing " + fam.String(), Action: "tunnel rule/route installed"})
		}
	}
	return ch, nil
}
