package daemon

import (
	"context"
	"sync"

	"github.com/vishvananda/netns"

	"surflare-watchdog/src/config"
	"surflare-watchdog/src/preflight"
	"surflare-watchdog/src/route"
	"surflare-watchdog/src/watchdog"
)

// preflightState is what the preflight needs from the daemon's past: the
// last reload's error (the running config is the last good one).
type preflightState struct {
	mu        sync.Mutex
	reloadErr error
}

func (p *preflightState) setReloadErr(err error) {
	p.mu.Lock()
	p.reloadErr = err
	p.mu.Unlock()
}

func (p *preflightState) lastReloadErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reloadErr
}

// preflighter is the engine's Deps.Preflight: the local checks over the
// config in use, the credentials as the vendor client gets them, the
// route table of the daemon's own namespace.
func (d *Daemon) preflighter() watchdog.Preflighter {
	return func(ctx context.Context) preflight.Report {
		c := d.cfgs.Get()
		creds := d.credOpts(c)
		r := preflight.Run(ctx, preflight.Input{
			ConfigPath:  d.cfgs.Path(),
			ConfigErr:   d.pre.lastReloadErr(),
			VendorBin:   c.Paths.SurflareBin,
			Router:      d.role == string(config.RoleRouter),
			Credentials: &creds,
		}, preflight.Probes{WAN: hostWAN})
		return settingsErrorIsWarning(r)
	}
}

// settingsErrorIsWarning: a settings file that stopped parsing after the
// daemon started does not stop the tunnel. The daemon keeps the last good
// config (a config that never parsed stops the daemon before it starts),
// so the finding says so and stays a warning.
func settingsErrorIsWarning(r preflight.Report) preflight.Report {
	for i, f := range r.Findings {
		if f.Check == preflight.CheckConfig {
			f.Severity = preflight.Warning
			f.Why += "; the last good settings stay in use"
			r.Findings[i] = f
		}
	}
	return r
}

// hostWAN is the WAN device of the daemon's namespace; a netlink socket
// that cannot be opened decides nothing (no finding).
func hostWAN(ctx context.Context) (string, error) {
	h, err := route.Open(netns.None())
	if err != nil {
		return "?", nil
	}
	defer h.Close()
	return h.WANDevice(ctx)
}
