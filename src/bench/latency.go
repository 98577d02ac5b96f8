package bench

import (
	"context"
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
			Run:     run,
		})
	}
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
