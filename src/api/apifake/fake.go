// Package apifake is a simulated daemon behind api.Backend: a handful of
// exit nodes, health checks that pass or fail on command, rotation and
// diag. The API's tests use it, and `go run ./src/api/preview` serves the
// live view with it, so the page can be seen and driven without a router.
package apifake

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"surflare-watchdog/src/api"
	"surflare-watchdog/src/history"
)

// subscriberBuffer is how far a subscriber may lag before it misses events
// (like the watchdog, the fake never blocks on a subscriber).
const subscriberBuffer = 64

// failThreshold is the failed checks in a row that make the fake rotate.
const failThreshold = 2

// Backend is the fake daemon. The zero value is not usable; call New.
type Backend struct {
	now func() time.Time

	mu          sync.Mutex
	state       string
	node        string
	candidates  []string
	broken      map[string]bool
	diag        bool
	consecutive int
	counters    map[string]int
	transitions []map[string]any
	lastCheck   map[string]any
	secret      string
	started     time.Time
	subs        map[int]chan api.Event
	nextSub     int
	calls       []string
	hist        *history.Recorder
}

// New returns a healthy fake connected to the first of nodes. secret is
// planted where a careless API would leak it (an auth error in the status,
// a log line); "" plants nothing. now is its clock (nil = time.Now).
func New(nodes []string, secret string, now func() time.Time) *Backend {
	if now == nil {
		now = time.Now
	}
	if len(nodes) == 0 {
		nodes = []string{"Dallas", "Los Angeles", "Chicago", "New York"}
	}
	b := &Backend{
		now:        now,
		state:      "healthy",
		node:       nodes[0],
		candidates: slices.Clone(nodes),
		broken:     map[string]bool{},
		counters:   map[string]int{},
		secret:     secret,
		started:    now(),
		subs:       map[int]chan api.Event{},
	}
	b.counters["fail_threshold"] = failThreshold
	b.hist = history.New(0)
	b.hist.Observe(b.started, history.Up)
	return b
}

// History serves the fake's record of its own transitions (api.Historian).
func (b *Backend) History(_ context.Context, span time.Duration, buckets int) (any, error) {
	return b.hist.View(b.now(), span, buckets), nil
}

// Calls lists the commands received, e.g. "rotate Chicago", "diag true".
func (b *Backend) Calls() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.calls)
}

// Break makes checks through node fail (a lab fault).
func (b *Backend) Break(node string) { b.setBroken(node, true) }

func (b *Backend) setBroken(node string, broken bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.broken[node] = broken
	detail := "fault cleared on " + node
	if broken {
		detail = "fault injected on " + node
	}
	b.emitLocked(api.KindSignal, map[string]any{"name": "early_detector", "state": detectorState(broken), "detail": detail})
}

// Status returns the snapshot, shaped like the watchdog's.
func (b *Backend) Status(context.Context) (any, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	cands := []map[string]any{}
	for _, c := range b.candidates {
		cands = append(cands, map[string]any{"node": c, "current": c == b.node, "failed": b.broken[c], "dead": b.broken[c], "log_errors": boolInt(b.broken[c]) * 12})
	}
	auth := map[string]any{"state": "ok", "failures": 0}
	if b.secret != "" {
		auth["last_error"] = "login failed earlier: password " + b.secret + " rejected"
	}
	st := map[string]any{
		"state":   b.state,
		"node":    b.node,
		"transit": "auto",
		"mode":    "rule",
		"exit":    map[string]any{"ip": exitIP(b.node), "country": "US"},
		"counters": map[string]any{
			"checks": b.counters["checks"], "failed_checks": b.counters["failed_checks"],
			"consecutive_failures": b.consecutive, "fail_threshold": failThreshold,
			"connect_attempts": b.counters["connect_attempts"], "failed_reconnects": 0,
			"rotations": b.counters["rotations"], "storms": 0, "login_attempts": 0, "login_failures": 0, "dropped_events": 0,
		},
		"signals": map[string]any{
			"diag": b.diag, "wan_down": false, "wan_down_probed": false, "auth": auth,
			"detectors": []map[string]any{
				{"name": "early_detector", "state": detectorState(b.broken[b.node])},
				{"name": "log_health", "state": "ok"},
				{"name": "storm503", "state": "ok"},
			},
		},
		"candidates":       cands,
		"started_at":       b.started,
		"uptime_s":         int64(now.Sub(b.started) / time.Second),
		"updated_at":       now,
		"last_transitions": slices.Clone(b.transitions),
	}
	if b.lastCheck != nil {
		st["last_check"] = b.lastCheck
	}
	return st, nil
}

// Nodes returns the per-node health table.
func (b *Backend) Nodes(context.Context) (any, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := []map[string]any{}
	for i, c := range b.candidates {
		row := map[string]any{"node": c, "current": c == b.node, "healthy": !b.broken[c], "log_errors": boolInt(b.broken[c]) * 12}
		if !b.broken[c] {
			row["latency_ms"] = 40 + 17*i
		}
		out = append(out, row)
	}
	return out, nil
}

// Check runs one simulated health check on the current node; after
// failThreshold failures in a row the fake rotates to the next healthy node.
func (b *Backend) Check(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, "check")
	b.checkLocked()
	return nil
}

// Rotate connects to node, or the next candidate when node is "".
func (b *Backend) Rotate(_ context.Context, node string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, "rotate "+node)
	if b.diag {
		return fmt.Errorf("%w: diag mode is on; turn it off first", api.ErrBadRequest)
	}
	if node == "" {
		node = b.nextLocked()
	}
	if !slices.Contains(b.candidates, node) {
		return fmt.Errorf("%w: unknown node %q", api.ErrBadRequest, node)
	}
	b.rotateLocked(node, "rotate requested")
	return nil
}

// Reconnect reconnects on the current node.
func (b *Backend) Reconnect(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, "reconnect")
	if b.diag {
		return fmt.Errorf("%w: diag mode is on; turn it off first", api.ErrBadRequest)
	}
	b.connectLocked(b.node, "reconnect requested")
	return nil
}

// SetDiag turns diag mode on or off.
func (b *Backend) SetDiag(_ context.Context, on bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, fmt.Sprintf("diag %v", on))
	b.diag = on
	if on {
		b.transitionLocked("diag", "diag requested")
	} else {
		b.transitionLocked("healthy", "diag ended")
	}
	return nil
}

// Subscribe streams the fake's events (api.Subscriber).
func (b *Backend) Subscribe() (<-chan api.Event, func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ch := make(chan api.Event, subscriberBuffer)
	id := b.nextSub
	b.nextSub++
	b.subs[id] = ch
	return ch, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if c, ok := b.subs[id]; ok {
			close(c)
			delete(b.subs, id)
		}
	}
}

// Run checks every period until ctx ends, breaking the current node every
// breakEvery checks (0 = never) so the preview shows failures and rotations.
func (b *Backend) Run(ctx context.Context, period time.Duration, breakEvery int) {
	t := time.NewTicker(period)
	defer t.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		b.mu.Lock()
		if breakEvery > 0 && n%breakEvery == 0 && !b.diag {
			for k := range b.broken {
				b.broken[k] = false
			}
			b.broken[b.node] = true
			b.emitLocked(api.KindSignal, map[string]any{"name": "early_detector", "state": "suspect", "detail": "tcp_info score 18 on " + b.node})
		}
		if !b.diag {
			b.checkLocked()
		}
		b.mu.Unlock()
	}
}

func (b *Backend) checkLocked() {
	now := b.now()
	ok := !b.broken[b.node]
	b.counters["checks"]++
	probe := func(name, kind string, latency int) map[string]any {
		p := map[string]any{"name": name, "kind": kind, "path": "tunnel", "target": "198.18.0.10", "ok": ok, "latency_ms": latency}
		if !ok {
			p["error"] = "i/o timeout"
			p["latency_ms"] = 5000
		}
		return p
	}
	outcome, reason, took := "OK", "exit US via "+b.node, 85
	if !ok {
		outcome, reason, took = "PROXY_BROKEN", "every tunnel probe failed", 5000
	}
	res := map[string]any{
		"outcome": outcome, "reason": reason, "at": now, "duration_ms": took,
		"local":     map[string]any{"proxy_alive": true, "vendor_table": true, "fwmark_rule": true},
		"tunnel":    []map[string]any{probe("echo1", "ip-echo", 61+b.counters["checks"]%23), probe("cdn1", "cdn-trace", 48+b.counters["checks"]%17)},
		"tunnel_up": ok,
	}
	if ok {
		res["exit_ip"], res["exit_country"] = exitIP(b.node), "US"
	}
	b.lastCheck = res
	b.emitLocked(api.KindHealth, res)
	if ok {
		b.consecutive = 0
		if b.state != "healthy" {
			b.transitionLocked("healthy", "check passed")
		}
		return
	}
	b.counters["failed_checks"]++
	b.consecutive++
	b.emitLocked(api.KindLog, map[string]any{"level": "WARN", "message": fmt.Sprintf("Health check failed (%d/%d): every tunnel probe failed via %s", b.consecutive, failThreshold, b.node)})
	if b.consecutive < failThreshold {
		b.transitionLocked("degraded", "check failed")
		return
	}
	b.rotateLocked(b.nextLocked(), "fail threshold reached")
}

func (b *Backend) nextLocked() string {
	i := slices.Index(b.candidates, b.node)
	for k := 1; k <= len(b.candidates); k++ {
		c := b.candidates[(i+k)%len(b.candidates)]
		if !b.broken[c] {
			return c
		}
	}
	return b.candidates[(i+1)%len(b.candidates)]
}

func (b *Backend) rotateLocked(node, reason string) {
	from := b.node
	b.counters["rotations"]++
	b.hist.Rotation(b.now())
	b.emitLocked(api.KindRotation, map[string]any{"from": from, "to": node, "reason": reason})
	b.emitLocked(api.KindLog, map[string]any{"level": "INFO", "message": fmt.Sprintf("Node rotation: %s -> %s (%s)", from, node, reason)})
	b.connectLocked(node, reason)
}

func (b *Backend) connectLocked(node, reason string) {
	b.counters["connect_attempts"]++
	b.transitionLocked("connecting", reason)
	b.node = node
	b.consecutive = 0
	if b.secret != "" {
		// A careless daemon might log what it typed at the login prompt.
		b.emitLocked(api.KindLog, map[string]any{"level": "DEBUG", "message": "login prompt answered with " + b.secret})
	}
	b.transitionLocked("healthy", "connected to "+node)
	b.emitLocked(api.KindLog, map[string]any{"level": "INFO", "message": fmt.Sprintf("VPN healthy: exit=US node=%s", node)})
}

// maxTransitions is how many transitions the status keeps.
const maxTransitions = 20

func (b *Backend) transitionLocked(to, reason string) {
	t := map[string]any{"at": b.now(), "from": b.state, "to": to, "reason": reason}
	b.state = to
	b.hist.Observe(b.now(), history.ForEngineState(to))
	b.transitions = append(b.transitions, t)
	if len(b.transitions) > maxTransitions {
		b.transitions = b.transitions[len(b.transitions)-maxTransitions:]
	}
	b.emitLocked(api.KindTransition, t)
}

func (b *Backend) emitLocked(kind string, data any) {
	ev := api.Event{Time: b.now(), Kind: kind, Data: data}
	for _, ch := range b.subs {
		select {
		case ch <- ev:
		default:
		}
	}
}

// exitIP is a lab address per node (198.18.0.0/15, never a real host).
func exitIP(node string) string {
	h := 0
	for _, r := range node {
		h = (h*31 + int(r)) % 250
	}
	return fmt.Sprintf("198.19.%d.%d", 10+h%200, 1+h%250)
}

// detectorState is the early detector's view of a node.
func detectorState(broken bool) string {
	if broken {
		return "suspect"
	}
	return "ok"
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
