package lab

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// The chaos run's pure parts: the schedule, procd's respawn rule, the
// slope and the state-file check. The run itself needs root and minutes
// (surflare-lab chaos, and the bench's chaos section).

func draw(seed uint64, n int) []chaosBurst {
	s := newChaosSchedule(seed, ProcdRespawnRetry-1)
	var out []chaosBurst
	for range n {
		out = append(out, s.next())
	}
	return out
}

func TestChaosScheduleIsReproducible(t *testing.T) {
	a, b := draw(42, 50), draw(42, 50)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed drew different schedules")
	}
	if reflect.DeepEqual(a, draw(43, 50)) {
		t.Fatal("seeds 42 and 43 drew the same schedule: the seed is not used")
	}
}

func TestChaosScheduleCoversTheCatalogue(t *testing.T) {
	seen := map[string]bool{}
	phases := map[string]bool{}
	overlapping := 0
	for _, b := range draw(7, 400) {
		groups := map[string]bool{}
		for _, f := range b.Faults {
			seen[f.Name] = true
			phases[f.Phase] = true
			k, err := chaosKindOf(f.Name)
			if err != nil {
				t.Fatal(err)
			}
			if k.group != groupNone && groups[k.group] {
				t.Fatalf("burst %+v has two faults of group %q", b, k.group)
			}
			groups[k.group] = true
			if k.oneShot != (f.Hold == 0) {
				t.Fatalf("%s: one-shot %v but hold %s", f.Name, k.oneShot, f.Hold)
			}
		}
		if len(b.Faults) > 1 {
			overlapping++
		}
	}
	for _, k := range chaosCatalogue {
		if !seen[k.name] && !k.restarts {
			t.Errorf("fault %s never drawn in 400 bursts", k.name)
		}
	}
	for _, f := range Faults {
		if _, err := chaosKindOf(f.Name); err != nil {
			t.Errorf("the lab's fault %s is not in the chaos catalogue", f.Name)
		}
	}
	for _, p := range []string{chaosPhaseAny, chaosPhaseConnect, chaosPhaseReload} {
		if !phases[p] {
			t.Errorf("phase %s never drawn", p)
		}
	}
	if overlapping == 0 {
		t.Error("no burst with overlapping faults")
	}
}

// A run must not kill the daemon more often than procd tolerates, or it
// measures procd giving up instead of the daemon.
func TestChaosScheduleCapsDaemonRestarts(t *testing.T) {
	restarts := 0
	for _, b := range draw(3, 500) {
		for _, f := range b.Faults {
			if k, _ := chaosKindOf(f.Name); k.restarts {
				restarts++
			}
		}
	}
	if restarts != ProcdRespawnRetry-1 {
		t.Fatalf("%d daemon restarts drawn in 500 bursts, want the cap %d", restarts, ProcdRespawnRetry-1)
	}
}

func TestProcdPolicyHaltsAfterRetryCrashesWithinThreshold(t *testing.T) {
	p := procdPolicy{Threshold: ProcdRespawnThreshold, Timeout: ProcdRespawnTimeout, Retry: ProcdRespawnRetry}
	for i := 1; i <= ProcdRespawnRetry; i++ {
		if !p.exited(10 * time.Second) {
			t.Fatalf("crash %d halted; procd respawns until respawn_count > retry", i)
		}
	}
	if p.exited(10 * time.Second) {
		t.Fatalf("crash %d within the threshold still respawned", ProcdRespawnRetry+1)
	}
	q := procdPolicy{Threshold: ProcdRespawnThreshold, Retry: ProcdRespawnRetry}
	for range 4 {
		q.exited(time.Minute)
	}
	if !q.exited(ProcdRespawnThreshold) || q.count != 0 {
		t.Fatalf("an instance that lived the whole threshold did not reset the count (count %d)", q.count)
	}
	// respawn_retry 0 means respawn forever.
	forever := procdPolicy{Threshold: ProcdRespawnThreshold}
	for range 50 {
		if !forever.exited(time.Second) {
			t.Fatal("retry 0 halted")
		}
	}
}

func TestFixedEffectsSlope(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	var flat, leak []procSample
	// Two instances: each flat at its own level (a restart drops RSS), or
	// each growing by 2 per minute.
	for inst, level := range []int{100, 40} {
		start := t0.Add(time.Duration(inst) * 10 * time.Minute)
		for m := range 8 {
			at := start.Add(chaosWarmupExclude + time.Duration(m)*time.Minute)
			flat = append(flat, procSample{At: at, PID: inst + 1, Start: start, FDs: level})
			leak = append(leak, procSample{At: at, PID: inst + 1, Start: start, FDs: level + 2*m})
		}
	}
	fd := func(p procSample) float64 { return float64(p.FDs) }
	if s, _, _ := fixedEffectsSlope(flat, fd); s != 0 {
		t.Errorf("flat instances: slope %v, want 0 (a restart is not shrinkage)", s)
	}
	if s, n, span := fixedEffectsSlope(leak, fd); s < 1.99 || s > 2.01 || n != 16 || span != 14*time.Minute {
		t.Errorf("growing instances: slope %v over %d samples (%s), want 2/min over 16 (14m)", s, n, span)
	}
	warm := []procSample{{At: t0, PID: 9, Start: t0, FDs: 5}, {At: t0.Add(time.Second), PID: 9, Start: t0, FDs: 500}}
	if s, n, _ := fixedEffectsSlope(warm, fd); s != 0 || n != 0 {
		t.Errorf("warm-up samples counted: slope %v n %d", s, n)
	}
}

func TestCheckStateFile(t *testing.T) {
	for _, c := range []struct {
		name, body string
		bad        bool
	}{
		{"surflare_node_health.json", `{"a":1}`, false},
		{"surflare_node_health.json", `{"a":`, true},
		{"surflare_503_state", `{"count":3}`, false},
		{"surflare_503_state", ``, true},
		{"surflare_watchdog.pid", "123\n", false},
		{"surflare_watchdog.pid", "12x", true},
		{"ubus.sock", "whatever", false},
	} {
		if got := checkStateFile(c.name, []byte(c.body)) != ""; got != c.bad {
			t.Errorf("%s %q: bad=%v, want %v", c.name, c.body, got, c.bad)
		}
	}
}

// The OpenWrt router's catalogue draws fw4's reloads and never a clock
// step (procd execs the daemon: no time namespace of its own), and the
// lab's draws for a seed are not changed by it.
func TestBoxChaosCatalogue(t *testing.T) {
	s := newChaosScheduleFrom(7, ProcdRespawnRetry-1, boxCatalogue)
	seen := map[string]bool{}
	for range 400 {
		for _, f := range s.next().Faults {
			seen[f.Name] = true
		}
	}
	for _, name := range []string{ChaosFW4Reload, ChaosFirewallRestart, ChaosNFTFlush, FaultTableWipe, FaultWANDown, ChaosWANAddr, ChaosKill9} {
		if !seen[name] {
			t.Errorf("the box catalogue never drew %s in 400 bursts", name)
		}
	}
	if seen[ChaosClockStep] {
		t.Error("the box catalogue drew clock-step")
	}
	for _, k := range boxOnlyKinds {
		if _, err := chaosKindOf(k.name); err != nil {
			t.Error(err)
		}
	}
	lab := draw(7, 400)
	for _, b := range lab {
		for _, f := range b.Faults {
			if f.Name == ChaosFW4Reload || f.Name == ChaosFirewallRestart {
				t.Fatalf("the lab's schedule drew the box-only %s", f.Name)
			}
		}
	}
}

func TestFindMetric(t *testing.T) {
	text := "# HELP go_goroutines_x other\ngo_goroutines_x 9\n# HELP go_goroutines n\n# TYPE go_goroutines gauge\ngo_goroutines 42\nprocess_open_fds 17\n"
	if v, err := findMetric(strings.NewReader(text), "go_goroutines"); err != nil || v != 42 {
		t.Errorf("go_goroutines = %v, %v; want 42", v, err)
	}
	if _, err := findMetric(strings.NewReader("up 1\n"), "go_goroutines"); err == nil {
		t.Error("a missing series gave no error")
	}
}

// The goroutine invariant is judged from the daemon's go_goroutines: a
// steady leak over the judged span breaks it, a flat count holds, and a
// run where /metrics never answered cannot claim it held.
func TestChaosGoroutineInvariant(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	verdict := func(g func(minute int) int) ChaosInvariant {
		t.Helper()
		w := &chaosWatch{stateFiles: map[string]int{}}
		for m := range 12 {
			at := t0.Add(chaosWarmupExclude + time.Duration(m)*time.Minute)
			w.procs = append(w.procs, procSample{At: at, PID: 1, Start: t0, FDs: 20, Threads: 10, RSSKB: 18000, Goroutines: g(m)})
		}
		c := &chaosRun{sup: newSupervisor(nil, nil), watch: w, traffic: newChaosTraffic(nil)}
		res := &ChaosResult{}
		c.report(res)
		for _, i := range res.Invariants {
			if i.Name == invGoroutines {
				return i
			}
		}
		t.Fatal("no goroutine invariant in the report")
		return ChaosInvariant{}
	}
	if v := verdict(func(int) int { return 40 }); !v.Held {
		t.Errorf("a flat goroutine count broke the invariant: %s", v.Figure)
	}
	if v := verdict(func(m int) int { return 40 + 3*m }); v.Held {
		t.Errorf("3 goroutines a minute (180/h) over 11 min held: %s", v.Figure)
	}
	if v := verdict(func(int) int { return -1 }); v.Held {
		t.Errorf("no scrape answered, yet the invariant held: %s", v.Figure)
	}
}
