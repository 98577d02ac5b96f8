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

// connFailWatch follows the proxy's failed-connection lines (fed by log
// health's reader) per node.
type connFailWatch struct {
	parser  *connfail.Parser
	window  *connfail.Window
	nodes   []string
	current func() (node, transit string)
	trigger func(reason string)
	now     func() time.Time

	mu       sync.Mutex
	lastNode string
	lastAsk  time.Time
}

func newConnFailWatch(c *config.Config, current func() (string, string), trigger func(string)) (*connFailWatch, error) {
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
	node, _ := w.current()
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
	if node != w.lastNode {
		// After a rotation the new node starts clean: what failed before
		// the switch was judged then.
		w.window.Reset(w.lastNode)
		w.window.Reset(node)
		w.lastNode = node
	}
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
