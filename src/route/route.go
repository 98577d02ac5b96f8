// Package route owns the policy routing the watchdog depends on — the
// "fwmark 0x1 lookup 100" rule and the "local default dev lo table 100" route
// that deliver tunnel-marked packets to the transparent proxy — and reads the
// rest of the routing state it needs: the WAN device, neighbours and sockets
// (sock_diag). Everything goes through vishvananda/netlink on a handle bound
// to one network namespace, so tests can run it in a namespace they made.
package route

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Marks, tables and priorities shared with the firewall and the vendor proxy
// (DESIGN §5). They are explained once, here.
const (
	// MarkTunnel on a packet means "through the tunnel": the policy rule below
	// sends it to TunnelTable, whose only route delivers it locally, where the
	// proxy's tproxy socket picks it up.
	MarkTunnel uint32 = 0x1
	// MarkDirect is set (SO_MARK) by the proxy on its own outbound sockets to
	// relays; the kill switch lets it out and nothing re-marks it.
	MarkDirect uint32 = 0xff
	// TunnelTable is the routing table the vendor uses for tunnel-marked
	// packets; it holds one route: local default dev lo.
	TunnelTable = 100
	// RulePriority is the priority of the fwmark rule the watchdog installs.
	// It sits well ahead of the main table (32766) and of the vendor's own
	// rule, which it adds without a priority (the kernel then picks 32765 or
	// just below the first existing rule), so ours is the one in effect and
	// can be told apart from the vendor's when cleaning up.
	RulePriority = 9100
)

// Family selects the address families the tunnel routing is installed for.
type Family int

// Address families for EnsureTunnel and friends.
const (
	IPv4 Family = unix.AF_INET
	IPv6 Family = unix.AF_INET6
)

// String names the family as ip(8) does.
func (f Family) String() string {
	if f == IPv6 {
		return "ipv6"
	}
	return "ipv4"
}

// log is the subsystem logger, looked up at each use: one taken at package
// init would keep the default handler from before the program installed
// its own (lines would lose their level and attributes).
func log() *slog.Logger { return slog.Default().With("subsystem", "route") }

// Handle talks rtnetlink and sock_diag in one network namespace.
type Handle struct {
	h *netlink.Handle
}

// Open returns a handle on the namespace ns (netns.None() = the caller's).
// The inet_diag socket is requested explicitly: without it NewHandleAt
// silently answers sock_diag queries from the caller's namespace (DESIGN §9).
func Open(ns netns.NsHandle) (*Handle, error) {
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE, unix.NETLINK_INET_DIAG)
	if err != nil {
		return nil, fmt.Errorf("opening netlink handle: %w", err)
	}
	return &Handle{h: h}, nil
}

// Close releases the netlink sockets.
func (h *Handle) Close() { h.h.Close() }

// TunnelRule describes one "fwmark 0x1 lookup 100" rule found in the kernel.
type TunnelRule struct {
	Family   Family
	Priority int
	Ours     bool // installed by the watchdog (RulePriority)
}

// TunnelState is what the kernel holds of the tunnel routing for one family.
type TunnelState struct {
	Family Family
	Rules  []TunnelRule
	// LocalRoute reports whether table 100 has its "local default dev lo".
	LocalRoute bool
}

// Duplicated reports more than one fwmark rule: a crash or a half-finished
// vendor disconnect left extras behind (SURFLARE-CONTRACT).
func (s TunnelState) Duplicated() bool { return len(s.Rules) > 1 }

// Complete reports the rule and the route are both there.
func (s TunnelState) Complete() bool { return len(s.Rules) > 0 && s.LocalRoute }

// Tunnel reads the tunnel routing of one family.
func (h *Handle) Tunnel(ctx context.Context, fam Family) (TunnelState, error) {
	st := TunnelState{Family: fam}
	rules, err := h.h.RuleList(int(fam))
	if err != nil {
		return st, fmt.Errorf("listing %s rules: %w", fam, err)
	}
	for _, r := range rules {
		if isTunnelRule(r) {
			st.Rules = append(st.Rules, TunnelRule{Family: fam, Priority: r.Priority, Ours: r.Priority == RulePriority})
		}
	}
	sort.Slice(st.Rules, func(i, j int) bool { return st.Rules[i].Priority < st.Rules[j].Priority })
	routes, err := h.h.RouteListFiltered(int(fam), &netlink.Route{Table: TunnelTable}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return st, fmt.Errorf("listing %s table %d: %w", fam, TunnelTable, err)
	}
	for _, r := range routes {
		if r.Type == unix.RTN_LOCAL && isDefault(r.Dst) {
			st.LocalRoute = true
		}
	}
	return st, nil
}

func isTunnelRule(r netlink.Rule) bool {
	if r.Table != TunnelTable || r.Mark != MarkTunnel || r.Invert {
		return false
	}
	// The vendor adds the rule without a mask; "mask 0xffffffff" is the same.
	return r.Mask == nil || *r.Mask == 0xffffffff
}

func isDefault(dst *net.IPNet) bool {
	if dst == nil {
		return true
	}
	ones, _ := dst.Mask.Size()
	return ones == 0
}

func defaultDst(fam Family) *net.IPNet {
	if fam == IPv6 {
		return &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}
	}
	return &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}
}

func loIndex(h *netlink.Handle) (int, error) {
	lo, err := h.LinkByName("lo")
	if err != nil {
		return 0, fmt.Errorf("finding lo: %w", err)
	}
	return lo.Attrs().Index, nil
}

// EnsureTunnel installs the fwmark rule (at RulePriority) and table 100's
// local default route for fam unless equivalent ones exist. It reports
// whether it changed anything. Idempotent: EEXIST counts as success.
func (h *Handle) EnsureTunnel(ctx context.Context, fam Family) (bool, error) {
	st, err := h.Tunnel(ctx, fam)
	if err != nil {
		return false, err
	}
	changed := false
	if !st.LocalRoute {
		lo, err := loIndex(h.h)
		if err != nil {
			return false, err
		}
		r := &netlink.Route{LinkIndex: lo, Dst: defaultDst(fam), Table: TunnelTable, Type: unix.RTN_LOCAL,
			Scope: unix.RT_SCOPE_HOST, Family: int(fam)}
		if err := h.h.RouteAdd(r); err != nil && !errors.Is(err, unix.EEXIST) {
			return false, fmt.Errorf("adding %s local default route to table %d: %w", fam, TunnelTable, err)
		}
		changed = true
	}
	if len(st.Rules) == 0 {
		if err := h.h.RuleAdd(tunnelRule(fam, RulePriority)); err != nil && !errors.Is(err, unix.EEXIST) {
			return false, fmt.Errorf("adding %s rule fwmark %#x lookup %d: %w", fam, MarkTunnel, TunnelTable, err)
		}
		changed = true
	}
	if changed {
		log().Info("tunnel routing installed", "family", fam.String())
	}
	return changed, nil
}

func tunnelRule(fam Family, prio int) *netlink.Rule {
	r := netlink.NewRule()
	r.Family = int(fam)
	r.Priority = prio
	r.Mark = MarkTunnel
	r.Table = TunnelTable
	return r
}

// Dedupe removes all but one fwmark rule of fam, keeping ours when present,
// else the one in effect (lowest priority). It returns how many it removed.
func (h *Handle) Dedupe(ctx context.Context, fam Family) (int, error) {
	st, err := h.Tunnel(ctx, fam)
	if err != nil {
		return 0, err
	}
	if !st.Duplicated() {
		return 0, nil
	}
	keep := 0
	for i, r := range st.Rules {
		if r.Ours {
			keep = i
			break
		}
	}
	removed := 0
	for i, r := range st.Rules {
		if i == keep {
			continue
		}
		if err := h.delRule(fam, r.Priority); err != nil {
			return removed, err
		}
		removed++
	}
	log().Warn("removed duplicated tunnel rules", "family", fam.String(), "removed", removed)
	return removed, nil
}

func (h *Handle) delRule(fam Family, prio int) error {
	if err := h.h.RuleDel(tunnelRule(fam, prio)); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("deleting %s rule fwmark %#x lookup %d priority %d: %w", fam, MarkTunnel, TunnelTable, prio, err)
	}
	return nil
}

// RemoveTunnel deletes the tunnel routing of fam. With all=false only what
// the watchdog installed goes (our rule; the route only when no other rule
// still needs it); with all=true every fwmark rule goes, duplicates
// included, and table 100 is flushed: that is how a crashed vendor proxy's,
// a killed long-lived CLI's or a half-done disconnect's leftovers are
// cleared (E7). ENOENT counts as success. It returns how many objects it
// removed.
func (h *Handle) RemoveTunnel(ctx context.Context, fam Family, all bool) (int, error) {
	st, err := h.Tunnel(ctx, fam)
	if err != nil {
		return 0, err
	}
	removed, others := 0, 0
	for _, r := range st.Rules {
		if !all && !r.Ours {
			others++
			continue
		}
		if err := h.delRule(fam, r.Priority); err != nil {
			return removed, err
		}
		removed++
	}
	if all {
		n, err := h.flushTunnelTable(fam)
		return removed + n, err
	}
	if st.LocalRoute && others == 0 {
		lo, err := loIndex(h.h)
		if err != nil {
			return removed, err
		}
		r := &netlink.Route{LinkIndex: lo, Dst: defaultDst(fam), Table: TunnelTable, Type: unix.RTN_LOCAL,
			Scope: unix.RT_SCOPE_HOST, Family: int(fam)}
		if err := h.h.RouteDel(r); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ESRCH) {
			return removed, fmt.Errorf("deleting %s local default route from table %d: %w", fam, TunnelTable, err)
		}
		removed++
	}
	return removed, nil
}

// flushTunnelTable deletes every route of fam in table 100, whatever the
// vendor put there (`ip route flush table 100`).
func (h *Handle) flushTunnelTable(fam Family) (int, error) {
	routes, err := h.h.RouteListFiltered(int(fam), &netlink.Route{Table: TunnelTable}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return 0, fmt.Errorf("listing %s table %d: %w", fam, TunnelTable, err)
	}
	n := 0
	for i := range routes {
		if err := h.h.RouteDel(&routes[i]); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ESRCH) {
			return n, fmt.Errorf("flushing %s table %d: %w", fam, TunnelTable, err)
		}
		n++
	}
	return n, nil
}
