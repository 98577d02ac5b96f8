// Package connfail reads the proxy's failed-connection lines and counts
// them per outbound in a short window.
//
// urltest is the vendor's own health signal, and its cadence is unknown:
// stock sing-box tests every 3 minutes, the lab used 5 s. A failed LAN
// connection, though, is logged at ERROR the moment it fails, whatever the
// cadence, so with LAN traffic a dead node shows here within one connection
// timeout. Two formats exist (DESIGN §9):
//
//	1.8–1.11: ERROR [ID 5.0s] inbound/tproxy[TAG]: process connection from IP:PORT: dial tcp IP:443: i/o timeout
//	1.12+:    ERROR [ID 5.8s] connection: open connection to HOST:443 using outbound/TYPE[TAG]: dial tcp IP:443: i/o timeout
//
// The older one names only the inbound, so its failures belong to whatever
// node is in use when they are read; the newer one names the outbound. The
// patterns are configuration (a vendor build may word them differently);
// the defaults match both formats. Lines that match no pattern cost one
// substring search: the proxy log is a hot path.
package connfail

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"
)

// DefaultPatterns match stock sing-box's failed-connection lines. Named
// groups: outbound (optional: the 1.12+ outbound tag), dest (the
// destination as logged) and error (the cause).
var DefaultPatterns = []string{
	`ERROR \[[^\]]*\] connection: open connection to (?P<dest>\S+) using outbound/[^\[\s]*\[(?P<outbound>[^\]]*)\]: (?P<error>.*)$`,
	`ERROR \[[^\]]*\] inbound/[^\[\s]*\[[^\]]*\]: process connection from \S+: (?P<error>(?:dial \S+ (?P<dest>\S+?):? )?.*)$`,
}

// marker is a substring every default line has; a line without it is not
// looked at further (see Parser.Parse).
const marker = " connection"

// Failure is one failed proxied connection.
type Failure struct {
	Outbound string // the outbound tag, "" when the format does not say
	Dest     string // destination as logged ("1.2.3.4:443", "example.com:443")
	Error    string // the cause as logged
	Class    Class
}

// Class is the kind of failure; only some say anything about the node.
type Class string

const (
	Timeout  Class = "timeout"  // no answer: the node or its path is dead
	Refused  Class = "refused"  // something answered no
	Reset    Class = "reset"    // cut mid-way
	Resolve  Class = "resolve"  // a name did not resolve: DNS, not the node
	Canceled Class = "canceled" // the client went away: nobody's fault
	Other    Class = "other"
)

// Evidence reports whether a failure of this class counts against the
// outbound: a client that hangs up or a name that does not exist does not.
func (c Class) Evidence() bool { return c != Canceled && c != Resolve }

func classify(e string) Class {
	e = strings.ToLower(e)
	switch {
	case strings.Contains(e, "context canceled"), strings.Contains(e, "use of closed network connection"), strings.Contains(e, "broken pipe"):
		return Canceled
	case strings.Contains(e, "no such host"), strings.Contains(e, "lookup "):
		return Resolve
	case strings.Contains(e, "timeout"), strings.Contains(e, "deadline exceeded"), strings.Contains(e, "no route to host"), strings.Contains(e, "network is unreachable"):
		return Timeout
	case strings.Contains(e, "connection refused"):
		return Refused
	case strings.Contains(e, "connection reset"), strings.Contains(e, "eof"):
		return Reset
	}
	return Other
}

// Parser matches lines against the configured patterns.
type Parser struct {
	res        []*regexp.Regexp
	onlyMarker bool // every pattern needs marker: skip lines without it
}

// NewParser compiles patterns (DefaultPatterns when empty). Each needs a
// group named error; outbound and dest are optional.
func NewParser(patterns []string) (*Parser, error) {
	if len(patterns) == 0 {
		patterns = DefaultPatterns
	}
	p := &Parser{onlyMarker: true}
	for i, s := range patterns {
		re, err := regexp.Compile(s)
		if err != nil {
			return nil, fmt.Errorf("connection failure pattern %d: %w", i+1, err)
		}
		if re.SubexpIndex("error") < 0 {
			return nil, fmt.Errorf("connection failure pattern %d: needs a group named error: (?P<error>...)", i+1)
		}
		if !strings.Contains(s, marker) {
			p.onlyMarker = false
		}
		p.res = append(p.res, re)
	}
	return p, nil
}

// Parse returns the failure a line reports, if it reports one.
func (p *Parser) Parse(line string) (Failure, bool) {
	if p.onlyMarker && !strings.Contains(line, marker) {
		return Failure{}, false
	}
	if !strings.Contains(line, "ERROR") {
		return Failure{}, false
	}
	for _, re := range p.res {
		m := re.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		f := Failure{Error: m[re.SubexpIndex("error")]}
		if i := re.SubexpIndex("outbound"); i >= 0 {
			f.Outbound = m[i]
		}
		if i := re.SubexpIndex("dest"); i >= 0 {
			f.Dest = m[i]
		}
		f.Class = classify(f.Error)
		return f, true
	}
	return Failure{}, false
}

// Window counts evidence failures per outbound over the last Span. The
// failures of lines without an outbound go to the node in use when they are
// added (the caller passes it). Safe for concurrent use; memory is bounded by
// Max entries per outbound.
type Window struct {
	Span time.Duration
	Max  int

	mu  sync.Mutex
	per map[string][]entry
}

type entry struct {
	at   time.Time
	dest string
}

// NewWindow returns a window of span keeping at most max failures per
// outbound (older ones beyond max are forgotten first).
func NewWindow(span time.Duration, max int) *Window {
	if max <= 0 {
		max = 64
	}
	return &Window{Span: span, Max: max, per: map[string][]entry{}}
}

// Add records f at now, for outbound f.Outbound or, when that is empty,
// current. It returns how many evidence failures that outbound has in the
// window, counting this one, and to how many distinct destinations: one
// dead website fails to one, a dead node to every one. Failures that are no
// evidence are not kept and return 0, 0.
func (w *Window) Add(f Failure, current string, now time.Time) (n, dests int) {
	if !f.Class.Evidence() {
		return 0, 0
	}
	key := f.Outbound
	if key == "" {
		key = current
	}
	if key == "" {
		return 0, 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	es := prune(w.per[key], now.Add(-w.Span))
	es = append(es, entry{now, f.Dest})
	if len(es) > w.Max {
		es = es[len(es)-w.Max:]
	}
	w.per[key] = es
	return len(es), distinct(es)
}

// Count is how many evidence failures outbound has in the window at now,
// and to how many distinct destinations.
func (w *Window) Count(outbound string, now time.Time) (n, dests int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	es := prune(w.per[outbound], now.Add(-w.Span))
	if len(es) == 0 {
		delete(w.per, outbound)
	} else {
		w.per[outbound] = es
	}
	return len(es), distinct(es)
}

// CountAsOf is Count over the failures recorded at or before asOf (still
// within the window at now): what was known when asOf came.
func (w *Window) CountAsOf(outbound string, asOf, now time.Time) (n, dests int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	es := prune(w.per[outbound], now.Add(-w.Span))
	k := 0
	for k < len(es) && !es[k].at.After(asOf) {
		k++
	}
	return k, distinct(es[:k])
}

func distinct(es []entry) int {
	seen := make(map[string]struct{}, len(es))
	for _, e := range es {
		seen[e.dest] = struct{}{}
	}
	return len(seen)
}

// Reset forgets outbound's failures: a new tunnel (a rotation, or a
// same-node reconnect with a new proxy) starts clean, and the old one's
// count says nothing about it.
func (w *Window) Reset(outbound string) {
	w.mu.Lock()
	delete(w.per, outbound)
	w.mu.Unlock()
}

// prune drops the entries before cut; es is in time order.
func prune(es []entry, cut time.Time) []entry {
	i := 0
	for i < len(es) && es[i].at.Before(cut) {
		i++
	}
	return es[i:]
}
