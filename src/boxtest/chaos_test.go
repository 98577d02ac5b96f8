package boxtest

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"surflare-watchdog/src/lab"
)

// boxChaosSeed draws, within the first 90 s, netifd's ifdown/ifup wan
// (with a black-holed node), a kill -9 that procd must respawn, and an
// `nft flush ruleset` ended by `/etc/init.d/firewall restart`: the three
// things only the real router does its own way.
const boxChaosSeed = 225

// A short chaos run on the real OpenWrt router: procd runs the installed
// daemon and respawns it, netifd takes the WAN down and up, fw4 is
// flushed and restarted, and every invariant of the lab's chaos holds:
// no leaked packet, every burst recovered within the budget, no exit but
// the chaos kill, no panic, goroutines read from the daemon's /metrics,
// whole state files, and nothing left behind.
func TestChaosOnOpenWrt(t *testing.T) {
	root, ipks := needBox(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	start := time.Now()
	res, err := lab.RunChaos(ctx, lab.ChaosOptions{Duration: 90 * time.Second, Seed: boxChaosSeed, RepoRoot: root,
		OpenWrt: &lab.OpenWrt{IPKs: ipks}, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	_ = res.WriteTable(&table)
	t.Logf("box chaos in %s:\n%s%s", time.Since(start).Round(time.Second), progress.String(), table.String())
	if res.Error != "" {
		t.Fatalf("the run did not get going: %s", res.Error)
	}
	if !res.OK() {
		t.Fatalf("an invariant broke on the OpenWrt router (seed %d): see the table above", res.Seed)
	}

	// It ran as the router runs it, and the faults were the router's.
	if len(res.Bursts) < 2 {
		t.Fatalf("%d bursts in 90 s", len(res.Bursts))
	}
	did := map[string]string{}
	for _, ev := range res.Timeline {
		if ev.Error != "" {
			t.Errorf("fault %s (on %v) failed to apply: %s", ev.Name, ev.On, ev.Error)
		}
		did[ev.Name] += ev.Detail + ";"
	}
	if d, ok := did[lab.FaultWANDown]; ok && !(strings.Contains(d, "ifdown wan") && strings.Contains(d, "ifup wan")) {
		t.Errorf("wan-down was not netifd's ifdown/ifup: %s", d)
	}
	if d, ok := did[lab.ChaosNFTFlush]; ok && !strings.Contains(d, "/etc/init.d/firewall restart") {
		t.Errorf("nft-flush did not end with the firewall's restart: %s", d)
	}
	if _, killed := did[lab.ChaosKill9]; killed {
		// procd, not the run, started the daemon again.
		if res.Daemon.Starts < 2 {
			t.Errorf("kill -9 drawn but the daemon started %d time(s): procd did not respawn it", res.Daemon.Starts)
		}
	}
	if res.Goroutines.Samples == 0 {
		t.Error("no goroutine figure from the daemon's /metrics")
	}
	if !slices.ContainsFunc(res.Invariants, func(i lab.ChaosInvariant) bool { return strings.Contains(i.Name, "teardown") && i.Held }) {
		t.Error("no teardown verdict")
	}
}
