package lab

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"surflare-watchdog/src/lab/fakes"
)

// The chaos schedule: which faults a chaos run throws, in which order,
// with which arguments, how long each is held and at which phase of the
// daemon it lands. It is drawn from one math/rand/v2 PCG stream seeded by
// --seed, and nothing the run observes feeds back into the draws, so the
// same seed gives the same sequence of faults whatever the timing.
//
// Faults come in bursts: a burst is one to three faults started within a
// few seconds of each other and held for overlapping spans. After a burst
// ends (every fault in it off) the run waits for the LAN's traffic to come
// back, measures that, waits a drawn gap and starts the next burst.

// Chaos fault names beyond the lab's Faults.
const (
	ChaosNFTFlush     = "nft-flush"     // `nft flush ruleset` in the router; off: the firewall's restart (fw4 back)
	ChaosWANAddr      = "wan-addr"      // the WAN address changes (a new lease)
	ChaosKill9        = "kill-9"        // SIGKILL the daemon; the supervisor respawns it
	ChaosReloadBroken = "reload-broken" // a broken config and SIGHUP; off: the good config and SIGHUP
	ChaosRunFull      = "run-full"      // the daemon's run dir (a tmpfs) filled to its limit; off: freed
	ChaosClockStep    = "clock-step"    // the daemon restarted with CLOCK_MONOTONIC/BOOTTIME stepped (time namespace)
	chaosPhaseAny     = "any"           // injected at its drawn offset
	chaosPhaseConnect = "while-connecting"
	chaosPhaseReload  = "while-reloading" // a SIGHUP with the good config right before
)

// chaosGroup keeps faults that act on the same thing out of one burst:
// two auth kinds, loss and WAN down, two daemon restarts.
const (
	groupNone   = ""
	groupAuth   = "auth"
	groupWAN    = "wan"
	groupDaemon = "daemon"
	groupFakes  = "fakes-flag"
)

// chaosKind is one entry of the catalogue.
type chaosKind struct {
	name     string
	weight   int
	group    string
	minHold  time.Duration
	maxHold  time.Duration
	oneShot  bool // acts once when switched on; off does nothing (or restores, see chaosRun.off)
	restarts bool // takes the daemon down (counts toward procd's respawn_retry)
	args     func(r *rand.Rand) []string
}

// currentNode stands for the node the daemon is on when the fault is
// applied: a fault on an idle node tests little, and which node is current
// depends on the run's timing, so the schedule names it only by role.
const currentNode = "@current"

func pickNode(r *rand.Rand) string {
	if r.IntN(10) < 6 {
		return currentNode
	}
	return Nodes[r.IntN(len(Nodes))].Name
}

func pickRelay(r *rand.Rand) string           { return Relays[r.IntN(len(Relays))].Name }
func between(r *rand.Rand, lo, hi int) string { return strconv.Itoa(lo + r.IntN(hi-lo+1)) }

// chaosAuthKinds are the auth faults drawn. Every one of fakes.AuthValues
// but "ok".
var chaosAuthKinds = []string{fakes.AuthRateLimited, fakes.AuthInvalid, fakes.AuthSubscription,
	fakes.AuthExpired, fakes.AuthDeviceLimit, fakes.AuthAccountCheck}

// chaosCatalogue is every fault a chaos run draws from: the lab's whole
// Faults list (proxy loop, login hang and half disconnects included) plus
// the ones only chaos makes.
var chaosCatalogue = []chaosKind{
	{name: FaultNodeDown, weight: 6, minHold: 5 * time.Second, maxHold: 25 * time.Second,
		args: func(r *rand.Rand) []string { return []string{pickNode(r)} }},
	{name: FaultNodeBlackhole, weight: 6, minHold: 5 * time.Second, maxHold: 25 * time.Second,
		args: func(r *rand.Rand) []string { return []string{pickNode(r)} }},
	{name: FaultRelayBlackhole, weight: 4, minHold: 3 * time.Second, maxHold: 15 * time.Second,
		args: func(r *rand.Rand) []string { return []string{pickRelay(r)} }},
	{name: Fault503, weight: 4, minHold: 5 * time.Second, maxHold: 25 * time.Second,
		args: func(r *rand.Rand) []string { return []string{pickNode(r)} }},
	{name: FaultLatency, weight: 4, minHold: 5 * time.Second, maxHold: 20 * time.Second,
		args: func(r *rand.Rand) []string {
			if r.IntN(2) == 0 {
				return []string{pickNode(r), between(r, 100, 1500)}
			}
			return []string{pickRelay(r), between(r, 100, 1500)}
		}},
	{name: FaultLoss, weight: 4, group: groupWAN, minHold: 3 * time.Second, maxHold: 15 * time.Second,
		args: func(r *rand.Rand) []string { return []string{between(r, 5, 60)} }},
	{name: FaultProxyCrash, weight: 5, oneShot: true},
	{name: FaultProxyLoop, weight: 2, group: groupFakes, minHold: 3 * time.Second, maxHold: 10 * time.Second},
	{name: FaultDomesticExit, weight: 3, group: groupFakes, minHold: 3 * time.Second, maxHold: 15 * time.Second},
	{name: FaultAuth, weight: 4, group: groupAuth, minHold: 5 * time.Second, maxHold: 20 * time.Second,
		args: func(r *rand.Rand) []string { return []string{chaosAuthKinds[r.IntN(len(chaosAuthKinds))]} }},
	{name: FaultLoginHang, weight: 1, group: groupAuth, minHold: 5 * time.Second, maxHold: 15 * time.Second},
	{name: FaultDisconnectHalf, weight: 2, minHold: 5 * time.Second, maxHold: 20 * time.Second},
	{name: FaultAPIDown, weight: 3, minHold: 5 * time.Second, maxHold: 20 * time.Second},
	{name: FaultTableWipe, weight: 4, oneShot: true},
	{name: ChaosNFTFlush, weight: 4, minHold: 2 * time.Second, maxHold: 10 * time.Second},
	{name: FaultWANDown, weight: 3, group: groupWAN, minHold: 3 * time.Second, maxHold: 15 * time.Second},
	{name: ChaosWANAddr, weight: 2, group: groupWAN, oneShot: true,
		args: func(r *rand.Rand) []string { return []string{"198.18.2." + between(r, 3, 250)} }},
	{name: ChaosKill9, weight: 3, group: groupDaemon, oneShot: true, restarts: true},
	{name: ChaosReloadBroken, weight: 3, group: groupDaemon, minHold: 2 * time.Second, maxHold: 10 * time.Second},
	{name: ChaosRunFull, weight: 3, minHold: 5 * time.Second, maxHold: 20 * time.Second},
	{name: ChaosClockStep, weight: 2, group: groupDaemon, oneShot: true, restarts: true,
		args: func(r *rand.Rand) []string {
			// Forward up to a year, or back up to 10 min (bounded by the
			// host's uptime when applied: a clock cannot go below zero).
			if r.IntN(2) == 0 {
				return []string{"+" + between(r, 60, 365*24*3600)}
			}
			return []string{"-" + between(r, 30, 600)}
		}},
}

// chaosFault is one drawn fault of a burst.
type chaosFault struct {
	Name   string        `json:"name"`
	Args   []string      `json:"args,omitempty"`
	Offset time.Duration `json:"offset_ns"` // after the burst's start
	Hold   time.Duration `json:"hold_ns"`   // 0 for one-shot faults
	Phase  string        `json:"phase"`
}

// chaosBurst is one burst and the quiet gap that follows its recovery.
type chaosBurst struct {
	Faults []chaosFault  `json:"faults"`
	Gap    time.Duration `json:"gap_ns"`
}

// chaosSchedule draws bursts from a seed.
type chaosSchedule struct {
	r          *rand.Rand
	cat        []chaosKind // the catalogue drawn from
	restarts   int         // daemon restarts drawn so far
	maxRestart int
}

// newChaosSchedule seeds the stream. maxRestarts caps the faults that take
// the daemon down: procd gives up on an instance after respawn_retry
// crashes within respawn_threshold of each start, so a run that killed it
// more often would measure procd's giving up, not the daemon.
func newChaosSchedule(seed uint64, maxRestarts int) *chaosSchedule {
	return newChaosScheduleFrom(seed, maxRestarts, chaosCatalogue)
}

// newChaosScheduleFrom draws from another catalogue (the OpenWrt
// router's, boxCatalogue). A catalogue of its own keeps the lab's draws
// for a seed what they were.
func newChaosScheduleFrom(seed uint64, maxRestarts int, cat []chaosKind) *chaosSchedule {
	return &chaosSchedule{r: rand.New(rand.NewPCG(seed, seed^0x5eed_c4a05)), cat: cat, maxRestart: maxRestarts}
}

// next draws the next burst.
func (s *chaosSchedule) next() chaosBurst {
	r := s.r
	n := 1 + r.IntN(3)
	var b chaosBurst
	used := map[string]bool{}
	total := 0
	for _, k := range s.cat {
		total += k.weight
	}
	for len(b.Faults) < n {
		k := s.pick(total)
		if (k.group != groupNone && used[k.group]) || used["name:"+k.name] {
			continue
		}
		if k.restarts && s.restarts >= s.maxRestart {
			continue
		}
		if k.restarts {
			s.restarts++
		}
		used[k.group], used["name:"+k.name] = k.group != groupNone, true
		f := chaosFault{Name: k.name, Phase: chaosPhaseAny}
		if k.args != nil {
			f.Args = k.args(r)
		}
		if len(b.Faults) > 0 {
			f.Offset = time.Duration(r.Int64N(int64(8 * time.Second)))
		}
		if !k.oneShot {
			f.Hold = k.minHold + time.Duration(r.Int64N(int64(k.maxHold-k.minHold)+1))
		}
		switch p := r.IntN(10); {
		case p < 2:
			f.Phase = chaosPhaseConnect
		case p < 3:
			f.Phase = chaosPhaseReload
		}
		b.Faults = append(b.Faults, f)
	}
	b.Gap = 3*time.Second + time.Duration(r.Int64N(int64(12*time.Second)))
	return b
}

func (s *chaosSchedule) pick(total int) chaosKind {
	x := s.r.IntN(total)
	for _, k := range s.cat {
		if x < k.weight {
			return k
		}
		x -= k.weight
	}
	return s.cat[len(s.cat)-1]
}

// chaosKindOf finds a catalogue entry.
func chaosKindOf(name string) (chaosKind, error) {
	for _, k := range append(slices.Clip(chaosCatalogue), boxOnlyKinds...) {
		if k.name == name {
			return k, nil
		}
	}
	return chaosKind{}, fmt.Errorf("no chaos fault %q", name)
}
