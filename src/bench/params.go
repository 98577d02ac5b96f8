package bench

import (
	"fmt"
	"slices"
	"strings"

	"surflare-watchdog/src/config"
	"surflare-watchdog/src/lab"
)

// timingOptions are the main options the lab shortens (its own config and
// the scenario runner's ScenarioBaseSets) that our parameters put back to
// the shipped defaults: the benchmark judges the defaults a household gets,
// not the lab's fast ones.
var timingOptions = []string{
	"check_interval", "degraded_interval", "fail_threshold", "probe_timeout",
	"storm_cooldown", "reconnect_window", "connect_local_timeout",
	"connect_dataplane_timeout", "heartbeat_interval", "idle_probe_interval",
}

// OursParams are the shipped defaults (config.Default, what
// files/etc/config/surflare spells out) for every option the lab or the
// scenario runner would otherwise shorten.
func OursParams() (Params, error) {
	main := config.Default().UCI().Section("main")
	if main == nil {
		return Params{}, fmt.Errorf("config.Default has no main section")
	}
	paths := slices.Clone(timingOptions)
	for _, s := range lab.ScenarioBaseSets {
		path, _, _ := strings.Cut(s, "=")
		if opt, ok := strings.CutPrefix(path, "surflare.main."); ok && !slices.Contains(paths, opt) {
			paths = append(paths, opt)
		}
	}
	p := Params{Variant: Ours}
	for _, opt := range paths {
		v, ok := main.Get(opt)
		if !ok {
			return Params{}, fmt.Errorf("config.Default: no main option %q", opt)
		}
		p.Sets = append(p.Sets, "surflare.main."+opt+"="+v)
	}
	p.Notes = append(p.Notes, "every other option is the lab's (lab probe targets, addresses, paths) or the built-in default; early detector, fast signals, log health, the 503 storm monitor and strict direct are on, as shipped")
	return p, nil
}

// BaselineParams are the seed design's parameters on top of ours: 30 s
// interval and threshold 4 (also our defaults — the seed's constants), no
// early signals, no log-health skipping. Serial node tries have no knob.
//
// "No early signals" turns off everything that asks for a check before the
// interval is up or lets fewer than fail_threshold failed checks rotate:
// the early detector, the fast signals (proxy exit watch, the current
// node's urltest errors, counter jumps, failed LAN connections), the 503
// storm monitor and the idle probe (main.idle_probe_interval=0).
//
// Strict direct (main.strict_direct) stays on, as in ours: it is a safety
// floor — the proxy's own direct traffic is cut instead of leaking — not a
// detection parameter, like the kill switch that both sides keep although
// the seed dropped it while reconnecting. The baseline thus measures the
// seed's detection and rotation on the same firewall, and a leak figure
// that differs would be the daemon's, not a missing rule's. Its counter
// (direct_blocked) is one of the fast signals' counters, so as an early
// signal it is off with them.
func BaselineParams(ours Params) Params {
	seed := map[string]string{
		"surflare.main.check_interval":    "30",
		"surflare.main.degraded_interval": "10",
		"surflare.main.fail_threshold":    "4",
		// The seed has no idle probe: an idle dead node waits for a check.
		"surflare.main.idle_probe_interval": "0",
	}
	p := Params{Variant: Baseline}
	for _, s := range ours.Sets {
		path, _, _ := strings.Cut(s, "=")
		if v, ok := seed[path]; ok {
			s = path + "=" + v
		}
		p.Sets = append(p.Sets, s)
	}
	p.Sets = append(p.Sets,
		"surflare.detector=detector", "surflare.detector.enabled=0",
		"surflare.fastsignal=fastsignal", "surflare.fastsignal.enabled=0",
		"surflare.storm503=storm503", "surflare.storm503.enabled=0",
		"surflare.loghealth=loghealth", "surflare.loghealth.enabled=0",
	)
	p.Notes = []string{
		"no early signals: `detector.enabled=0` (early detector), `fastsignal.enabled=0` (proxy exit watch, current node's urltest errors, counter jumps), `storm503.enabled=0` (503 storm monitor)",
		"no log-health skipping: `loghealth.enabled=0`",
		"no idle probe: `main.idle_probe_interval=0` (an idle dead node waits for the next check)",
		"serial node tries: no config knob — our engine also tries one candidate at a time (one connect sequence in flight), so ours and the baseline do not differ here",
		"strict direct stays on, as in ours: a safety floor (the proxy's direct traffic is cut, not leaked), not a detection parameter; its refusal counter is a fast signal and is off with them",
	}
	return p
}
