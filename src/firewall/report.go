package firewall

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"surflare-watchdog/src/route"
)

// StatusReport is `surflare-watchdog firewall status`: what is installed,
// what a crash left behind, and the counters.
type StatusReport struct {
	State
	Problems   []string          `json:"problems"`
	KillSwitch map[string]uint64 `json:"kill_switch_counters,omitempty"`
	Moat       *Moat             `json:"moat,omitempty"`
	// Layer is the kill switch's routing layer (docs/killswitch-layers.md):
	// ip rules no nftables command can delete.
	Layer *route.LayerState `json:"route_layer,omitempty"`
}

// Report inspects the namespace and reads the counters; only a failed
// inspection is an error (counters that cannot be read are left out).
func (f *Firewall) Report(ctx context.Context) (StatusReport, error) {
	st, err := f.Inspect(ctx)
	if err != nil {
		return StatusReport{}, err
	}
	out := StatusReport{State: st, Problems: st.Problems()}
	if st.KillSwitch {
		out.KillSwitch, _ = f.KillSwitchCounters(ctx)
	}
	if m, err := f.MoatCounters(ctx); err == nil {
		out.Moat = &m
	}
	if l, err := f.RouteLayer(ctx); err == nil {
		out.Layer = &l
	}
	return out, nil
}

// WriteText prints the report for people.
func (r StatusReport) WriteText(w io.Writer) {
	fmt.Fprintf(w, "tables: %s\n", orNone(strings.Join(r.Tables, ", ")))
	fmt.Fprintf(w, "kill switch: %s\n", map[bool]string{true: "armed", false: "NOT armed"}[r.State.KillSwitch])
	if l := r.Layer; l != nil && l.Rules4+l.Rules6 > 0 {
		fmt.Fprintf(w, "routing layer: %s (ipv4 %d rules, hold route %v; ipv6 %d rules, hold route %v)\n",
			map[bool]string{true: "armed", false: "NOT armed"}[l.Armed()], l.Rules4, l.HoldRoute4, l.Rules6, l.HoldRoute6)
	}
	fmt.Fprintf(w, "vendor table: %v (extended for global mode: %v)\n", r.VendorTable, r.VendorExtended)
	for _, r := range r.Routing {
		fmt.Fprintf(w, "%s tunnel routing: %d fwmark rule(s), table %d local route: %v\n", r.Family, len(r.Rules), route.TunnelTable, r.LocalRoute)
	}
	fmt.Fprintf(w, "proxy listening on %d: %v\n", r.ProxyPort, r.ProxyListening)
	if r.Masq.FW4Present {
		fmt.Fprintf(w, "fw4 masquerade: %v\n", r.Masq.Masquerade)
	}
	if len(r.KillSwitch) > 0 {
		keys := make([]string, 0, len(r.KillSwitch))
		for k := range r.KillSwitch {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s=%d", k, r.KillSwitch[k]))
		}
		fmt.Fprintf(w, "kill switch blocked (packets): %s\n", strings.Join(parts, " "))
	}
	if r.Moat != nil {
		m := r.Moat
		fmt.Fprintf(w, "moat: syn_out=%d synack_in=%d syn_in=%d rst_in=%d fin_in=%d\n", m.SynOut, m.SynAckIn, m.SynIn, m.RstIn, m.FinIn)
	}
	if len(r.Problems) == 0 {
		fmt.Fprintln(w, "problems: none")
	}
	for _, p := range r.Problems {
		fmt.Fprintf(w, "problem: %s\n", p)
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
