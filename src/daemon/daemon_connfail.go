package daemon

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"surflare-watchdog/src/config"
	"surflare-watchdog/src/detectors/connfail"
	"surflare-watchdog/src/suggest"
)

// The failed-connection signal's rule: this many evidence failures of LAN
// connections through the node in use, to at least connFailDests distinct
// destinations, within connFailWindow ask for a check. One dead website
// fails to one destination however often it is retried; a dead node fails
// to all of them. The confirming check decides, as for every signal.
const (
	connFailWindow = 10 * time.Second
	connFailMin    = 3
	connFailDests  = 2
	connFailGap    = 10 * time.Second // the least time between two requests
)

// tunnelID names the tunnel in use: its node and a generation that moves
// with every new tunnel (fastDetectors.newTunnel: a finished connect, a new
// proxy process). Two tunnels on the same node differ by generation.
type tunnelID struct {
	node string
	gen  uint64
}

// connFailWatch follows the proxy's failed-connection lines (fed by log
// health's reader) per tunnel.
type connFailWatch struct {
	parser  *connfail.Parser
	window  *connfail.Window
	nodes   []string
	current func() tunnelID
	trigger func(reason string)
	now     func() time.Time

	mu      sync.Mutex
	last    tunnelID // the tunnel the window's failures were read on
	lastAsk time.Time
}

func newConnFailWatch(c *config.Config, current func() tunnelID, trigger func(string)) (*connFailWatch, error) {
	p, err := connfail.NewParser(c.FastSignal.ConnFailPatterns)
	if err != nil {
		return nil, err
	}
	return &connFailWatch{parser: p, window: connfail.NewWindow(connFailWindow, 64), nodes: c.Main.Candidates,
		current: current, trigger: trigger, now: time.Now}, nil
}

// observe reads one ERROR line of the proxy log.
func (w *connFailWatch) observe(line string) {
	f, ok := w.parser.Parse(line)
	if !ok {
		return
	}
	cur := w.current()
	node := cur.node
	if node == "" {
		return
	}
	// An outbound tag that names no candidate (a vendor build may tag its
	// outbounds otherwise) is the node in use.
	if f.Outbound != "" {
		if n, known := suggest.Find(f.Outbound, w.nodes); known {
			f.Outbound = n
		} else {
			f.Outbound = ""
		}
	}
	now := w.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.followLocked(cur)
	n, dests := w.window.Add(f, node, now)
	if f.Outbound != "" && !strings.EqualFold(f.Outbound, node) {
		return // another node's failure says nothing about this one
	}
	if n < connFailMin || dests < connFailDests || now.Sub(w.lastAsk) < connFailGap {
		return
	}
	w.lastAsk = now
	w.trigger(fmt.Sprintf("CONN_FAIL: %d LAN connections to %d destinations failed via %s in %s (%s)",
		n, dests, node, connFailWindow, f.Class))
}

// followLocked starts the window clean when the tunnel in use is not the
// one its failures were read on. A new tunnel, not a new node: after a
// same-node reconnect for a crashed proxy the old proxy's failures (the
// resets of the connections it held as it died) were judged when they
// were read, and counted against the fresh tunnel they asked for one
// needless rotation 2 s after the reconnect (the chaos log: Dallas -> Los
// Angeles). A rotation is a new tunnel too.
func (w *connFailWatch) followLocked(cur tunnelID) {
	if cur == w.last {
		return
	}
	w.window.Reset(w.last.node)
	w.window.Reset(cur.node)
	w.last = cur
}
