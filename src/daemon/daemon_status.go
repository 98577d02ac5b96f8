package daemon

import (
	"context"
	"os"
	"time"

	"surflare-watchdog/src/control"
	"surflare-watchdog/src/credentials"
	"surflare-watchdog/src/detectors/detect"
	"surflare-watchdog/src/detectors/storm503"
	"surflare-watchdog/src/firewall"
	"surflare-watchdog/src/keepalive"
	"surflare-watchdog/src/loopguard"
	"surflare-watchdog/src/relays"
	"surflare-watchdog/src/watchdog"
)

// daemonStatus is what `status --json`, ubus and the API show: the engine's
// snapshot (its fields stay at the top level, names stable) plus what the
// daemon around it knows — the detectors in detail, the proxy's descriptors
// against its limit, the kernel's table sizes and connection count.
type daemonStatus struct {
	watchdog.Status
	PID    int          `json:"pid"`
	Daemon daemonExtras `json:"daemon"`
}

type daemonExtras struct {
	Config      string                 `json:"config"`
	Role        string                 `json:"role"`
	WAN         wanInfo                `json:"wan"`
	ProbePath   string                 `json:"probe_path"` // where probe 7 runs from
	Proxy       proxyInfo              `json:"proxy"`
	Keepalive   keepalive.Status       `json:"keepalive"`
	LoopGuard   *loopguard.State       `json:"loopguard,omitempty"`
	Detector    *detect.Status         `json:"early_detector,omitempty"`
	LogHealth   *logHealthSummary      `json:"log_health,omitempty"`
	Storm503    *storm503.State        `json:"storm_503,omitempty"`
	Conntrack   relays.Stats           `json:"conntrack"`
	NFT         []firewall.TableSize   `json:"nft"`
	Credentials credentials.StatusInfo `json:"credentials"`
	Web         string                 `json:"web,omitempty"`
}

type logHealthSummary struct {
	Pairs int    `json:"pairs_with_errors"`
	Dead  int    `json:"dead"`
	Lines int64  `json:"lines_read"`
	Error string `json:"error,omitempty"`
}

// status assembles the full snapshot.
func (d *Daemon) status(ctx context.Context) daemonStatus {
	now := time.Now()
	c := d.cfgs.Get()
	x := daemonExtras{
		Config:      d.cfgs.Path(),
		Role:        d.role,
		WAN:         d.wan(),
		ProbePath:   "none (laptop or probe namespace unavailable)",
		Keepalive:   d.dets.clamp.Status(),
		Conntrack:   relays.KernelConntrack{}.Stats(),
		NFT:         d.fw.fw.TableSizes(ctx),
		Credentials: credentials.Status(d.credOpts(c)),
		Web:         d.webAddr,
	}
	if d.probe != nil {
		x.ProbePath = "namespace on " + c.Main.LANInterface + " via " + d.probe.HostIf() + ", " + d.probe.Addr().String()
	}
	if d.dets.proxy != nil {
		x.Proxy = d.dets.proxy.info()
	}
	if g := d.dets.guard; g != nil {
		st := g.State()
		x.LoopGuard = &st
	}
	if det := d.dets.det; det != nil {
		st := det.Status(now)
		x.Detector = &st
	}
	if lh := d.dets.lh; lh != nil {
		r := lh.Report()
		s := &logHealthSummary{Pairs: len(r.Nodes), Lines: lh.Stats().Lines}
		for _, p := range r.Nodes {
			if !p.UrltestHealthy {
				s.Dead++
			}
		}
		x.LogHealth = s
	}
	if st := d.dets.storm503; st != nil {
		s := st.State(now)
		x.Storm503 = &s
	}
	st := d.w.Status()
	st.Candidates = withProbeLatency(st.Candidates, c.Paths.RunDir)
	return daemonStatus{Status: st, PID: os.Getpid(), Daemon: x}
}

// handle is the control socket's handler: status gets the full snapshot;
// every other command goes to the engine and answers with the snapshot
// taken after it, or, for an action waited for, with its outcome.
func (d *Daemon) handle(ctx context.Context, req control.Request) (any, error) {
	if req.Cmd == control.CmdStatus {
		return d.status(ctx), nil
	}
	if data, ok, err := d.handleProbe(req); ok {
		return data, err
	}
	out, err := d.w.HandleCommand(ctx, req.Cmd, req.Args)
	if err != nil {
		return nil, err
	}
	if o, ok := out.(watchdog.Outcome); ok { // an action waited for
		return o, nil
	}
	return d.status(ctx), nil
}
