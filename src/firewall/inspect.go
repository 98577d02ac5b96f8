package firewall

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/google/nftables"
	"github.com/vishvananda/netns"

	"surflare-watchdog/src/route"
)

// State is what the kernel holds of ours (and of the vendor's), as found —
// typically at start-up, to clear what a crash left behind.
type State struct {
	Tables           []string // our tables present, "family name"
	KillSwitch       bool
	TProxyTombstoned bool // sw_lan_tproxy resets LAN TCP instead of proxying
	TraceTable       bool // watchdog_trace present: orphaned unless a trace runs
	BootLock         bool
	VendorTable      bool
	VendorExtended   bool // our cn_direct accepts are in the vendor's table
	Masq             MasqState
	Routing          []route.TunnelState // IPv4, IPv6
	ProxyListening   bool                // something listens on the proxy port
	ProxyPort        uint16
}

// Problems turns the facts into findings a user can act on; empty = clean.
func (s State) Problems() []string {
	var p []string
	if s.TProxyTombstoned {
		p = append(p, "LAN TCP is tombstoned (reset instead of proxied): the proxy was down when the watchdog last applied")
	}
	if s.TraceTable {
		p = append(p, "trace table inet "+TableTrace+" is present (orphaned unless a trace is running)")
	}
	if s.BootLock {
		p = append(p, "boot lock inet "+TableBootLock+" is still present")
	}
	if s.Masq.FW4Present && !s.Masq.Masquerade {
		p = append(p, "fw4 is loaded but has no masquerade in its srcnat chains")
	}
	for _, r := range s.Routing {
		if r.Duplicated() {
			p = append(p, fmt.Sprintf("%d duplicated %s fwmark %#x rules", len(r.Rules), r.Family, route.MarkTunnel))
		}
		if len(r.Rules) > 0 && !r.LocalRoute {
			p = append(p, fmt.Sprintf("stale %s fwmark rule: table %d has no local default route", r.Family, route.TunnelTable))
		}
		if len(r.Rules) > 0 && !s.ProxyListening && r.Family == route.IPv4 {
			p = append(p, fmt.Sprintf("stale %s fwmark rule: nothing listens on the proxy port %d (killed proxy)", r.Family, s.ProxyPort))
		}
	}
	return p
}

// Inspect reads our tables, the vendor's, fw4's NAT and the tunnel routing.
func (f *Firewall) Inspect(ctx context.Context) (State, error) {
	st := State{ProxyPort: DefaultProxyPort}
	f.mu.Lock()
	if f.lastSpec != nil {
		st.ProxyPort = f.lastSpec.ProxyPort
	}
	f.mu.Unlock()
	c, err := f.conn()
	if err != nil {
		return st, err
	}
	defer c.CloseLasting()
	tables, err := c.ListTables()
	if err != nil {
		return st, fmt.Errorf("listing tables: %w", err)
	}
	for _, t := range tables {
		k := tableKey(t.Family, t.Name)
		switch {
		case t.Family == famInet && t.Name == TableVendor:
			st.VendorTable = true
			if st.VendorExtended, err = vendorExtended(c, t); err != nil {
				return st, err
			}
		case isOurs(t):
			st.Tables = append(st.Tables, k)
		}
		switch {
		case t.Family == famInet && t.Name == TableKillSwitch:
			st.KillSwitch = true
		case t.Family == famInet && t.Name == TableTrace:
			st.TraceTable = true
		case t.Family == famInet && t.Name == TableBootLock:
			st.BootLock = true
		case t.Family == famIP && t.Name == TableTProxy:
			if st.TProxyTombstoned, err = hasRule(c, t, "prerouting", "tombstone"); err != nil {
				return st, err
			}
		}
	}
	sort.Strings(st.Tables)
	if st.Masq, err = checkMasquerade(c); err != nil {
		return st, err
	}
	h, err := f.routeHandle()
	if err != nil {
		return st, err
	}
	defer h.Close()
	for _, fam := range []route.Family{route.IPv4, route.IPv6} {
		ts, err := h.Tunnel(ctx, fam)
		if err != nil {
			return st, err
		}
		st.Routing = append(st.Routing, ts)
	}
	if st.ProxyListening, err = f.proxyListening(ctx, st.ProxyPort); err != nil {
		return st, err
	}
	return st, nil
}

// proxyListening asks the kernel for the LISTEN sockets of f's namespace
// only (route.SockDiag.Listening, the question health asks too): a dump of
// every socket, filtered here, costs as much as the router's LAN has
// connections.
func (f *Firewall) proxyListening(ctx context.Context, port uint16) (bool, error) {
	ns := netns.None()
	if f.netnsFD >= 0 {
		ns = netns.NsHandle(f.netnsFD)
	}
	d, err := route.OpenSockDiag(ns)
	if err != nil {
		return false, err
	}
	defer d.Close()
	return d.Listening(ctx, port)
}

// hasRule reports a rule with the given id in a chain of ours.
func hasRule(c *nftables.Conn, t *nftables.Table, chain, id string) (bool, error) {
	rules, err := c.GetRules(t, &nftables.Chain{Name: chain, Table: t})
	if err != nil {
		return false, fmt.Errorf("reading %s chain %s: %w", tableKey(t.Family, t.Name), chain, err)
	}
	for _, r := range rules {
		if strings.HasPrefix(ruleComment(r), id+" #") {
			return true, nil
		}
	}
	return false, nil
}

func vendorExtended(c *nftables.Conn, t *nftables.Table) (bool, error) {
	chains, err := c.ListChainsOfTableFamily(famInet)
	if err != nil {
		return false, fmt.Errorf("listing vendor chains: %w", err)
	}
	for _, ch := range chains {
		if ch.Table.Name != TableVendor {
			continue
		}
		rules, err := c.GetRules(t, ch)
		if err != nil {
			return false, fmt.Errorf("reading vendor chain %s: %w", ch.Name, err)
		}
		if len(ourVendorRules(rules)) > 0 {
			return true, nil
		}
	}
	return false, nil
}
