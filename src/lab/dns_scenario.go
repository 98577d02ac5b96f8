package lab

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// The dns-leak scenario: a LAN client with a hard-coded public resolver
// keeps resolving fresh foreign names while the tunnel is healthy, while it
// fails over to another node (the fake CLI's disconnect + connect) and while
// the daemon restarts (its firewall torn down with the kill switch kept,
// then applied again — what the daemon does on stop and start). Each phase
// reports the DNS packets that left the WAN outside the tunnel (the lab's
// leak counters) and the time until foreign names resolved again; the
// internet resolver's query log must show every question coming from an
// exit node.

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
	// Away is how long the "daemon" stays stopped in the restart phase
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
)

// DNSLeakScenario runs the three phases and returns the result in the
// scenario format (the phase is in each run's extra["phase"]). An error
// means the scenario could not be carried out at all; a phase that fails
// is reported in its run.
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
	spec := l.WatchdogSpec()
	fw, err := l.ApplyWatchdogFirewall(ctx, spec)
	if err != nil {
		return res, err
	}
	if err := l.Connect(ctx, o.From); err != nil {
		return res, fmt.Errorf("connecting to %s: %w", o.From, err)
	}
	phases := []struct {
		name    string
		node    string
		disrupt func(context.Context) error
	}{
		{PhaseHealthy, o.From, func(context.Context) error { return nil }},
		{PhaseFailover, o.To, func(ctx context.Context) error {
			_, _ = l.Surflare(ctx, "disconnect")
			return l.Connect(ctx, o.To)
		}},
		{PhaseRestart, o.To, func(ctx context.Context) error {
			if _, err := fw.Teardown(ctx, true); err != nil {
				return fmt.Errorf("stopping (teardown keeping the kill switch): %w", err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(o.Away):
			}
			_, err := fw.Apply(ctx, spec)
			return err
		}},
	}
	for _, p := range phases {
		run := l.dnsLeakPhase(ctx, p.name, p.node, o.Settle, p.disrupt)
		res.Runs = append(res.Runs, run)
		if ctx.Err() != nil {
			break
		}
	}
	res.Summarize()
	return res, nil
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
func (l *Lab) dnsLeakPhase(ctx context.Context, phase, node string, settle time.Duration, disrupt func(context.Context) error) ScenarioRun {
	run := ScenarioRun{NodesTried: []string{node}, Extra: map[string]any{"phase": phase}}
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
	derr := disrupt(pctx)
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
