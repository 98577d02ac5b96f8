package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"surflare-watchdog/src/config"
	"surflare-watchdog/src/control"
	"surflare-watchdog/src/detectors/loghealth"
	"surflare-watchdog/src/firewall"
	"surflare-watchdog/src/health"
	"surflare-watchdog/src/nodeprobe"
	"surflare-watchdog/src/runfiles"
	"surflare-watchdog/src/surflare"
)

// Control commands of the node probe (issue 6 part 4). The daemon runs the
// probe itself, in the background, with the vendor lent by the engine
// (watchdog.LendVendor: supervision paused, kill switch armed, the
// original node reconnected afterwards); the CLI and ubus start it and
// poll its progress.
const (
	// CmdProbe starts a probe. Args: {"nodes": [NAME…]} (default: every
	// candidate). Data: nodeprobe.JobStatus. A probe already running is an
	// error whose data is not sent; ask CmdProbeStatus.
	CmdProbe = "probe"
	// CmdProbeStatus reports the running (or last) probe: nodeprobe.JobStatus.
	CmdProbeStatus = "probe_status"
)

// handleProbe answers the probe commands; handled is false for any other.
func (d *Daemon) handleProbe(req control.Request) (data any, handled bool, err error) {
	switch req.Cmd {
	case CmdProbe:
		nodes, err := NodesArg(req.Args)
		if err != nil {
			return nil, true, err
		}
		st, err := d.startProbe(nodes)
		return st, true, err
	case CmdProbeStatus:
		return d.probeJobs.Status(), true, nil
	}
	return nil, false, nil
}

// ProbeRequest is the control request that starts a probe of nodes
// (every candidate when empty); NodesArg reads it back.
func ProbeRequest(nodes []string) control.Request {
	req := control.Request{Cmd: CmdProbe}
	if len(nodes) > 0 {
		list := make([]any, len(nodes))
		for i, n := range nodes {
			list[i] = n
		}
		req.Args = map[string]any{"nodes": list}
	}
	return req
}

// NodesArg reads {"nodes": […]} (or a single {"node": NAME}).
func NodesArg(args map[string]any) ([]string, error) {
	var out []string
	if v, ok := args["node"]; ok && v != nil {
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("argument \"node\" must be a string, got %T", v)
		}
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	if v, ok := args["nodes"]; ok && v != nil {
		list, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("argument \"nodes\" must be a list of names, got %T", v)
		}
		for _, x := range list {
			s, ok := x.(string)
			if !ok || strings.TrimSpace(s) == "" {
				return nil, fmt.Errorf("argument \"nodes\": %v is not a node name", x)
			}
			out = append(out, strings.TrimSpace(s))
		}
	}
	return out, nil
}

// startProbe starts a background probe of nodes (every candidate when
// empty). The probe's context is the engine's: it ends when the daemon
// stops, not when the client that asked goes away.
func (d *Daemon) startProbe(nodes []string) (nodeprobe.JobStatus, error) {
	c := d.cfgs.Get()
	o, err := ProbeOptions(c, nodes)
	if err != nil {
		return nodeprobe.JobStatus{}, err
	}
	o.Switcher = VendorSwitcher{v: d.vendor, mode: string(c.Main.Mode), transit: c.Main.Transit,
		flush: d.fw.FlushVendor, ready: d.localReady(c.Main.ConnectLocalTimeout)}
	o.Kernel = nodeprobe.NetKernel{Firewall: d.fw.fw}
	runDir := c.Paths.RunDir
	file := nodeprobe.ResultsPath(runDir)
	return d.probeJobs.Start(context.Background(), o.Nodes, file, func(ctx context.Context, progress func(nodeprobe.Progress)) (nodeprobe.Report, error) {
		var rep nodeprobe.Report
		err := d.w.LendVendor(ctx, func(ctx context.Context, node string) error {
			o.Progress = progress
			var err error
			rep, err = nodeprobe.Run(ctx, o)
			rep.OriginalNode = node
			return err
		})
		if rep.Nodes != nil {
			if werr := nodeprobe.WriteResults(runDir, rep); werr != nil {
				d.log.Warn("Node probe: results not written", "err", werr)
			}
		}
		if err != nil {
			d.log.Warn("Node probe failed", "err", err)
		}
		return rep, err
	})
}

// ProbeOptions are the probe's targets and node list from the config:
// the L4/L7 target is the search probe (an http:// one preferred: no TLS
// in the timing), the exit comes from an ip-echo or CDN-trace probe.
func ProbeOptions(c *config.Config, nodes []string) (nodeprobe.Options, error) {
	if len(nodes) == 0 {
		nodes = append([]string(nil), c.Main.Candidates...)
	}
	if len(nodes) == 0 {
		return nodeprobe.Options{}, errors.New("no nodes to probe: name some or set main.candidate")
	}
	pick := func(kinds ...config.ProbeKind) string {
		for _, httpOnly := range []bool{true, false} {
			for _, k := range kinds {
				for _, p := range c.Probes {
					if p.Kind == k && (!httpOnly || strings.HasPrefix(p.URL, "http://")) {
						return p.URL
					}
				}
			}
		}
		return ""
	}
	o := nodeprobe.Options{
		Nodes: nodes, Transit: c.Main.Transit,
		TTFBURL: pick(config.ProbeSearch, config.ProbeCDNTrace, config.ProbeIPEcho),
		EchoURL: pick(config.ProbeIPEcho, config.ProbeCDNTrace),
		Timeout: c.Main.ProbeTimeout,
	}
	if o.TTFBURL == "" && o.EchoURL == "" {
		return o, errors.New("no probe targets in the config (config probe sections)")
	}
	nh := filepath.Join(c.Paths.RunDir, runfiles.NodeHealthFile)
	stale := c.LogHealth.Stale
	o.Health = func(node string) nodeprobe.Urltest {
		s, err := loghealth.LoadNodeHealth(nh, time.Now(), stale)
		return nodeprobe.UrltestFrom(s, err, node)
	}
	return o, nil
}

// VendorSwitcher moves the vendor CLI to a node: disconnect (flushing what
// a half-failed disconnect leaves), connect, then wait until the local
// tunnel state is up.
type VendorSwitcher struct {
	v             vendorCLI
	mode, transit string
	flush         func(ctx context.Context) error // nil: nothing to flush with
	ready         func(ctx context.Context) error // nil: connect's return is enough
}

// vendorCLI is the part of the vendor CLI a switch needs.
type vendorCLI interface {
	Connect(ctx context.Context, node, mode, transit string) error
	Disconnect(ctx context.Context) error
}

// Switch implements nodeprobe.Switcher.
func (s VendorSwitcher) Switch(ctx context.Context, node string) error {
	if err := s.v.Disconnect(ctx); err != nil && s.flush != nil {
		if ferr := s.flush(ctx); ferr != nil {
			return fmt.Errorf("disconnect failed (%v) and its leftovers stay: %w", err, ferr)
		}
	}
	if err := s.v.Connect(ctx, node, s.mode, s.transit); err != nil {
		return err
	}
	if s.ready != nil {
		return s.ready(ctx)
	}
	return nil
}

// localReady polls the health checker's layer 1 (proxy, tables, rules)
// until it passes, at most timeout — connect phase 1 without phase 2.
func (d *Daemon) localReady(timeout time.Duration) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		for {
			r := d.prober.Local(ctx)
			if r.Outcome == health.OK {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("local tunnel state not up within %s: %s", timeout, r.Reason)
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
}

// ErrProbeArgs marks a probe that cannot start with the nodes and targets
// it was given (a usage error for the CLI).
var ErrProbeArgs = errors.New("bad probe arguments")

// ProbeWithoutDaemon probes nodes (every candidate when empty) through the
// vendor CLI when no daemon runs, and puts the vendor back where it was
// (connected to its node, or disconnected), also after ctx ends. Progress
// lines go to progress; problems that do not fail the probe (restoring the
// vendor, writing the results file) go to warn.
func ProbeWithoutDaemon(ctx context.Context, c *config.Config, nodes []string, progress io.Writer, warn func(error)) (nodeprobe.Report, error) {
	o, err := ProbeOptions(c, nodes)
	if err != nil {
		return nodeprobe.Report{}, fmt.Errorf("%w: %w", ErrProbeArgs, err)
	}
	v := surflare.New(surflare.Options{Bin: c.Paths.SurflareBin, Timeout: c.Vendor.StatusTimeout, ConnectTimeout: c.Vendor.ConnectTimeout})
	before, err := v.Status(ctx)
	if err != nil {
		return nodeprobe.Report{}, fmt.Errorf("asking the vendor CLI: %w", err)
	}
	sw := VendorSwitcher{v: v, mode: string(c.Main.Mode), transit: c.Main.Transit}
	o.Switcher = sw
	o.Kernel = nodeprobe.NetKernel{Firewall: firewall.New()}
	o.Progress = func(p nodeprobe.Progress) {
		if p.Phase == nodeprobe.PhaseDone && p.Result != nil {
			fmt.Fprintf(progress, "[%d/%d] %s: %s\n", p.Index, p.Total, p.Node, p.Result.Summary())
		} else {
			fmt.Fprintf(progress, "[%d/%d] %s: %s…\n", p.Index, p.Total, p.Node, p.Phase)
		}
	}
	rep, runErr := nodeprobe.Run(ctx, o)

	// Put the vendor back even after Ctrl-C.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.Vendor.ConnectTimeout+c.Vendor.StatusTimeout)
	defer cancel()
	if before.State == surflare.StateConnected && before.Node != "" {
		rep.OriginalNode = before.Node
		err = sw.Switch(rctx, before.Node)
		fmt.Fprintf(progress, "back on %s\n", before.Node)
	} else {
		err = v.Disconnect(rctx)
		fmt.Fprintln(progress, "vendor disconnected again, as before the probe")
	}
	if err != nil {
		warn(fmt.Errorf("restoring the vendor: %w", err))
	}
	if rep.Nodes != nil {
		if werr := nodeprobe.WriteResults(c.Paths.RunDir, rep); werr != nil {
			warn(werr)
		}
	}
	return rep, runErr
}
