package loghealth

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"surflare-watchdog/src/runfiles"
)

// Report is the content of <run_dir>/surflare_node_health.json. The field
// names are a stable interface (LuCI and the CLI read them):
//
//	{
//	  "generated_at": "2026-11-29T14:03:11Z",
//	  "window_minutes": 10,
//	  "threshold": 10,
//	  "nodes": {
//	    "Dallas via Tokyo": {
//	      "node": "Dallas", "transit": "Tokyo",
//	      "error_count": 12, "urltest_healthy": false,
//	      "last_error": "Get \"https://cp.cloudflare.com/generate_204\": context deadline exceeded",
//	      "last_error_at": "2026-11-29T14:03:11Z"
//	    }
//	  },
//	  "stats": {"lines": 5120, "matched": 12, "ignored": 5100, "garbage": 8, "partial": 0, ...}
//	}
//
// A pair is listed only while it has errors in the window: the proxy logs
// failures and is silent on success, so a missing pair is a healthy one.
// urltest_healthy is error_count <= threshold.
type Report struct {
	GeneratedAt   time.Time             `json:"generated_at"`
	WindowMinutes int                   `json:"window_minutes"`
	Threshold     int                   `json:"threshold"`
	Nodes         map[string]PairHealth `json:"nodes"`
	Stats         *Stats                `json:"stats,omitempty"`
}

// PairHealth is one node/transit pair of the report.
type PairHealth struct {
	Node           string    `json:"node"`
	Transit        string    `json:"transit"`
	ErrorCount     int       `json:"error_count"`
	UrltestHealthy bool      `json:"urltest_healthy"`
	LastError      string    `json:"last_error"`
	LastErrorAt    time.Time `json:"last_error_at"`
}

// Stats counts what the reader saw; garbage and partial lines are counted
// and skipped, never fatal.
type Stats struct {
	Lines        int64 `json:"lines"`         // complete lines read
	Matched      int64 `json:"matched"`       // urltest errors
	Ignored      int64 `json:"ignored"`       // other readable lines
	Garbage      int64 `json:"garbage"`       // binary, invalid UTF-8, over-long, malformed matches
	Partial      int64 `json:"partial"`       // cut lines: the first after a seek into the middle, an unterminated last line of a rotated file
	SkippedBytes int64 `json:"skipped_bytes"` // bytes never read because of the tail bound
	Rotations    int64 `json:"rotations"`     // the path named a new file
	Truncations  int64 `json:"truncations"`   // the file shrank under us
	DroppedPairs int64 `json:"dropped_pairs"` // errors of pairs beyond the tracker's cap
}

// WriteReport writes r atomically with mode 0600.
func WriteReport(path string, r Report) error {
	if err := runfiles.WriteJSON(path, r); err != nil {
		return fmt.Errorf("writing node health: %w", err)
	}
	return nil
}

// Snapshot is node health read back from the file, as the engine and the
// CLI consume it. A stale or unreadable file yields an empty snapshot: every
// node counts as healthy, so old data never blocks a rotation.
type Snapshot struct {
	Report
	// Stale is true when the file was older than the stale limit; Nodes is
	// then empty.
	Stale bool
}

// LoadNodeHealth reads the node health file at path. When its generated_at
// is more than stale before now the snapshot is empty and Stale is set. On
// an error (missing, unreadable or malformed file) the returned snapshot is
// still usable and empty, so callers may ignore the error after logging it.
func LoadNodeHealth(path string, now time.Time, stale time.Duration) (*Snapshot, error) {
	empty := &Snapshot{Report: Report{Nodes: map[string]PairHealth{}}}
	data, err := os.ReadFile(path)
	if err != nil {
		return empty, fmt.Errorf("reading node health: %w", err)
	}
	var r Report
	if err := json.Unmarshal(data, &r); err != nil {
		return empty, fmt.Errorf("node health %s: %w", path, err)
	}
	if r.GeneratedAt.IsZero() {
		return empty, fmt.Errorf("node health %s: no generated_at", path)
	}
	if now.Sub(r.GeneratedAt) > stale {
		empty.GeneratedAt, empty.WindowMinutes, empty.Threshold = r.GeneratedAt, r.WindowMinutes, r.Threshold
		empty.Stale = true
		return empty, nil
	}
	if r.Nodes == nil {
		r.Nodes = map[string]PairHealth{}
	}
	return &Snapshot{Report: r}, nil
}

// Errors is the error count of node/transit and when it was produced; ok is
// false when the pair is not in the snapshot. It satisfies the engine's
// NodeHealth interface.
func (s *Snapshot) Errors(node, transit string) (count int, updated time.Time, ok bool) {
	p, ok := s.Nodes[Key(node, transit)]
	return p.ErrorCount, s.GeneratedAt, ok
}

// Dead reports whether node/transit had more than the threshold of urltest
// errors in the window, and how many. A stale snapshot has no dead node.
func (s *Snapshot) Dead(node, transit string) (dead bool, errors int) {
	p, ok := s.Nodes[Key(node, transit)]
	if !ok {
		return false, 0
	}
	return !p.UrltestHealthy, p.ErrorCount
}
