package lab

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// The dns-leak scenario: a LAN client with a hard-coded public resolver
// keeps resolving fresh foreign names (dnsmasq -> SmartDNS -> the foreign
// resolver through the tunnel) while the real daemon keeps the tunnel
// healthy, while it rotates to another node (`surflare-watchdog rotate`
// over its control socket) and while it restarts (SIGTERM, which keeps the
// kill switch armed, then `run` again). The daemon applies the firewall
// and the DNS rules from its lab config (WriteDaemonConfig's dns section).
// Each phase reports the DNS packets that left the WAN outside the tunnel
// (the lab's leak counters) and the time until foreign names resolved
// again; the foreign resolver's query log must show every question coming
// from an exit node.

// ScenarioDNSLeak is the scenario's name (`surflare-lab scenario dns-leak`).
const ScenarioDNSLeak = "dns-leak"

// DNS-leak phases.
const (
	PhaseHealthy  = "healthy"
	PhaseFailover = "failover"
	PhaseRestart  = "restart"
)

// DNSLeakOptions shape the dns-leak scenario.
type DNSLeakOptions struct {
	// Lab to run in; nil means bring one up with Up (and close it after).
	Lab *Lab
	// Up are the options for that lab (DNS is forced on).
	Up Options
	// From and To are the nodes before and after the failover (default
	// Dallas and Chicago).
	From, To string
	// Away is how long the daemon stays stopped in the restart phase
	// (default 1 s, about a procd restart).
	Away time.Duration
	// Settle is how long each phase keeps querying after foreign names
	// resolve again (default 1 s), so late leaks would be counted.
	Settle time.Duration
}

// dnsProbeEvery is the LAN client's query rate; dnsProbeTimeout how long one
// query may take before it counts as failed.
const (
	dnsProbeEvery   = 100 * time.Millisecond
	dnsProbeTimeout = 800 * time.Millisecond
	dnsPhaseLimit   = 20 * time.Second
	// dnsDaemonHealthy bounds the wait for the daemon to report healthy
	// (on the right node) after a start or a rotate.
	dnsDaemonHealthy = 20 * time.Second
)

// dnsLeakSets are the daemon's lab overrides for the scenario: short
// intervals so a start or rotate is verified within seconds.
var dnsLeakSets = []string{
	"surflare.main.check_interval=2",
	"surflare.main.degraded_interval=1",
	"surflare.main.fail_threshold=2",
	"surflare.main.probe_timeout=2",
	"surflare.main.domestic_confirm=1",
	"surflare.main.heartbeat_interval=0",
}

// DNSLeakScenario runs the three phases against the lab's daemon (started
// here, on From, if it is not running; stopped at the end if started here)
// and returns the result in the scenario format (the phase is in each
// run's extra["phase"]). An error means the scenario could not be carried
// out at all; a phase that fails is reported in its run.
func DNSLeakScenario(ctx context.Context, o DNSLeakOptions) (ScenarioResult, error) {
	res := ScenarioResult{Scenario: ScenarioDNSLeak}
	if o.From == "" {
		o.From = "Dallas"
	}
	if o.To == "" {
		o.To = "Chicago"
	}
	if o.Away <= 0 {
		o.Away = time.Second
	}
	if o.Settle <= 0 {
		o.Settle = time.Second
	}
	l := o.Lab
	if l == nil {
		up := o.Up
		up.DNS = true
		var err error
		if l, err = Up(ctx, up); err != nil {
			return res, err
		}
		defer l.Close()
	} else if !l.running(procDnsmasq) || !l.running(procSmartDNS) {
		l.StopResolvers()
		if err := l.StartResolvers(ctx, DNSOptions{}); err != nil {
			return res, err
		}
	}
	if !l.DaemonRunning() {
		sets := append(append([]string(nil), dnsLeakSets...), "surflare.main.node="+o.From)
		if _, err := l.StartDaemon(ctx, sets...); err != nil {
			return res, fmt.Errorf("starting the daemon: %w", err)
		}
		defer func() {
			if l.DaemonRunning() {
				_, _ = l.StopDaemon(context.WithoutCancel(ctx))
			}
		}()
	}
	onNode := func(node string) func(DaemonState) bool {
		return func(s DaemonState) bool { return s.Healthy() && s.Node == node }
	}
	if st, err := l.WaitDaemon(ctx, dnsDaemonHealthy, onNode(o.From)); err != nil {
		return res, fmt.Errorf("the daemon is not healthy on %s (state %q on %q): %w", o.From, st.State, st.Node, err)
	}
	phases := []struct {
		name    string
		disrupt func(context.Context, *ScenarioRun) error
	}{
		{PhaseHealthy, func(context.Context, *ScenarioRun) error { return nil }},
		{PhaseFailover, func(ctx context.Context, run *ScenarioRun) error {
			if err := l.daemonRotate(ctx, o.To); err != nil {
				return err
			}
			st, err := l.WaitDaemon(ctx, dnsDaemonHealthy, onNode(o.To))
			run.Extra["daemon_node"] = st.Node
			return err
		}},
		{PhaseRestart, func(ctx context.Context, run *ScenarioRun) error {
			took, err := l.StopDaemon(ctx)
			run.Extra["daemon_stop_s"] = seconds3(took.Seconds())
			if err != nil {
				return fmt.Errorf("stopping the daemon: %w", err)
			}
			armed := slices.Contains(l.RouterTables(), "inet killswitch")
			run.Extra["killswitch_armed_while_stopped"] = armed
			if !armed {
				return fmt.Errorf("the kill switch was not armed after the daemon stopped")
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(o.Away):
			}
			if !slices.Contains(l.RouterTables(), "inet killswitch") {
				run.Extra["killswitch_armed_while_stopped"] = false
				return fmt.Errorf("the kill switch went away while the daemon was stopped")
			}
			if _, err := l.StartDaemon(ctx); err != nil {
				return fmt.Errorf("starting the daemon again: %w", err)
			}
			st, err := l.WaitDaemon(ctx, dnsDaemonHealthy, DaemonState.Healthy)
			run.Extra["daemon_node"] = st.Node
			return err
		}},
	}
	for _, p := range phases {
		run := l.dnsLeakPhase(ctx, p.name, o.Settle, p.disrupt)
		res.Runs = append(res.Runs, run)
		if ctx.Err() != nil {
			break
		}
	}
	res.Summarize()
	return res, nil
}

// daemonRotate asks the running daemon to switch to node, as a user would:
// `surflare-watchdog rotate NODE` in the router namespace.
func (l *Lab) daemonRotate(ctx context.Context, node string) error {
	out, err := l.CommandContext(ctx, RoleRouter, l.DaemonBinary(), "rotate", "--run-dir", l.Path(dirRun), node).CombinedOutput()
	if err != nil {
		return fmt.Errorf("surflare-watchdog rotate %q: %w: %s", node, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// dnsProbe is one query of the LAN client.
type dnsProbe struct {
	sent, done time.Time
	name       string
	ok         bool
}

// dnsLeakPhase keeps client 0 resolving fresh foreign names through its
// hard-coded resolver (ForeignDNS, redirected to the router) around one
// disruption and measures recovery and leaks.
func (l *Lab) dnsLeakPhase(ctx context.Context, phase string, settle time.Duration, disrupt func(context.Context, *ScenarioRun) error) ScenarioRun {
	run := ScenarioRun{Extra: map[string]any{"phase": phase}}
	if _, err := l.ResetLeaks(ctx); err != nil {
		run.Error = err.Error()
		return run
	}
	pctx, cancel := context.WithTimeout(ctx, dnsPhaseLimit)
	defer cancel()
	var mu sync.Mutex
	var probes []dnsProbe
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(dnsProbeEvery)
		defer t.Stop()
		for {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := dnsProbe{sent: time.Now(), name: UniqueName("leak", "foreign.lab")}
				a, err := l.ClientResolve(pctx, 0, ForeignDNS, p.name, dnsProbeTimeout)
				p.done, p.ok = time.Now(), err == nil && a.Rcode == RcodeOK && len(a.Addrs) > 0
				mu.Lock()
				probes = append(probes, p)
				mu.Unlock()
			}()
			select {
			case <-stop:
				return
			case <-pctx.Done():
				return
			case <-t.C:
			}
		}
	}()

	start := time.Now()
	derr := disrupt(pctx, &run)
	disrupted := time.Now()
	// Wait for a query sent after the disruption to succeed, then settle.
	var recovered time.Time
	for recovered.IsZero() && pctx.Err() == nil && derr == nil {
		mu.Lock()
		for _, p := range probes {
			if p.ok && !p.sent.Before(disrupted) && (recovered.IsZero() || p.done.Before(recovered)) {
				recovered = p.done
			}
		}
		mu.Unlock()
		if recovered.IsZero() {
			select {
			case <-pctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	if !recovered.IsZero() {
		select {
		case <-pctx.Done():
		case <-time.After(settle):
		}
	}
	close(stop)
	wg.Wait()
	if st, err := l.DaemonStatus(ctx); err == nil {
		run.NodesTried = []string{st.Node}
		run.Extra["daemon_state"] = st.State
	} else {
		run.Extra["daemon_state"] = "no answer: " + err.Error()
	}

	lc, err := l.ResetLeaks(ctx)
	if err != nil {
		run.Error = err.Error()
		return run
	}
	run.LeakedPackets = lc.Total()
	run.Leaks = lc.String()
	run.Extra["dns_leaked_packets"] = lc.DNS4 + lc.DNS6
	failed := 0
	var names []string
	for _, p := range probes {
		names = append(names, p.name)
		if !p.ok {
			failed++
		}
	}
	run.Extra["queries"] = len(probes)
	run.Extra["failed_queries"] = failed
	seen, direct, err := l.resolverSources(names)
	if err != nil {
		run.Error = err.Error()
	}
	run.Extra["resolver_saw"] = seen
	run.Extra["resolver_saw_direct"] = direct
	switch {
	case derr != nil:
		run.Error = derr.Error()
		run.Outcome = "the disruption itself failed"
	case recovered.IsZero():
		run.Outcome = fmt.Sprintf("foreign names did not resolve again within %s", dnsPhaseLimit)
	default:
		run.RecoverS = seconds3(recovered.Sub(start).Seconds())
		run.Recovered = direct == 0
		run.Outcome = fmt.Sprintf("%d queries, %d failed while disrupted; foreign resolver saw %v", len(probes), failed, seen)
	}
	return run
}

// resolverSources counts, for the given names, which source addresses the
// foreign resolver saw: exit names (through the tunnel) or raw addresses;
// direct counts questions that did not come from an exit node.
func (l *Lab) resolverSources(names []string) (map[string]int, int, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	qs, err := l.DNSQueries()
	seen := map[string]int{}
	direct := 0
	for _, q := range qs {
		if q.Resolver != ForeignDNS.String() || !want[q.Name] {
			continue
		}
		if n := ExitName(q.From); n != "" {
			seen[n]++
		} else {
			seen[q.From]++
			direct++
		}
	}
	return seen, direct, err
}
