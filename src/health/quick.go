package health

import (
	"context"
	"errors"
	"fmt"
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
	r := c.probe(ctx, PathTunnel, Target{Name: "storm503", Kind: KindSearch, URL: url})
	if r.Status != 0 {
		return r.Status, nil
	}
	return 0, errors.New(r.Error)
}
