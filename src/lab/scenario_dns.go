package lab

import "context"

// dns-leak is helper M's DNSLeakScenario (dns_scenario.go): it brings up
// its own lab with the router's real resolvers and reports one run per
// phase (healthy, failover, restart), so the runner hands it the lab
// options and takes its runs as they are.
func init() {
	RegisterScenario(ScenarioSpec{Name: ScenarioDNSLeak,
		Summary: "a LAN client with a hard-coded public resolver: DNS leaks while healthy, during failover and a daemon restart",
		Standalone: func(ctx context.Context, o Options) ([]ScenarioRun, error) {
			res, err := DNSLeakScenario(ctx, DNSLeakOptions{Up: o})
			return res.Runs, err
		}})
}
