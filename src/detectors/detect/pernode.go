package detect

import (
	"fmt"
	"sync"
	"time"
)

// Per-node kernel evidence (issue 19). The proxy carries only the tunnel of
// the node in use, so what the kernel shows about its sockets to the relays
// is that node's: silent flows (a node black-hole behind a live relay) and
// connections stuck in SYN_SENT (nothing in front of the node answers a
// handshake). NodeTally attributes every sample to the node in use when it
// was taken and keeps the last evidenceMemory of samples for that node
// only, so evidence seen on a node we left never corroborates a failed
// check on the node we moved to (Detector.Evidence alone is not bound to a
// node). It costs nothing beyond the early detector's own sample: it reads
// the same []Conn through Options.OnSample.
const (
	// synStallRetries is how many SYN retransmissions make a handshake
	// stalled: the second goes out 2 s (kernels ≥ 6.7, linear SYN
	// timeouts) to 3 s (older, 1 s then 2 s backoff) after the first SYN,
	// past a lossy path's single lost SYN or SYN-ACK. Measured here
	// (kernel 6.18): tcpi_retransmits counts them, tcpi_backoff stays 0
	// until the fifth.
	synStallRetries = 2
	// synStallMin stalled handshakes in one sample, with none of the
	// proxy's established connections to the relays answered within
	// answeredWithin, are evidence: under loss some handshakes stall, but
	// the established flows keep getting answers.
	synStallMin    = 3
	answeredWithin = 3 * time.Second
)

// NodeTally counts the kernel's signs per node in use. Safe for concurrent
// use.
type NodeTally struct {
	node      func() string
	threshold int // the detector's threshold: silent flows worth it are evidence

	mu      sync.Mutex
	current string
	since   time.Time
	samples []nodeSample // the current node's, oldest first, at most evidenceMemory old
}

type nodeSample struct {
	at                        time.Time
	silent, stalled, answered int
}

// NodeCounts is one node's kernel signs in the last evidenceMemory: the most
// silent flows and stalled handshakes any sample saw, and the samples.
type NodeCounts struct {
	Node            string
	Silent, Stalled int
	Samples         int
}

// NewNodeTally attributes samples to node() (the node in use; "" = none:
// the sample is not counted). threshold is the detector's (Options.Threshold):
// silent flows worth it are evidence, as for Detector.Evidence.
func NewNodeTally(node func() string, threshold int) *NodeTally {
	return &NodeTally{node: node, threshold: threshold}
}

// Observe is an Options.OnSample: it counts one sample for the node in use.
func (t *NodeTally) Observe(now time.Time, conns []Conn) {
	node := t.node()
	var s nodeSample
	s.at = now
	for _, c := range conns {
		if !c.Outbound || !c.HasInfo {
			continue
		}
		switch {
		case c.State == StateSynSent && c.Retrans >= synStallRetries:
			s.stalled++
		case c.State == StateEstablished && c.LastDataRecv < answeredWithin:
			s.answered++
		}
		if Silent(c) {
			s.silent++
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if node != t.current {
		t.current, t.since, t.samples = node, now, t.samples[:0]
	}
	if node == "" {
		return
	}
	cut := 0
	for cut < len(t.samples) && now.Sub(t.samples[cut].at) > evidenceMemory {
		cut++
	}
	t.samples = append(t.samples[cut:], s)
}

// Counts is node's tally at now (zero unless node is the one in use).
func (t *NodeTally) Counts(node string, now time.Time) NodeCounts {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := NodeCounts{Node: node}
	if node == "" || node != t.current {
		return n
	}
	for _, s := range t.samples {
		if now.Sub(s.at) > evidenceMemory || s.at.After(now) {
			continue
		}
		n.Samples++
		n.Silent = max(n.Silent, s.silent)
		if s.answered == 0 {
			n.Stalled = max(n.Stalled, s.stalled)
		}
	}
	return n
}

// Corroborate is watchdog.Corroborator: node is broken by the kernel's
// account when, since it came into use and within the last
// evidenceMemory, one sample had silent flows worth the detector's
// threshold, or synStallMin stalled handshakes to the relays while none of
// the established ones was answered.
func (t *NodeTally) Corroborate(now time.Time, node, _ string) (string, bool) {
	n := t.Counts(node, now)
	switch {
	case n.Silent > 0 && n.Silent*pointsPerSign >= t.threshold:
		return fmt.Sprintf("%d of the proxy's connections to the relays silent for over %s after their data was acknowledged, on %s (sock_diag)",
			n.Silent, silentAfter, node), true
	case n.Stalled >= synStallMin:
		return fmt.Sprintf("%d of the proxy's connections to the relays stuck in SYN_SENT after %d retries and none answering, on %s (sock_diag)",
			n.Stalled, synStallRetries, node), true
	}
	return "", false
}
