// Package nodeprobe measures exit nodes one after another, so a user (or
// LuCI) can pick a node by numbers instead of by name: for each node the
// vendor is switched to it and the tunnel is measured from the router —
// tunnel set-up time (L4), HTTP time to first byte (L7), the exit's
// address and country, the relay path's SYN ratio and RST injections (moat
// counters), the share of relay connections that negotiated SACK, the
// relay addresses in use, and the proxy's own urltest verdict (node health
// file).
//
// The package only measures. Switching nodes is the caller's Switcher: the
// daemon lends the vendor from its supervisor (the kill switch stays armed
// and the original node comes back afterwards, see
// watchdog.LendVendor); without a daemon the CLI drives the vendor CLI
// itself. Results go to <run_dir>/surflare_probe_results.json.
//
// # What L4 means through a transparent proxy
//
// The proxy accepts a connection locally before it has opened the tunnel,
// so connect() returns at once whatever the node. The end-to-end set-up
// shows only as extra time on the first request of a fresh connection. So
// each sample opens a connection, sends two HTTP requests on it one after
// the other and times the first byte of each answer: L7 is the second
// (warm) request's time to first byte — one round trip through the open
// tunnel plus the server — and L4 is how much longer the first (cold)
// request took: the tunnel set-up (with an https:// target, the TLS
// handshake's round trips too). ColdTTFB is the first request's time as a
// browser would feel it.
package nodeprobe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sort"
	"time"

	"surflare-watchdog/src/firewall"
	"surflare-watchdog/src/runfiles"
)

// ResultsFile is the results file's name inside the run dir (the vendor
// contract's /run/surflare_probe_results.json).
const ResultsFile = runfiles.ProbeResultsFile

// Defaults for Options left zero.
const (
	DefaultSamples      = 3
	DefaultTimeout      = 5 * time.Second  // one request
	DefaultReadyTimeout = 15 * time.Second // a switched node's first answer
)

// Switcher moves the vendor to a node. Switch returns once the node's
// tunnel is up locally (proxy running, tables in place); the data plane is
// what the probe then measures.
type Switcher interface {
	Switch(ctx context.Context, node string) error
}

// Kernel is what the router's kernel knows about the relay path. Either
// method may fail (no moat installed, no sock_diag): the result then leaves
// those fields empty.
type Kernel interface {
	// Moat reads the relay-path counters.
	Moat(ctx context.Context) (firewall.Moat, error)
	// RelaySockets lists the proxy's TCP connections to the vendor's
	// servers now.
	RelaySockets(ctx context.Context) ([]Socket, error)
}

// Socket is one of the proxy's connections to a relay.
type Socket struct {
	Remote netip.AddrPort
	SACK   bool          // SACK was negotiated (tcp_info options)
	RTT    time.Duration // the kernel's smoothed RTT to the relay
}

// Urltest is the proxy's own verdict on a node from the node health file:
// the error counts of its NODE via TRANSIT pairs.
type Urltest struct {
	Healthy bool           `json:"healthy"`          // no pair above the threshold
	Errors  int            `json:"errors"`           // sum over the pairs
	Pairs   map[string]int `json:"pairs,omitempty"`  // transit -> errors, pairs with errors only
	Stale   bool           `json:"stale,omitempty"`  // the file was too old: no evidence
	Source  string         `json:"source,omitempty"` // why there is no verdict
}

// Options configure Run.
type Options struct {
	Nodes   []string // in order
	Transit string   // shown in the results; the Switcher applies it
	// TTFBURL is the HTTP URL timed for L4/L7 (the config's search probe).
	TTFBURL string
	// EchoURL answers with the exit's address and country (ip-echo JSON
	// or a CDN trace).
	EchoURL string
	Samples int           // connections per node (default DefaultSamples)
	Timeout time.Duration // one request (default DefaultTimeout)
	// ReadyTimeout bounds the wait for a switched node's first answer.
	ReadyTimeout time.Duration

	Switcher Switcher
	Kernel   Kernel                                                            // optional
	Health   func(node string) Urltest                                         // optional
	Dial     func(ctx context.Context, network, addr string) (net.Conn, error) // default: plain dialer (the vendor's table sends it into the tunnel)
	Progress func(Progress)                                                    // optional; called from Run's goroutine
	Now      func() time.Time                                                  // default time.Now
	Log      *slog.Logger                                                      // default: subsystem nodeprobe
}

// Progress is one step of a run, for progress lines.
type Progress struct {
	Index, Total int    // 1-based node number
	Node         string // the node being probed
	Phase        string // PhaseSwitching, PhaseMeasuring or PhaseDone
	Result       *Result
}

// Phases of one node.
const (
	PhaseSwitching = "switching"
	PhaseMeasuring = "measuring"
	PhaseDone      = "done"
)

// Result is one node's measurement. Durations are milliseconds; a pointer
// field is null when it could not be measured.
type Result struct {
	Node       string    `json:"node"`
	Transit    string    `json:"transit"`
	OK         bool      `json:"ok"` // the tunnel carried the probes
	Error      string    `json:"error,omitempty"`
	At         time.Time `json:"at"`
	DurationMS int64     `json:"duration_ms"` // the whole node: switch + measurement

	L4RTTMS    *float64 `json:"l4_rtt_ms"`    // tunnel set-up (cold minus warm TTFB)
	L7TTFBMS   *float64 `json:"l7_ttfb_ms"`   // warm request: one round trip through the tunnel
	ColdTTFBMS *float64 `json:"cold_ttfb_ms"` // fresh connection: what a browser feels
	HTTPStatus int      `json:"http_status,omitempty"`
	Samples    int      `json:"samples"`

	ExitIP      string `json:"exit_ip,omitempty"`
	ExitCountry string `json:"exit_country,omitempty"`

	SynOut      uint64   `json:"syn_out"`
	SynAckIn    uint64   `json:"synack_in"`
	SynRatio    *float64 `json:"syn_ratio"`    // SYN-ACKs per SYN to relays during the probe
	RSTInjected uint64   `json:"rst_injected"` // RSTs from relays during the probe
	MoatError   string   `json:"moat_error,omitempty"`

	SACKRate   *float64 `json:"sack_rate"`    // share of relay connections with SACK
	RelayRTTMS *float64 `json:"relay_rtt_ms"` // kernel RTT to the relay (median)
	ServerIPs  []string `json:"server_ips"`   // relays the proxy talked to

	Urltest *Urltest `json:"urltest,omitempty"`
}

// Report is the results file.
type Report struct {
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	Transit    string    `json:"transit"`
	// OriginalNode is the node the tunnel was on before, and is on again
	// after the probe.
	OriginalNode string   `json:"original_node,omitempty"`
	Nodes        []Result `json:"nodes"`
}

func (o *Options) defaults() error {
	if o.Switcher == nil {
		return errors.New("node probe: no way to switch nodes")
	}
	if len(o.Nodes) == 0 {
		return errors.New("node probe: no nodes to probe")
	}
	if o.TTFBURL == "" && o.EchoURL == "" {
		return errors.New("node probe: no probe target (config probe sections)")
	}
	if o.Samples <= 0 {
		o.Samples = DefaultSamples
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = DefaultReadyTimeout
	}
	if o.Dial == nil {
		d := &net.Dialer{}
		o.Dial = d.DialContext
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default().With("subsystem", "nodeprobe")
	}
	return nil
}

// Run probes every node in turn and returns the report. A node that fails
// is recorded with its error and the run goes on; Run itself fails only on
// bad options or when ctx ends (the report then holds the nodes done).
// Run leaves the vendor on the last node: restoring is the caller's job.
func Run(ctx context.Context, o Options) (Report, error) {
	if err := o.defaults(); err != nil {
		return Report{}, err
	}
	rep := Report{StartedAt: o.Now(), Transit: o.Transit, Nodes: []Result{}}
	for i, node := range o.Nodes {
		if ctx.Err() != nil {
			break
		}
		progress := func(phase string, r *Result) {
			if o.Progress != nil {
				o.Progress(Progress{Index: i + 1, Total: len(o.Nodes), Node: node, Phase: phase, Result: r})
			}
		}
		r := probeNode(ctx, &o, node, progress)
		rep.Nodes = append(rep.Nodes, r)
		progress(PhaseDone, &r)
		o.Log.Info(fmt.Sprintf("Node probe: %s %s", node, r.Summary()))
	}
	rep.FinishedAt = o.Now()
	return rep, ctx.Err()
}

// probeNode switches to node and measures it.
func probeNode(ctx context.Context, o *Options, node string, progress func(string, *Result)) (r Result) {
	start := o.Now()
	r = Result{Node: node, Transit: o.Transit, At: start}
	defer func() { r.DurationMS = o.Now().Sub(start).Milliseconds() }()
	var m0 firewall.Moat
	var moatErr error
	if o.Kernel != nil {
		m0, moatErr = o.Kernel.Moat(ctx)
	}
	progress(PhaseSwitching, nil)
	if err := o.Switcher.Switch(ctx, node); err != nil {
		r.Error = "switching: " + err.Error()
		return r
	}
	progress(PhaseMeasuring, nil)
	socks := measure(ctx, o, &r)
	if o.Kernel != nil {
		if moatErr == nil {
			m1, err := o.Kernel.Moat(ctx)
			if err == nil {
				r.setMoat(m0, m1)
			} else {
				moatErr = err
			}
		}
		if moatErr != nil {
			r.MoatError = moatErr.Error()
		}
		r.setSockets(socks)
	}
	if o.Health != nil {
		u := o.Health(node)
		r.Urltest = &u
	}
	return r
}

// setMoat fills the counter deltas between two readings.
func (r *Result) setMoat(before, after firewall.Moat) {
	d := func(a, b uint64) uint64 {
		if a < b { // counters were reset (table re-created): count from zero
			return a
		}
		return a - b
	}
	r.SynOut, r.SynAckIn = d(after.SynOut, before.SynOut), d(after.SynAckIn, before.SynAckIn)
	r.RSTInjected = d(after.RstIn, before.RstIn)
	if r.SynOut > 0 {
		v := float64(r.SynAckIn) / float64(r.SynOut)
		r.SynRatio = &v
	}
}

// setSockets fills SACK rate, relay RTT and server IPs from the relay
// sockets seen during the measurement.
func (r *Result) setSockets(socks []Socket) {
	r.ServerIPs = []string{}
	if len(socks) == 0 {
		return
	}
	seen := map[netip.Addr]bool{}
	sack := 0
	var rtts []float64
	for _, s := range socks {
		if s.SACK {
			sack++
		}
		if s.RTT > 0 {
			rtts = append(rtts, ms(s.RTT))
		}
		if a := s.Remote.Addr(); !seen[a] {
			seen[a] = true
			r.ServerIPs = append(r.ServerIPs, a.String())
		}
	}
	sort.Strings(r.ServerIPs)
	rate := float64(sack) / float64(len(socks))
	r.SACKRate = &rate
	if len(rtts) > 0 {
		v := median(rtts)
		r.RelayRTTMS = &v
	}
}

// Summary is one line for progress output and the log.
func (r Result) Summary() string {
	secs := fmt.Sprintf("%.1f s", float64(r.DurationMS)/1000)
	if !r.OK {
		return fmt.Sprintf("failed in %s: %s", secs, r.Error)
	}
	return fmt.Sprintf("%s — L4 %s, L7 %s, exit %s %s", secs, fmtMS(r.L4RTTMS), fmtMS(r.L7TTFBMS), orDash(r.ExitCountry), orDash(r.ExitIP))
}

func fmtMS(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f ms", *v)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
