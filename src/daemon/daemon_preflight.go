package daemon

import (
	"context"
	"math"
	"sync"

	"github.com/vishvananda/netns"

	"surflare-watchdog/src/config"
	"surflare-watchdog/src/nodeprobe"
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
// that cannot be opened, or a run cut short by a stop, decides nothing (no
// finding).
func hostWAN(ctx context.Context) (string, error) {
	if ctx.Err() != nil {
		return "?", nil
	}
	h, err := route.Open(netns.None())
	if err != nil {
		return "?", nil
	}
	defer h.Close()
	return h.WANDevice(ctx)
}

// withProbeLatency fills latency_ms of the candidates the engine has no
// passing check of with the last node probe's warm round trip (the
// results file `surflare-watchdog probe` and ubus probe write), so the
// nodes table has a number for nodes the tunnel has not been on.
func withProbeLatency(cands []watchdog.CandidateStatus, runDir string) []watchdog.CandidateStatus {
	rep, err := nodeprobe.ReadResults(nodeprobe.ResultsPath(runDir))
	if err != nil {
		return cands
	}
	byNode := map[string]int64{}
	for _, r := range rep.Nodes {
		if r.OK && r.L7TTFBMS != nil && *r.L7TTFBMS > 0 {
			byNode[r.Node] = int64(math.Round(*r.L7TTFBMS))
		}
	}
	for i, c := range cands {
		if c.LatencyMS == 0 {
			cands[i].LatencyMS = byNode[c.Node]
		}
	}
	return cands
}
