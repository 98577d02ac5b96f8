package bench

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"surflare-watchdog/src/config"
	"surflare-watchdog/src/lab"
	"surflare-watchdog/src/lab/fakes"
)

// daemonConfig is the config the lab's daemon would read with p's
// overrides: the lab's own file written with them, then loaded as the
// daemon loads it.
func daemonConfig(t *testing.T, p Params) *config.Config {
	t.Helper()
	l := &lab.Lab{Dir: t.TempDir(), Prefix: "bt"}
	if err := os.MkdirAll(filepath.Dir(l.DaemonConfigPath()), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := lab.WriteDaemonConfig(l, p.Sets); err != nil {
		t.Fatalf("the lab refuses the %s overrides: %v", p.Variant, err)
	}
	c, w, err := config.Load(l.DaemonConfigPath())
	if err != nil {
		t.Fatalf("the daemon would refuse the %s config: %v", p.Variant, err)
	}
	for _, x := range w {
		t.Errorf("%s config: %s", p.Variant, x)
	}
	return c
}

// The baseline runs with every early signal off and log-health skipping
// off, on the seed's 30 s / threshold 4, while ours keeps all of them on
// as shipped; strict direct is on on both sides (a safety floor, not a
// detection parameter).
func TestBaselineTurnsOffEveryEarlySignal(t *testing.T) {
	ours, err := OursParams()
	if err != nil {
		t.Fatal(err)
	}
	base := BaselineParams(ours)
	for _, s := range base.Sets {
		if strings.HasPrefix(s, "surflare.storm503.count=") {
			t.Errorf("the baseline still turns the storm monitor off by its count: %s", s)
		}
	}
	type view struct {
		detector, proxyExit, nodeLog, counters, connFail, storm, logHealth, strict bool
		interval, idleProbe                                                        time.Duration
		threshold                                                                  int
	}
	see := func(c *config.Config) view {
		return view{c.Detector.Enabled, c.FastSignal.ProxyExitOn(), c.FastSignal.NodeLogOn(), c.FastSignal.CountersOn(), c.FastSignal.ConnFailOn(),
			c.Storm503.Enabled, c.LogHealth.Enabled, c.Main.StrictDirect, c.Main.CheckInterval, c.Main.IdleProbeInterval, c.Main.FailThreshold}
	}
	if got, want := see(daemonConfig(t, ours)), (view{true, true, true, true, true, true, true, true, 30 * time.Second, 10 * time.Second, 4}); got != want {
		t.Errorf("ours = %+v\nwant %+v (shipped defaults)", got, want)
	}
	if got, want := see(daemonConfig(t, base)), (view{false, false, false, false, false, false, false, true, 30 * time.Second, 0, 4}); got != want {
		t.Errorf("baseline = %+v\nwant %+v (the seed: no early signals, no log-health skipping)", got, want)
	}
	for _, sw := range []string{"detector.enabled=0", "fastsignal.enabled=0", "storm503.enabled=0", "loghealth.enabled=0", "idle_probe_interval=0"} {
		if !slices.ContainsFunc(base.Notes, func(n string) bool { return strings.Contains(n, sw) }) {
			t.Errorf("the report's baseline notes do not mention %s: %q", sw, base.Notes)
		}
	}
}

// The dead-nodes warm-up is sized from log health's threshold and the
// urltest interval the part pins: if either moves, the "with urltest data"
// side would silently be measured without it.
func TestDeadNodesWarmupOutlastsTheThreshold(t *testing.T) {
	if got := config.Default().LogHealth.Threshold; got != deadThreshold {
		t.Errorf("log health threshold is %d, the warm-up assumes %d", got, deadThreshold)
	}
	li := fakes.DefaultLabInfo("", "")
	if err := fakes.ApplyKnob(&li, URLTestCadence(int(deadUrltestEvery/time.Second))); err != nil {
		t.Fatal(err)
	}
	every := time.Duration(li.URLTestIntervalS) * time.Second
	if every != deadUrltestEvery {
		t.Errorf("the pinned urltest interval is %s, the warm-up assumes %s", every, deadUrltestEvery)
	}
	if rounds := int(deadWarmup / every); rounds <= deadThreshold {
		t.Errorf("warm-up %s is %d urltest rounds, not more than the threshold %d", deadWarmup, rounds, deadThreshold)
	}
}
