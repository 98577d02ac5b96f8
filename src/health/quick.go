package health

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	neturl "net/url"
	"sync"
	"time"
)

// probeTimeoutKey carries a per-check probe timeout (WithProbeTimeout).
type probeTimeoutKey struct{}

// WithProbeTimeout returns a context under which Check bounds every probe by
// d instead of Config.ProbeTimeout, when d is shorter. The watchdog uses it
// for a confirming check: when an independent signal already names the
// node broken (the proxy's urltest of it failing via several relays, its
// connections to the relays gone silent), the check only has to confirm,
// and a working tunnel answers a probe in well under d; waiting the full
// probe timeout on a black-holed path would only delay the rotation.
// A longer d than the configured timeout is ignored: a confirming check is
// never more patient than a periodic one.
func WithProbeTimeout(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, probeTimeoutKey{}, d)
}

// ProbeTimeoutFrom returns the timeout WithProbeTimeout put in ctx, if any
// (for Prober implementations other than Checker, such as test fakes).
func ProbeTimeoutFrom(ctx context.Context) (time.Duration, bool) {
	d, ok := ctx.Value(probeTimeoutKey{}).(time.Duration)
	return d, ok && d > 0
}

// probeTimeout is the timeout for one probe under ctx.
func (c *Checker) probeTimeout(ctx context.Context) time.Duration {
	if d, ok := ProbeTimeoutFrom(ctx); ok && d < c.cfg.ProbeTimeout {
		return d
	}
	return c.cfg.ProbeTimeout
}

// Beat is one request through the tunnel to the first tunnel target, the
// idle probe's (package detectors/idleprobe): the smallest thing that
// proves the node still answers. ctx bounds it.
func (c *Checker) Beat(ctx context.Context) error {
	if len(c.tunnel) == 0 {
		return errNoTunnelTarget
	}
	r := c.probe(ctx, PathTunnel, c.tunnel[0])
	if r.OK {
		return nil
	}
	return fmt.Errorf("%s: %s", r.Name, r.Error)
}

var errNoTunnelTarget = errors.New("no tunnel probe target configured")

// TunnelStatus asks url once through the tunnel, on a fresh connection as
// every probe (newClient), and returns the HTTP status the far end
// answered: the 503 probe's question (package detectors/storm503), which
// is about the exit's answer, not about reaching it. err is set when no
// answer came (then status is 0). The probe timeout and ctx bound it.
func (c *Checker) TunnelStatus(ctx context.Context, url string) (status int, err error) {
	if u, err := neturl.Parse(url); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && c.deps.Tunnel != nil {
		var tc *tls.Config
		if u.Scheme == "https" {
			tc = c.tunnelTLS
		}
		return statusGET(ctx, c.deps.Tunnel, u, tc, c.probeTimeout(ctx)) // status.go
	}
	r := c.probe(ctx, PathTunnel, Target{Name: "storm503", Kind: KindSearch, URL: url})
	if r.Status != 0 {
		return r.Status, nil
	}
	return 0, errors.New(r.Error)
}

// ProbeBound is a bound on a check's probes that can tighten while the
// check runs. The watchdog starts every check with one (WithProbeBound):
// when the evidence that names the node broken arrives after a check
// started (the early detector asked for the check on its first sight of
// unanswered flows, and the flows have gone silent since), the check in
// flight becomes a confirming one. Its probes then end ConfirmProbeTimeout
// after the check's own start, as they would have had it started as a
// confirming check; restarting it would throw away the seconds it has
// already waited. Only the probes end early: the check goes on to its
// verdict (and the egress test that tells a dead WAN from a dead tunnel)
// with its context intact. Safe for concurrent use.
type ProbeBound struct {
	mu       sync.Mutex
	deadline time.Time
	changed  chan struct{}
	probes   map[*boundProbe]struct{}
}

// boundProbe is one running probe under a ProbeBound.
type boundProbe struct {
	cancel context.CancelCauseFunc
	timer  *time.Timer
}

// errProbeBound is the cause of a probe ended by its check's bound.
var errProbeBound = errors.New("no answer within the confirming check's bound")

type probeBoundKey struct{}

// WithProbeBound returns a context whose checks' probes obey the returned
// bound (none until Tighten is called).
func WithProbeBound(ctx context.Context) (context.Context, *ProbeBound) {
	b := &ProbeBound{changed: make(chan struct{}), probes: map[*boundProbe]struct{}{}}
	return context.WithValue(ctx, probeBoundKey{}, b), b
}

// ProbeBoundFrom returns the bound WithProbeBound put in ctx, or nil (for
// Prober implementations other than Checker, such as test fakes).
func ProbeBoundFrom(ctx context.Context) *ProbeBound {
	b, _ := ctx.Value(probeBoundKey{}).(*ProbeBound)
	return b
}

// Tighten makes every probe under b, running or still to start, end at
// deadline at the latest (at once if it has passed). A deadline later than
// one already set is ignored: a bound only tightens.
func (b *ProbeBound) Tighten(deadline time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.deadline.IsZero() && !deadline.Before(b.deadline) {
		return
	}
	b.deadline = deadline
	close(b.changed)
	b.changed = make(chan struct{})
	for p := range b.probes {
		b.armLocked(p)
	}
}

// Watch returns the deadline (ok false: none yet) and a channel closed
// when it changes.
func (b *ProbeBound) Watch() (deadline time.Time, ok bool, changed <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.deadline, !b.deadline.IsZero(), b.changed
}

// armLocked (re)starts p's timer for the current deadline.
func (b *ProbeBound) armLocked(p *boundProbe) {
	if p.timer != nil {
		p.timer.Stop()
	}
	p.timer = time.AfterFunc(time.Until(b.deadline), func() { p.cancel(errProbeBound) })
}

// bind derives a probe's context from ctx that b ends at its deadline;
// stop releases it.
func (b *ProbeBound) bind(ctx context.Context) (pctx context.Context, stop func()) {
	pctx, cancel := context.WithCancelCause(ctx)
	p := &boundProbe{cancel: cancel}
	b.mu.Lock()
	b.probes[p] = struct{}{}
	if !b.deadline.IsZero() {
		b.armLocked(p)
	}
	b.mu.Unlock()
	return pctx, func() {
		b.mu.Lock()
		delete(b.probes, p)
		if p.timer != nil {
			p.timer.Stop()
		}
		b.mu.Unlock()
		cancel(nil)
	}
}
