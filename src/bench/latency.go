package bench

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"surflare-watchdog/src/lab"
)

// The latency scenarios, registered with the lab's scenario runner under
// "bench-" + name. They inject the same faults as the runner's own
// scenarios of the same name (and 503-storm, which the runner lacks), but
// wait up to benchRecoverBudget for recovery: the runner's 60 s is sized
// for its shortened intervals, and with the shipped 30 s checks (and the
// seed's threshold of 4) a correct recovery can take longer than that —
// cutting it off would report "never" for a run that did recover.
const (
	benchRecoverBudget = 4 * time.Minute
	benchRunBudget     = benchRecoverBudget + 30*time.Second
	registryPrefix     = "bench-"
)

// registryName is the scenario runner's name for a latency scenario.
func registryName(scenario string) string { return registryPrefix + scenario }

func init() {
	for name, run := range map[string]func(context.Context, *lab.Harness) error{
		ScenarioNodeDown:       currentNodeFault(lab.FaultNodeDown),
		ScenarioNodeBlackhole:  currentNodeFault(lab.FaultNodeBlackhole),
		Scenario503Storm:       currentNodeFault(lab.Fault503),
		ScenarioRelayBlackhole: relayBlackhole,
		ScenarioProxyCrash:     proxyCrash,
		ScenarioDomesticExit:   domesticExit,
	} {
		lab.RegisterScenario(lab.ScenarioSpec{
			Name:    registryName(name),
			Summary: "benchmark: " + Label(name) + " (recovery awaited up to " + benchRecoverBudget.String() + ")",
			Budget:  benchRunBudget,
			Run:     withHousehold(run),
		})
	}
}

// The household's other sites. The scenario monitor's LAN client asks one
// host (IP echo 0) every 100 ms; a household also has other pages open,
// and a watchdog that reads failed connections (connfail) rightly wants
// failures to more than one destination before it calls a node dead — one
// dead site is no evidence. So while a scenario runs, the same LAN client
// also fetches these, each every householdEvery.
const (
	householdEvery   = 500 * time.Millisecond
	householdTimeout = 3 * time.Second
)

// householdURLs are the other destinations, through the tunnel.
func householdURLs() []string {
	return []string{
		"http://" + lab.Search.String() + "/",
		"http://" + lab.CDNTrace[0].String() + "/cdn-cgi/trace",
	}
}

// withHousehold runs a scenario with the household's other sites in use
// from before the fault until the run ends, then notes which signal the
// daemon named when it left healthy.
func withHousehold(run func(context.Context, *lab.Harness) error) func(context.Context, *lab.Harness) error {
	return func(ctx context.Context, h *lab.Harness) error {
		hctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			household(hctx, h.Lab, &wg)
		}()
		err := run(ctx, h)
		stop()
		wg.Wait()
		if st, serr := h.Lab.DaemonStatus(ctx); serr == nil {
			if why := detectedBy(st, h.T0()); why != "" {
				h.Note("%s%s", detectedByPrefix, withTrigger(h.Lab.DaemonLog(), h.T0(), why))
			}
		}
		return err
	}
}

// household fetches every householdURLs from LAN client 0 every
// householdEvery until ctx ends; answers are not judged (the monitor's
// client is the recovery's measure).
func household(ctx context.Context, l *lab.Lab, wg *sync.WaitGroup) {
	t := time.NewTicker(householdEvery)
	defer t.Stop()
	urls := householdURLs()
	for {
		for _, u := range urls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rctx, cancel := context.WithTimeout(ctx, householdTimeout)
				defer cancel()
				_ = l.ClientFetch(rctx, 0, u)
			}()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// detectedByPrefix marks, in a run's outcome, the reason the daemon gave
// for leaving healthy after the fault: which signal saw it.
const detectedByPrefix = "detected by: "

// detectedBy is the reason of st's first transition away from healthy at
// or after t0 ("" if none is listed), shortened for the report.
func detectedBy(st lab.DaemonState, t0 time.Time) string {
	_, why, _ := firstAway(st, t0)
	return truncate(strings.ReplaceAll(why, ";", ","), 100)
}

// firstAway is st's earliest listed transition away from healthy at or
// after t0 (whatever the list's order): its time and reason.
func firstAway(st lab.DaemonState, t0 time.Time) (at time.Time, why string, ok bool) {
	if t0.IsZero() {
		return time.Time{}, "", false
	}
	for _, tr := range st.Transitions {
		if !tr.At.Before(t0) && tr.To != "healthy" && (!ok || tr.At.Before(at)) {
			at, why, ok = tr.At, tr.Reason, true
		}
	}
	return at, why, ok
}

// checkRequested is the daemon's log message when a detector asks the
// engine for a check (its reason names the detector: CONN_FAIL, IDLE_PROBE…).
const checkRequested = "Check requested by a detector"

// withTrigger prefixes why with the detector that asked for the first
// check at or after t0, from the daemon's log (slog text: time=… and
// reason=…), when there is one: "CONN_FAIL → check PROXY_BROKEN".
func withTrigger(log string, t0 time.Time, why string) string {
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, checkRequested) {
			continue
		}
		at, ok := logField(line, "time")
		ts, err := time.Parse(time.RFC3339Nano, at)
		if !ok || err != nil || ts.Before(t0) {
			continue
		}
		reason, _ := logField(line, "reason")
		tag, _, _ := strings.Cut(reason, ":")
		if tag = strings.TrimSpace(tag); tag != "" && len(tag) <= 30 {
			return tag + " → " + why
		}
	}
	return why
}

// logField is the value of key=VALUE or key="VALUE" in a slog text line.
func logField(line, key string) (string, bool) {
	i := strings.Index(" "+line, " "+key+"=")
	if i < 0 {
		return "", false
	}
	v := line[i+len(key)+1:]
	if strings.HasPrefix(v, `"`) {
		if s, err := strconv.QuotedPrefix(v); err == nil {
			u, _ := strconv.Unquote(s)
			return u, true
		}
		return strings.Trim(v, `"`), true
	}
	v, _, _ = strings.Cut(v, " ")
	return v, true
}

// signalOf is the signal named in a run's outcome (detectedBy's reason up
// to its first colon, e.g. CONN_FAIL), "" if the outcome names none.
func signalOf(outcome string) string {
	_, after, ok := strings.Cut(outcome, detectedByPrefix)
	if !ok {
		return ""
	}
	why, _, _ := strings.Cut(after, ";")
	if tag, _, ok := strings.Cut(why, ":"); ok && len(tag) <= 40 {
		return strings.TrimSpace(tag)
	}
	return strings.TrimSpace(truncate(why, 40))
}

// currentNodeFault breaks the node the daemon is on (down: refuses
// tunnels; black-hole: drops silently; 503: its exit answers every HTTP
// request with 503) and waits for traffic through another node.
func currentNodeFault(fault string) func(context.Context, *lab.Harness) error {
	return func(ctx context.Context, h *lab.Harness) error {
		node := h.Node()
		t0, err := h.Inject(ctx, fault, true, node)
		if err != nil {
			return err
		}
		h.SetDead(node, true, t0)
		waitRecovered(ctx, h)
		return nil
	}
}

// relayBlackhole drops everything to the first relay (the one transit
// "auto" uses).
func relayBlackhole(ctx context.Context, h *lab.Harness) error {
	if _, err := h.Inject(ctx, lab.FaultRelayBlackhole, true, lab.Relays[0].Name); err != nil {
		return err
	}
	waitRecovered(ctx, h)
	return nil
}

// proxyCrash kills surflare-proxy.
func proxyCrash(ctx context.Context, h *lab.Harness) error {
	if _, err := h.Inject(ctx, lab.FaultProxyCrash, true); err != nil {
		return err
	}
	waitRecovered(ctx, h)
	return nil
}

// domesticExit makes the proxy send traffic direct (exit country CN). The
// bug it models lives in one proxy instance, so the fault is cleared when
// the daemon starts a new connect, which replaces the proxy (as the
// runner's domestic-exit does).
func domesticExit(ctx context.Context, h *lab.Harness) error {
	if _, err := h.Inject(ctx, lab.FaultDomesticExit, true); err != nil {
		return err
	}
	_, ok := h.WaitLog(ctx, benchRecoverBudget, "Connecting to ")
	if _, err := h.Inject(ctx, lab.FaultDomesticExit, false); err != nil {
		return err
	}
	if !ok {
		h.Note("the daemon never reconnected while the exit was domestic")
		return nil
	}
	waitRecovered(ctx, h)
	return nil
}

func waitRecovered(ctx context.Context, h *lab.Harness) {
	if !h.WaitRecovered(ctx, benchRecoverBudget) {
		h.Note("no LAN traffic through a live node within %s", benchRecoverBudget)
	}
}
