package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// metricsContentType is the Prometheus text exposition format 0.0.4.
const metricsContentType = "text/plain; version=0.0.4; charset=utf-8"

// maxOutcomes bounds the outcome label of detections (the health package
// has a handful; anything beyond is folded into "other").
const maxOutcomes = 16

// statusView is the part of the watchdog's status snapshot that metrics
// read, by its stable JSON field names.
type statusView struct {
	State   string `json:"state"`
	Node    string `json:"node"`
	Transit string `json:"transit"`
	Mode    string `json:"mode"`
	Exit    struct {
		Country string `json:"country"`
	} `json:"exit"`
	Counters  map[string]float64 `json:"counters"`
	LastCheck *struct {
		Outcome    string      `json:"outcome"`
		At         time.Time   `json:"at"`
		DurationMS float64     `json:"duration_ms"`
		Tunnel     []probeView `json:"tunnel"`
		Proxy      *probeView  `json:"proxy"`
		Egress     []probeView `json:"egress"`
	} `json:"last_check"`
	Signals struct {
		Diag      bool `json:"diag"`
		WANDown   bool `json:"wan_down"`
		Detectors []struct {
			Name  string `json:"name"`
			State string `json:"state"`
		} `json:"detectors"`
	} `json:"signals"`
	Candidates []struct {
		Node      string  `json:"node"`
		Dead      bool    `json:"dead"`
		Failed    bool    `json:"failed"`
		LogErrors float64 `json:"log_errors"`
	} `json:"candidates"`
	UptimeS float64 `json:"uptime_s"`
}

type probeView struct {
	Name      string  `json:"name"`
	Kind      string  `json:"kind"`
	Path      string  `json:"path"`
	OK        bool    `json:"ok"`
	Skipped   bool    `json:"skipped"`
	LatencyMS float64 `json:"latency_ms"`
}

// counterMetrics maps the status counters to metric names; counters that
// are really "so far in a row" are gauges.
var counterMetrics = []struct{ key, name, typ, help string }{
	{"checks", "surflare_watchdog_checks_total", "counter", "Health checks run since the daemon started."},
	{"failed_checks", "surflare_watchdog_failed_checks_total", "counter", "Health checks that detected a problem."},
	{"consecutive_failures", "surflare_watchdog_consecutive_failures", "gauge", "Failed health checks in a row; a reconnect starts at the fail threshold."},
	{"fail_threshold", "surflare_watchdog_fail_threshold", "gauge", "Failed health checks in a row that start a reconnect."},
	{"connect_attempts", "surflare_watchdog_connect_attempts_total", "counter", "Connects started since the daemon started."},
	{"failed_reconnects", "surflare_watchdog_failed_reconnects", "gauge", "Reconnects that failed in a row."},
	{"rotations", "surflare_watchdog_rotations_total", "counter", "Node rotations since the daemon started."},
	{"storms", "surflare_watchdog_storms_total", "counter", "Times every candidate failed and storm protection paused reconnects."},
	{"login_attempts", "surflare_watchdog_login_attempts_total", "counter", "Vendor logins attempted since the daemon started."},
	{"login_failures", "surflare_watchdog_login_failures", "gauge", "Failed vendor logins since the last successful one."},
	{"dropped_events", "surflare_watchdog_dropped_events_total", "counter", "Events the watchdog dropped for slow subscribers."},
}

// detections counts health results by outcome as they are published.
type detections struct {
	mu sync.Mutex
	n  map[string]int64
}

func (d *detections) add(frame []byte) {
	var ev struct {
		Data struct {
			Outcome string `json:"outcome"`
		} `json:"data"`
	}
	if json.Unmarshal(frame, &ev) != nil || ev.Data.Outcome == "" {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n == nil {
		d.n = map[string]int64{}
	}
	o := ev.Data.Outcome
	if _, ok := d.n[o]; !ok && len(d.n) >= maxOutcomes {
		o = "other"
	}
	d.n[o]++
}

func (d *detections) snapshot() map[string]int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]int64, len(d.n))
	for k, v := range d.n {
		out[k] = v
	}
	return out
}

// exposition collects metric families in order and writes them with one
// HELP and TYPE line each.
type exposition struct {
	families []*family
	byName   map[string]*family
}

type family struct {
	name, help, typ string
	samples         []string
}

// add appends one sample; labels are name, value pairs.
func (e *exposition) add(name, typ, help string, v float64, labels ...string) {
	if e.byName == nil {
		e.byName = map[string]*family{}
	}
	f, ok := e.byName[name]
	if !ok {
		f = &family{name: name, help: help, typ: typ}
		e.byName[name] = f
		e.families = append(e.families, f)
	}
	var b strings.Builder
	b.WriteString(name)
	if len(labels) > 0 {
		b.WriteByte('{')
		for i := 0; i+1 < len(labels); i += 2 {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%s=\"%s\"", labels[i], escapeLabel(labels[i+1]))
		}
		b.WriteByte('}')
	}
	b.WriteByte(' ')
	b.WriteString(formatValue(v))
	f.samples = append(f.samples, b.String())
}

func (e *exposition) bytes() []byte {
	var b bytes.Buffer
	for _, f := range e.families {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", f.name, escapeHelp(f.help), f.name, f.typ)
		for _, s := range f.samples {
			b.WriteString(s)
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

var (
	labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)

func escapeLabel(s string) string { return labelEscaper.Replace(s) }
func escapeHelp(s string) string  { return helpEscaper.Replace(s) }

func formatValue(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// getMetrics serves the Prometheus text exposition. A failing status call
// still answers 200 with surflare_watchdog_up 0 and the API's own metrics,
// as scrapers expect.
func (s *Server) getMetrics(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), backendTimeout)
	defer cancel()
	var e exposition
	st, err := s.statusView(ctx)
	e.add("surflare_watchdog_up", "gauge", "1 if the daemon answered the status request of this scrape.", b2f(err == nil))
	if err == nil {
		s.statusMetrics(&e, st)
	}
	s.apiMetrics(&e)
	processMetrics(&e)
	w.Header().Set("Content-Type", metricsContentType)
	w.Write(e.bytes())
}

func (s *Server) statusView(ctx context.Context) (*statusView, error) {
	raw, err := s.opts.Backend.Status(ctx)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, fmt.Errorf("encoding status: %w", err)
	}
	var st statusView
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("reading status: %w", err)
	}
	return &st, nil
}

func (s *Server) statusMetrics(e *exposition, st *statusView) {
	e.add("surflare_watchdog_state", "gauge", "The watchdog's current state (the series with value 1).", 1, "state", st.State)
	e.add("surflare_watchdog_node_info", "gauge", "The current exit node, relay, mode and exit country.", 1,
		"node", st.Node, "transit", st.Transit, "mode", st.Mode, "exit_country", st.Exit.Country)
	e.add("surflare_watchdog_uptime_seconds", "gauge", "Seconds since the daemon started.", st.UptimeS)
	e.add("surflare_watchdog_diag", "gauge", "1 while diagnostics mode pauses checks and reconnects.", b2f(st.Signals.Diag))
	e.add("surflare_watchdog_wan_down", "gauge", "1 while the WAN is down.", b2f(st.Signals.WANDown))

	known := map[string]bool{}
	for _, c := range counterMetrics {
		known[c.key] = true
		if v, ok := st.Counters[c.key]; ok {
			e.add(c.name, c.typ, c.help, v)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(st.Counters)) {
		if !known[k] {
			e.add("surflare_watchdog_counter", "gauge", "Status counters without a metric of their own.", st.Counters[k], "name", k)
		}
	}
	for _, d := range st.Signals.Detectors {
		e.add("surflare_watchdog_signal", "gauge", "Each detector's current state (the series with value 1).", 1,
			"name", d.Name, "state", d.State)
	}
	for _, c := range st.Candidates {
		e.add("surflare_watchdog_candidate_dead", "gauge", "1 if log health marks the candidate node dead.", b2f(c.Dead), "node", c.Node)
		e.add("surflare_watchdog_candidate_log_errors", "gauge", "Proxy log errors of the candidate node in the log-health window.", c.LogErrors, "node", c.Node)
	}
	if lc := st.LastCheck; lc != nil {
		e.add("surflare_watchdog_last_check_outcome", "gauge", "Outcome of the last health check (the series with value 1).", 1, "outcome", lc.Outcome)
		e.add("surflare_watchdog_last_check_duration_seconds", "gauge", "How long the last health check took.", lc.DurationMS/1000)
		if !lc.At.IsZero() {
			e.add("surflare_watchdog_last_check_timestamp_seconds", "gauge", "When the last health check ran (Unix time).", float64(lc.At.UnixMilli())/1000)
		}
		probes := slices.Clone(lc.Tunnel)
		if lc.Proxy != nil {
			probes = append(probes, *lc.Proxy)
		}
		probes = append(probes, lc.Egress...)
		for _, p := range probes {
			if p.Skipped {
				continue
			}
			e.add("surflare_watchdog_probe_success", "gauge", "1 if the probe succeeded in the last health check.", b2f(p.OK),
				"probe", p.Name, "kind", p.Kind, "path", p.Path)
			e.add("surflare_watchdog_probe_latency_seconds", "gauge", "Probe latency in the last health check.", p.LatencyMS/1000,
				"probe", p.Name, "kind", p.Kind, "path", p.Path)
		}
	}
}

func (s *Server) apiMetrics(e *exposition) {
	det := s.detections.snapshot()
	for _, o := range slices.Sorted(maps.Keys(det)) {
		e.add("surflare_watchdog_detections_total", "counter", "Health results seen by the web API since it started, by outcome.", float64(det[o]), "outcome", o)
	}
	kinds := s.hub.kindCounts()
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		e.add("surflare_watchdog_api_events_total", "counter", "Events published to the live stream, by kind.", float64(kinds[k]), "kind", k)
	}
	e.add("surflare_watchdog_api_dropped_events_total", "counter", "Live-stream events dropped because the hub was behind.", float64(s.hub.droppedEvents.Load()))
	e.add("surflare_watchdog_api_websocket_clients", "gauge", "Open live-view websockets.", float64(s.hub.nClients.Load()))
	e.add("surflare_watchdog_api_dropped_clients_total", "counter", "Websocket clients dropped for reading too slowly.", float64(s.hub.droppedClients.Load()))
	e.add("surflare_watchdog_api_auth_failures_total", "counter", "Requests refused for a missing or invalid token.", float64(s.authFailures.Load()))
	e.add("surflare_watchdog_api_rate_limited_total", "counter", "Requests refused because their address failed authentication too often.", float64(s.rateLimited.Load()))
}
