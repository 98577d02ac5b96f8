// Package detect is the early detector: it notices a black-holed tunnel
// path from the kernel's TCP state of the proxy's own connections, seconds
// before the HTTP probes time out. Every Interval it samples tcp_info of the
// proxy's sockets (sock_diag, see ProxySampler) and scores each outbound
// connection: +2 when cwnd ≤ 1, +2 when the RTO is above 8 s, +2 when the
// retransmission backoff is 3 or more. When the sum reaches Threshold it logs
// EARLY_WARN_TRIGGERED and calls the injected trigger (the engine runs a
// check at once), then stays quiet for Cooldown.
//
// On a black-holed bulk transfer, cwnd drops to 1 after ~0.2 s and backoff
// reaches 3 after ~1.5 s; the RTO passes 8 s only after ~13 s (DESIGN §9),
// so the first two terms do the early work.
//
// A node black-hole behind a live relay shows as silent flows instead
// (silent.go). To see one within about 2.5 s of its start the detector
// samples sooner while LAN traffic flows (activity.go), asks for a check
// on the first flows it sees waiting for an answer (Suspect), and samples
// again at the moment enough of them have waited silentAfter to fire; the
// firing then makes the check already running a confirming one (package
// watchdog, promoteCheckLocked).
//
// The sampler is an interface so the scoring and timing are tested with a
// fake; each sample is also handed to OnSample, which is how the loop guard
// sees the proxy's in-flight connections without a second dump.
package detect

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"surflare-watchdog/src/clock"
	"surflare-watchdog/src/config"
)

// log is the subsystem logger, looked up at each use: one taken at package
// init would keep the default handler from before the program installed
// its own (lines would lose their level and attributes).
func log() *slog.Logger { return slog.Default().With("subsystem", "detect") }

// TCP states as sock_diag reports them (include/net/tcp_states.h).
const (
	StateEstablished uint8 = 1
	StateSynSent     uint8 = 2
	StateTimeWait    uint8 = 6
	StateListen      uint8 = 10
)

// Score terms. Each is worth 2 points; the config's threshold (16) thus
// needs several sick connections, not one unlucky one.
const (
	pointsPerSign = 2
	sickCwnd      = 1                       // cwnd at or below this: the sender has collapsed its window
	sickRTO       = 8000 * time.Millisecond // RTO above this: many timeouts in a row
	sickBackoff   = 3                       // exponential backoff steps: three unanswered retransmissions
	staleFactor   = 3                       // no sample for this many intervals = the detector is blind
)

// Conn is one TCP socket of the proxy.
type Conn struct {
	Local, Remote netip.AddrPort
	State         uint8
	// Outbound is true for a connection the proxy opened (to a relay, or to
	// itself in a loop); false for one it accepted (a LAN client's, via
	// tproxy, whose Local is the client's original destination).
	Outbound bool
	// HasInfo is false when the kernel gave no tcp_info (TIME_WAIT,
	// SYN_RECV); the fields below are then zero.
	HasInfo bool
	Cwnd    uint32
	RTO     time.Duration
	Backoff uint8
	// Retrans is the unanswered retransmissions in a row (tcpi_retransmits):
	// for a handshake, the SYNs sent again. Backoff does not count those on
	// kernels ≥ 6.7, whose first SYN retries are linear
	// (tcp_syn_linear_timeouts).
	Retrans uint8
	// Unacked is the segments sent and not yet acknowledged; LastDataSent
	// and LastDataRecv are how long ago data was last sent and received
	// (for a connection that never received, the time since it was
	// established). Together they tell a silent flow (silent.go).
	Unacked      uint32
	LastDataSent time.Duration
	LastDataRecv time.Duration
}

// Dst is where the connection goes from the proxy's point of view: the
// remote end of an outbound connection, the original destination of an
// accepted one. In a same-host loop both halves name the same Dst.
func (c Conn) Dst() netip.AddrPort {
	if c.Outbound {
		return c.Remote
	}
	return c.Local
}

// InFlight reports whether the connection is open or opening (the loop
// guard counts these).
func (c Conn) InFlight() bool { return c.State == StateEstablished || c.State == StateSynSent }

// Score is the connection's sickness score; only established outbound
// connections with tcp_info are scored (the tunnel's health, not the LAN's).
// A silent flow (Silent) scores like one sign.
func Score(c Conn) int {
	if !c.Outbound || !c.HasInfo || c.State != StateEstablished {
		return 0
	}
	s := 0
	if c.Cwnd <= sickCwnd {
		s += pointsPerSign
	}
	if c.RTO > sickRTO {
		s += pointsPerSign
	}
	if c.Backoff >= sickBackoff {
		s += pointsPerSign
	}
	if Silent(c) {
		s += pointsPerSign
	}
	return s
}

// Sampler lists the proxy's TCP sockets. ProxySampler is the real one.
type Sampler interface {
	Sample(ctx context.Context) ([]Conn, error)
}

// Options configure a Detector; zero values take the config defaults
// (except Cooldown, see there).
type Options struct {
	Interval  time.Duration // between samples (3 s)
	Threshold int           // total score that fires (16)
	Cooldown  time.Duration // after firing, before firing again (300 s; 0 = none, < 0 = default)
	Sampler   Sampler       // required
	// Trigger asks the engine for an immediate check. Called from Run's
	// goroutine; it must not block.
	Trigger func(reason string)
	// Suspect, if set, asks the engine for a check on the first sight of
	// flows waiting for an answer (silent.go: waitingAfter, at most once
	// per suspectCooldown), before they count as silent; like Trigger it
	// must not block. FromConfig points it at the trigger.
	Suspect func(reason string)
	// OnSample, if set, sees every successful sample (the loop guard).
	OnSample func(ctx context.Context, now time.Time, conns []Conn)
	// Activity, if set, is a counter that rises while LAN traffic flows
	// through the proxy (activity.go); Run then samples at once when it
	// moves instead of waiting out Interval. nil: the Sampler's own
	// Activity if it has one (ProxySampler), else Interval only.
	Activity func() (uint64, error)
	// Wake, if set, receives when LAN traffic starts (KernelWake: the
	// firewall's lan-wake NFLOG rule, at most a few a second); Run then
	// samples waitingAfter later, and once more when that sample's
	// unanswered flows have waited waitingAfter (activity.go). A closed
	// channel is a subscription that ended: Run goes on without it.
	Wake  <-chan struct{}
	Clock clock.Clock
}

// FromConfig fills the timing and threshold from the config's detector
// section.
func FromConfig(c *config.Config, s Sampler, trigger func(string)) Options {
	return Options{Interval: c.Detector.Interval, Threshold: c.Detector.Threshold, Cooldown: c.Detector.Cooldown, Sampler: s, Trigger: trigger, Suspect: trigger}
}

// Status is the detector's current view, for the engine's status and LuCI.
type Status struct {
	LastSample time.Time `json:"last_sample"` // heartbeat: the last successful sample
	Conns      int       `json:"conns"`       // proxy sockets in it
	Score      int       `json:"score"`       // their total score
	Threshold  int       `json:"threshold"`
	LastFired  time.Time `json:"last_fired,omitempty"`
	Stale      bool      `json:"stale"` // no sample for more than 3 intervals
	Err        string    `json:"error,omitempty"`
}

// Detector samples and scores. Status is safe to call while Run goes.
type Detector struct {
	o Options

	mu          sync.Mutex
	st          Status
	started     time.Time
	staleLogged bool
	waiting     int           // flows waiting for an answer in the last sample (silent.go)
	crossIn     time.Duration // from the last sample until enough of them are silent to fire (0: none)
	quick       int           // quick samples in a row
	suspected   time.Time     // last Suspect call
	activity    uint64        // last Activity reading (activity.go)
	activityAt  time.Time     // when it was taken
	activityOK  bool
	trafficAt   time.Time // last reading that saw LAN traffic
	silentFired time.Time // last firing that silent flows alone would have caused
	silentWhy   string

	// Kernel wake-ups (activity.go).
	wake    <-chan struct{} // Options.Wake, nil once closed; Run's goroutine only
	woken   bool            // the coming sample was brought forward by a wake-up
	youngIn time.Duration   // from the last sample until its oldest unanswered flow waits waitingAfter (0: none)
}

// New checks o and fills defaults.
func New(o Options) (*Detector, error) {
	if o.Sampler == nil {
		return nil, fmt.Errorf("early detector: no sampler")
	}
	d := config.Default().Detector
	if o.Interval <= 0 {
		o.Interval = d.Interval
	}
	if o.Threshold <= 0 {
		o.Threshold = d.Threshold
	}
	if o.Cooldown < 0 {
		o.Cooldown = d.Cooldown
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if a, ok := o.Sampler.(interface{ Activity() (uint64, error) }); ok && o.Activity == nil {
		o.Activity = a.Activity
	}
	return &Detector{o: o, st: Status{Threshold: o.Threshold}, wake: o.Wake}, nil
}

// Run samples every Interval until ctx ends; sooner while the proxy's
// flows are waiting for an answer (nextInterval: at the moment enough of
// them turn silent to fire, or quickInterval, a few times in a row), and
// at once when LAN traffic has flowed since the last sample (waitActive,
// Activity) or waitingAfter after the kernel saw it start (Wake), so a
// black-hole is seen within a look of its start instead of up to an
// Interval later, without polling faster on a quiet tunnel.
func (d *Detector) Run(ctx context.Context) error {
	d.mu.Lock()
	d.started = d.o.Clock.Now()
	d.mu.Unlock()
	for {
		d.Tick(ctx)
		if !d.waitActive(ctx, d.nextInterval()) {
			return nil
		}
	}
}

// Tick takes one sample, scores it and fires if due. Run calls it every
// Interval.
func (d *Detector) Tick(ctx context.Context) {
	conns, err := d.o.Sampler.Sample(ctx)
	now := d.o.Clock.Now()
	if err != nil {
		d.mu.Lock()
		first := d.st.Err == ""
		d.st.Err = err.Error()
		d.mu.Unlock()
		if first {
			log().Warn("early detector: sampling failed", "err", err)
		}
		d.checkStale(now)
		return
	}
	total, sick, silent := 0, 0, 0
	var waits []time.Duration // how long each waiting flow has waited
	var young time.Duration   // until the oldest unanswered flow not yet waiting is (0: none)
	for _, c := range conns {
		if s := Score(c); s > 0 {
			total += s
			sick++
		}
		if Silent(c) {
			silent++
		}
		if waitingFor(c, waitingAfter) {
			waits = append(waits, c.LastDataSent)
		} else if waitingFor(c, 0) && (young == 0 || waitingAfter-c.LastDataSent < young) {
			young = waitingAfter - c.LastDataSent
		}
	}
	silentOnly := silent*pointsPerSign >= d.o.Threshold
	d.mu.Lock()
	d.st.Err = ""
	d.st.LastSample, d.st.Conns, d.st.Score = now, len(conns), total
	d.waiting = len(waits)
	d.crossIn = crossIn(waits, d.o.Threshold)
	d.youngIn = young
	fire := total >= d.o.Threshold && (d.st.LastFired.IsZero() || now.Sub(d.st.LastFired) >= d.o.Cooldown)
	if fire {
		d.st.LastFired = now
	}
	if silentOnly {
		// Evidence is refreshed while the silence lasts, also in the
		// cooldown: the engine's confirming check may come later.
		d.silentFired, d.silentWhy = now, silentReason(silent, total, d.o.Threshold)
	}
	suspect := d.suspectLocked(now, len(waits), silent, fire)
	d.mu.Unlock()
	d.checkStale(now)
	// The sample reaches OnSample (the per-node tally the engine asks for
	// its evidence) before the engine hears of the firing: the check it
	// asks for is a confirming one only if the tally already holds it.
	if d.o.OnSample != nil {
		d.o.OnSample(ctx, now, conns)
	}
	if fire {
		reason := fmt.Sprintf("EARLY_WARN_TRIGGERED: score %d >= %d (%d of %d proxy connections stalled, %d silent)", total, d.o.Threshold, sick, len(conns), silent)
		log().Warn(reason, "score", total, "threshold", d.o.Threshold)
		if d.o.Trigger != nil {
			d.o.Trigger(reason)
		}
	} else if total >= d.o.Threshold {
		log().Debug("early detector in cooldown", "score", total)
	}
	if suspect {
		reason := suspectReason(len(waits))
		log().Info(reason)
		d.o.Suspect(reason)
	}
}

// checkStale logs early_detector_stale once when the heartbeat is older than
// three intervals, and once more when sampling recovers.
func (d *Detector) checkStale(now time.Time) {
	d.mu.Lock()
	stale := d.staleLocked(now)
	d.st.Stale = stale
	changed := stale != d.staleLogged
	d.staleLogged = stale
	last, errText := d.st.LastSample, d.st.Err
	d.mu.Unlock()
	switch {
	case changed && stale:
		log().Warn("early_detector_stale: no tcp_info sample", "last_sample", last, "err", errText)
	case changed:
		log().Info("early detector sampling again")
	}
}

func (d *Detector) staleLocked(now time.Time) bool {
	since := d.st.LastSample
	if since.IsZero() {
		since = d.started
	}
	return !since.IsZero() && now.Sub(since) > staleFactor*d.o.Interval
}

// Status is a snapshot; Stale is evaluated at now.
func (d *Detector) Status(now time.Time) Status {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.st
	s.Stale = d.staleLocked(now)
	return s
}

// Heartbeat is the time of the last successful sample.
func (d *Detector) Heartbeat() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.st.LastSample
}
