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
	"connect_dataplane_timeout", "heartbeat_interval",
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
	p.Notes = append(p.Notes, "every other option is the lab's (lab probe targets, addresses, paths) or the built-in default; early detector, log health and the 503 storm monitor are on, as shipped")
	return p, nil
}

// neverCount is a 503 count the storm monitor cannot reach in its window:
// the monitor has no enabled option, so this is how the baseline turns it
// off (config allows up to 100000).
const neverCount = "100000"

// BaselineParams are the seed design's parameters on top of ours: 30 s
// interval and threshold 4 (also our defaults — the seed's constants), no
// early signals, no log-health skipping. Serial node tries have no knob.
func BaselineParams(ours Params) Params {
	seed := map[string]string{
		"surflare.main.check_interval":    "30",
		"surflare.main.degraded_interval": "10",
		"surflare.main.fail_threshold":    "4",
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
		"surflare.loghealth=loghealth", "surflare.loghealth.enabled=0",
		"surflare.storm503=storm503", "surflare.storm503.count="+neverCount,
	)
	p.Notes = []string{
		"no early signals: `detector.enabled=0`; the 503 storm monitor has no enabled option, so `storm503.count=" + neverCount + "` keeps it from ever firing",
		"no log-health skipping: `loghealth.enabled=0`",
		"serial node tries: no config knob — our engine also tries one candidate at a time (one connect sequence in flight), so ours and the baseline do not differ here",
	}
	return p
}
