package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"surflare-watchdog/src/lab/fakes"
)

// ScenarioTunnelOnlyAPI is E9's story: the account API answers only
// through the tunnel, the login token expires, and the tunnel is lost
// after the first token would have expired.
const ScenarioTunnelOnlyAPI = "tunnel-only-api"

// tunnelOnlyTokenTTL is the token's lifetime in the scenario: well inside
// one run, so a token nobody renewed is expired when the node goes down.
const tunnelOnlyTokenTTL = 25 * time.Second

func init() {
	RegisterScenario(ScenarioSpec{
		Name: ScenarioTunnelOnlyAPI,
		Summary: fmt.Sprintf("the account API answers only through the tunnel, the token lives %s, the node goes down after that: "+
			"the login refresh kept the token fresh (--set surflare.main.login_refresh=0: no recovery)", tunnelOnlyTokenTTL),
		// The first login needs the API from outside the tunnel: the lab
		// starts with api_access=any and the run switches it.
		Vendor: []string{"api_access=any", fmt.Sprintf("token_ttl=%ds", int(tunnelOnlyTokenTTL/time.Second))},
		Sets:   []string{"surflare.main.login_refresh=8"},
		Budget: tunnelOnlyTokenTTL + recoverBudget + 15*time.Second,
		Run:    tunnelOnlyAPI,
	})
}

func tunnelOnlyAPI(ctx context.Context, h *Harness) error {
	issued, err := h.Lab.vendorTokenIssued()
	if err != nil {
		return err
	}
	if err := h.Lab.SetVendor("api_access=" + fakes.APITunnel); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(issued.Add(tunnelOnlyTokenTTL + 3*time.Second))):
	}
	renewed, err := h.Lab.vendorTokenIssued()
	if err != nil {
		return err
	}
	h.Extra("token_age_at_fault_s", seconds3(time.Since(renewed).Seconds()))
	h.Extra("token_expired_at_fault", time.Since(renewed) > tunnelOnlyTokenTTL)
	node := h.Node()
	t0, err := h.Inject(ctx, FaultNodeDown, true, node)
	if err != nil {
		return err
	}
	h.SetDead(node, true, t0)
	if !h.waitOrNote(ctx, recoverBudget) {
		if st, err := h.Lab.DaemonStatus(ctx); err == nil {
			var why struct {
				Why struct {
					Line string `json:"line"`
				} `json:"why"`
			}
			if json.Unmarshal(st.Raw, &why) == nil {
				h.Extra("why", why.Why.Line)
			}
		}
	}
	return nil
}

// vendorTokenIssued is when the fake CLI's login token was issued.
func (l *Lab) vendorTokenIssued() (time.Time, error) {
	li, err := l.VendorInfo()
	if err != nil {
		return time.Time{}, err
	}
	st, err := fakes.LoadState(li)
	if err != nil {
		return time.Time{}, err
	}
	return st.LoginAt, nil
}
