package watchdog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"slices"
	"time"

	"surflare-watchdog/src/health"
	"surflare-watchdog/src/runfiles"
	"surflare-watchdog/src/surflare"
)

// MemoryFileName is the engine's memory under the run directory. It is not
// one of runfiles.IPCFiles: crash cleanup must leave it, since surviving a
// crash is its purpose.
const MemoryFileName = "surflare_last_good.json"

// memory is what a restarted daemon needs to know about the one before it:
// the last node proven healthy, and the nodes that failed since (the open
// failure cycle). The field names are stable (the file is read back by
// the next instance, which may be a newer version).
type memory struct {
	Node          string    `json:"node,omitempty"`
	Transit       string    `json:"transit,omitempty"`        // the transit it was healthy on
	ConfigTransit string    `json:"config_transit,omitempty"` // the configured transit at the time
	At            time.Time `json:"at,omitzero"`              // when it was last healthy
	// Failed are the nodes that failed since At, with when.
	Failed map[string]time.Time `json:"failed,omitempty"`
	// Transits are the transit names learned from log health.
	Transits []string `json:"transits,omitempty"`
}

// memoryRefresh is how often the healthy time is rewritten while nothing
// else changes: the startup rule needs minutes, not seconds.
const memoryRefresh = time.Minute

// rememberHealthyLocked records that the current node is healthy now.
func (w *Watchdog) rememberHealthyLocked() {
	now := w.clock.Now()
	m := &w.mem
	if m.Node == w.node && m.Transit == w.transit && len(m.Failed) == 0 && now.Sub(m.At) < memoryRefresh {
		return
	}
	*m = memory{Node: w.node, Transit: w.transit, ConfigTransit: w.s.Transit, At: now, Transits: m.Transits}
	w.saveMemoryLocked()
}

// rememberFailedLocked records that node failed in the open cycle.
func (w *Watchdog) rememberFailedLocked(node string) {
	if w.mem.Failed == nil {
		w.mem.Failed = map[string]time.Time{}
	}
	w.mem.Failed[node] = w.clock.Now()
	w.saveMemoryLocked()
}

func (w *Watchdog) saveMemoryLocked() {
	if w.s.MemoryFile == "" {
		return
	}
	if err := runfiles.WriteJSON(w.s.MemoryFile, w.mem); err != nil {
		w.log.Warn("Writing the last-good file failed", "err", err)
	}
}

// loadMemory reads what the previous instance left; a missing or broken
// file is an empty memory.
func (w *Watchdog) loadMemory() memory {
	if w.s.MemoryFile == "" {
		return memory{}
	}
	data, err := os.ReadFile(w.s.MemoryFile)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			w.log.Warn("Reading the last-good file failed; starting from the configured order", "err", err)
		}
		return memory{}
	}
	var m memory
	if err := json.Unmarshal(data, &m); err != nil {
		w.log.Warn("The last-good file is not valid JSON; starting from the configured order", "file", w.s.MemoryFile, "err", err)
		return memory{}
	}
	return m
}

// startupLookBudget bounds the look at the vendor's tunnel at startup
// (status and one check). It runs before crash cleanup, so before the kill
// switch is re-armed; a healthy tunnel answers in about a second, and a
// daemon that died left its kill switch in the kernel anyway.
const startupLookBudget = 5 * time.Second

// vendorTunnel is a tunnel the previous instance left running: what the
// vendor's status says of it and the check it passed (adopt.go keeps it
// when the kernel holds the whole of it).
type vendorTunnel struct {
	node, transit, mode string
	check               health.Result
}

// lookAtVendor asks whether the vendor still runs a tunnel and whether it
// works, before crash cleanup stops it. Whether it is adopted or only its
// node is kept is startup's decision (adopt.go).
func (w *Watchdog) lookAtVendor(ctx context.Context) (vendorTunnel, bool) {
	ctx, cancel := context.WithTimeout(ctx, startupLookBudget)
	defer cancel()
	st, err := w.d.Vendor.Status(ctx)
	if err != nil || st.State != surflare.StateConnected || st.Node == "" {
		return vendorTunnel{}, false
	}
	r := w.d.Prober.Check(ctx)
	if ctx.Err() != nil || r.WANDown || !r.Outcome.Healthy() {
		w.log.Info(fmt.Sprintf("The vendor's tunnel on %s is not healthy (%s); not starting there", st.Node, r.Outcome), "reason", r.Reason)
		return vendorTunnel{}, false
	}
	w.log.Info(fmt.Sprintf("The vendor's tunnel on %s is healthy", st.Node))
	return vendorTunnel{node: st.Node, transit: st.Transit, mode: st.Mode, check: r}, true
}

// chooseStartLocked picks the first node (and transit) at startup: the
// vendor's running tunnel if it proved healthy, else the last node that was
// healthy if that is younger than StartMemory and did not fail since, else
// the configured node and candidates in order without the nodes that
// failed within StartMemory — always skipping nodes log health marks dead.
// The open cycle's failures are carried over, so rotation and storm
// protection continue where the previous instance stopped.
func (w *Watchdog) chooseStartLocked(vt vendorTunnel, haveVT bool) (node, why string) {
	now := w.clock.Now()
	m := w.loadMemory()
	fresh := !m.At.IsZero() && now.Sub(m.At) < w.s.StartMemory && !m.At.After(now)
	for n, at := range m.Failed {
		if now.Sub(at) < w.s.StartMemory && !at.After(now) {
			w.tried[n] = true
		}
	}
	w.mem = m
	w.mem.Failed = maps.Clone(m.Failed)
	known := func(n string) bool { return n == w.s.Node || slices.Contains(w.s.candidates(), n) }
	usable := func(n string) bool {
		if dead, cnt := w.deadLocked(n); dead {
			w.logLocked(slog.LevelInfo, fmt.Sprintf("LOG_HEALTH: skipping %s via %s (%d errors)", n, w.transit, cnt))
			return false
		}
		return true
	}

	if haveVT && known(vt.node) && !w.tried[vt.node] {
		// Keep a transit the previous instance switched to, not one
		// someone chose by hand.
		if vt.transit == m.Transit && m.ConfigTransit == w.s.Transit && m.Transit != "" {
			w.transit = vt.transit
		}
		if usable(vt.node) {
			return vt.node, "the vendor's tunnel was healthy"
		}
		w.transit = w.s.Transit
	}
	if fresh && m.Node != "" && known(m.Node) && !w.tried[m.Node] {
		if m.ConfigTransit == w.s.Transit && m.Transit != "" {
			w.transit = m.Transit
		}
		if usable(m.Node) {
			return m.Node, fmt.Sprintf("last healthy %s ago", now.Sub(m.At).Round(time.Second))
		}
		w.transit = w.s.Transit
	}
	order := w.s.candidates()
	if w.s.Node != "" && !slices.Contains(order, w.s.Node) {
		order = append([]string{w.s.Node}, order...)
	} else if w.s.Node != "" {
		order = append([]string{w.s.Node}, slices.DeleteFunc(slices.Clone(order), func(c string) bool { return c == w.s.Node })...)
	}
	var dead []string
	for _, n := range order {
		if w.tried[n] {
			continue
		}
		if !usable(n) {
			dead = append(dead, n)
			continue
		}
		if len(w.tried) > 0 || len(dead) > 0 {
			return n, "configured order, skipping nodes that failed or are dead"
		}
		return n, "configured order"
	}
	if len(dead) > 0 {
		return w.oldestErrorLocked(dead), "every untried node is marked dead; the oldest failure first"
	}
	// Every node failed within StartMemory: begin a fresh cycle.
	clear(w.tried)
	return order[0], "every node failed recently; starting a fresh cycle"
}
