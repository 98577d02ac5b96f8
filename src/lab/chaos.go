package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Chaos: one lab, the daemon under a procd-like supervisor, LAN traffic
// of every kind, and faults drawn from the whole catalogue in overlapping
// bursts, for a given duration. Invariants are checked all the time
// (chaos_watch.go) and every burst's recovery is measured. See
// chaos_schedule.go for how the faults are drawn.

// Invariant names, as the report lists them.
const (
	invLeaks      = "no leaked packets"
	invRecovery   = "every burst recovered within the budget"
	invExits      = "the daemon exits only by the chaos kill"
	invNoPanic    = "the daemon never panics"
	invRespawn    = "procd never halts the daemon (crash loop)"
	invFDs        = "fd count bounded"
	invThreads    = "threads bounded"
	invGoroutines = "goroutines bounded (go_goroutines from /metrics)"
	invRSS        = "RSS bounded"
	invStateFiles = "no state file is ever half-written"
	invTeardown   = "teardown leaves nothing behind"
)

// Growth bounds for the slopes, as growth over one hour of run: a daemon
// that lives for years must not grow by more than this per hour at all.
const (
	maxFDGrowthPerHour     = 30
	maxThreadGrowthPerHour = 30
	// A goroutine per health check leaked would be hundreds an hour; the
	// in-flight probes of one check come and go within a sample or two.
	maxGoroutineGrowthPerHour = 60
	maxRSSGrowthPerHourKB     = 16 << 10
	// minSlopeSpan is the least post-warm-up time a slope is judged over.
	minSlopeSpan = 10 * time.Minute
)

// ChaosOptions shape RunChaos.
type ChaosOptions struct {
	Duration time.Duration
	Seed     uint64
	// Budget bounds one burst's recovery (from the end of its last fault
	// to the first LAN request through an exit node); 0 = 60 s.
	Budget time.Duration
	// Sets are the daemon's config overrides; nil = ScenarioBaseSets.
	Sets []string
	// BinDir / RepoRoot: as ScenarioOptions.
	BinDir, RepoRoot string
	Log              *slog.Logger
	// Progress, if set, gets one line per burst.
	Progress io.Writer
	// OpenWrt runs the chaos on the real OpenWrt router (chaos_box.go):
	// procd, fw4, netifd and logd instead of the lab's stand-ins. Its
	// NoInstall is ignored: the run installs the packages itself.
	OpenWrt *OpenWrt
	// KeepLog, if set, is a file the daemon's whole log is copied to
	// before the lab is torn down: what a broken invariant is read from.
	KeepLog string
}

// ChaosFaultEvent is one change in the run's timeline.
type ChaosFaultEvent struct {
	At     time.Time `json:"at"`
	Burst  int       `json:"burst"`
	Name   string    `json:"name"`
	On     bool      `json:"on"`
	Args   []string  `json:"args,omitempty"`
	Phase  string    `json:"phase,omitempty"`
	State  string    `json:"daemon_state,omitempty"` // the daemon's state when it was applied
	Detail string    `json:"detail,omitempty"`
	Error  string    `json:"error,omitempty"`
}

// ChaosBurst is one burst's outcome.
type ChaosBurst struct {
	N        int       `json:"n"`
	Faults   []string  `json:"faults"`
	EndedAt  time.Time `json:"ended_at"`
	RecoverS *float64  `json:"recover_s"` // nil: not within the budget
	// OutageS is how long LAN traffic was out: from the first failed
	// request after the burst began to the recovery (0: none failed).
	OutageS   *float64 `json:"outage_s"`
	Recovered bool     `json:"recovered"`
}

// ChaosRecovery aggregates the recovery of the bursts a fault was in.
type ChaosRecovery struct {
	Fault    string   `json:"fault"`
	N        int      `json:"n"`
	P50S     *float64 `json:"p50_s"`
	P95S     *float64 `json:"p95_s"`
	MaxS     *float64 `json:"max_s"`
	OverBudg int      `json:"over_budget"`
	// Outage percentiles: how long traffic was out, fault time included.
	OutP95S *float64 `json:"outage_p95_s"`
	OutMaxS *float64 `json:"outage_max_s"`
}

// ChaosInvariant is one line of the verdict.
type ChaosInvariant struct {
	Name   string `json:"name"`
	Held   bool   `json:"held"`
	Figure string `json:"figure"`
}

// ChaosSlope is a least-squares growth figure.
type ChaosSlope struct {
	PerMin  float64 `json:"per_min"`
	PerHour float64 `json:"per_hour"`
	Samples int     `json:"samples"`
	SpanMin float64 `json:"span_min"` // the time the samples cover (summed over instances)
	Min     int     `json:"min"`
	Max     int     `json:"max"`
}

// ChaosResult is `surflare-lab chaos --json`.
type ChaosResult struct {
	Seed       uint64                        `json:"seed"`
	DurationS  float64                       `json:"duration_s"`
	BudgetS    float64                       `json:"budget_s"`
	Sets       []string                      `json:"sets"`
	Bursts     []ChaosBurst                  `json:"bursts"`
	Recovery   []ChaosRecovery               `json:"recovery"`
	AllRecover ChaosRecovery                 `json:"all_bursts"`
	Invariants []ChaosInvariant              `json:"invariants"`
	Violations []ChaosViolation              `json:"violations"`
	Timeline   []ChaosFaultEvent             `json:"timeline"`
	Leaks      string                        `json:"leaks"`
	Leaked     uint64                        `json:"leaked_packets"`
	FDs        ChaosSlope                    `json:"fds"`
	Threads    ChaosSlope                    `json:"threads"`
	RSSKB      ChaosSlope                    `json:"rss_kb"`
	Traffic    map[string]chaosTrafficCounts `json:"traffic"`
	Daemon     struct {
		Starts      int          `json:"starts"`
		Exits       []daemonExit `json:"exits"`
		MaxRespawn  int          `json:"max_respawn_count"`
		Halted      bool         `json:"halted"`
		StartErrors []string     `json:"start_errors,omitempty"`
		StateReads  int          `json:"state_file_reads"`
		StateFiles  []string     `json:"state_files"`
		States      []string     `json:"states_seen"`
	} `json:"daemon"`
	Leftovers []string `json:"leftovers"`
	Notes     []string `json:"notes,omitempty"`
	Error     string   `json:"error,omitempty"`
	// Goroutines is the slope of the daemon's go_goroutines; ScrapeFails
	// counts samples whose /metrics scrape failed (no goroutine figure).
	Goroutines  ChaosSlope `json:"goroutines"`
	ScrapeFails int        `json:"metrics_scrape_failures"`
}

// OK reports whether every invariant held.
func (r *ChaosResult) OK() bool {
	for _, i := range r.Invariants {
		if !i.Held {
			return false
		}
	}
	return r.Error == "" && len(r.Invariants) > 0
}

// chaosRun is one run in progress.
type chaosRun struct {
	o          ChaosOptions
	l          *Lab
	sup        chaosDaemon
	watch      *chaosWatch
	traffic    *chaosTraffic
	goodConfig []byte
	// runDir is the daemon's run dir as the host sees it: the lab's (a 2 MB
	// tmpfs) or the box's /tmp/run.
	runDir string
	// stopLog ends the OpenWrt router's log follower (nil in the lab).
	stopLog func()

	mu       sync.Mutex
	timeline []ChaosFaultEvent
	notes    []string
}

func (c *chaosRun) note(format string, a ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.notes = append(c.notes, fmt.Sprintf(format, a...))
}

func (c *chaosRun) record(ev ChaosFaultEvent) {
	c.mu.Lock()
	c.timeline = append(c.timeline, ev)
	c.mu.Unlock()
	if ev.Name == ChaosNFTFlush || ev.Name == ChaosWANAddr || ev.Name == ChaosKill9 || ev.Name == ChaosClockStep ||
		ev.Name == ChaosReloadBroken || ev.Name == ChaosRunFull || ev.Name == ChaosFW4Reload || ev.Name == ChaosFirewallRestart ||
		(c.l.Box() != nil && (ev.Name == FaultTableWipe || ev.Name == FaultWANDown)) {
		_ = c.l.appendFaultLog(FaultEvent{Time: ev.At, Name: ev.Name, On: ev.On, Args: ev.Args, Detail: ev.Detail})
	}
}

// RunChaos carries out one chaos run and returns its report. Everything
// it made is removed before it returns, also on error or when ctx ends
// (SIGINT): the report's Leftovers says what teardown could not remove.
func RunChaos(ctx context.Context, o ChaosOptions) (res *ChaosResult, err error) {
	if o.Duration <= 0 {
		return nil, errors.New("chaos: duration must be positive")
	}
	if o.Budget == 0 {
		o.Budget = 60 * time.Second
	}
	if o.Sets == nil {
		o.Sets = ChaosSets()
	}
	res = &ChaosResult{Seed: o.Seed, DurationS: o.Duration.Seconds(), BudgetS: o.Budget.Seconds(), Sets: o.Sets,
		Violations: []ChaosViolation{}, Timeline: []ChaosFaultEvent{}, Leftovers: []string{}}
	if err := checkSets(o.Sets); err != nil {
		return nil, err
	}
	if o.BinDir == "" {
		dir, err := os.MkdirTemp("", "surflare-chaos-bin-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		root := o.RepoRoot
		if root == "" {
			wd, _ := os.Getwd()
			if root, err = FindRepoRoot(wd); err != nil {
				return nil, err
			}
		}
		if err := Build(ctx, root, dir); err != nil {
			return nil, err
		}
		o.BinDir = dir
	}
	sweepChaosMounts()
	var ipks []string
	lo := Options{BinDir: o.BinDir, RepoRoot: o.RepoRoot, Set: o.Sets, Log: o.Log, Clients: 2, DNS: true}
	if o.OpenWrt != nil {
		if ipks, err = boxChaosIPKs(o); err != nil {
			return nil, err
		}
		ow := *o.OpenWrt
		ow.NoInstall = true // installed by setupBoxChaos, after /run is mounted
		lo.OpenWrt = &ow
	}
	l, err := Up(ctx, lo)
	if err != nil {
		res.Error = "lab up: " + err.Error()
		return res, nil
	}
	prefix, dir := l.Prefix, l.Dir
	cgroup := l.DaemonCgroup()
	runDir := l.Path(dirRun)
	boxNS := ""
	if l.Box() != nil {
		// No cgroup2 in the box: the daemon makes no group there.
		cgroup, boxNS = "", l.Box().NetNS
	}
	mounted := false
	c := &chaosRun{o: o, l: l}
	defer func() {
		if c.stopLog != nil {
			c.stopLog()
		}
		if mounted {
			if uerr := unmountRunTmpfs(runDir); uerr != nil {
				res.Leftovers = append(res.Leftovers, uerr.Error())
			}
		}
		if o.KeepLog != "" {
			if werr := os.WriteFile(o.KeepLog, []byte(l.DaemonLog()), 0o644); werr != nil {
				res.Notes = append(res.Notes, "daemon log not kept: "+werr.Error())
			}
		}
		if cerr := l.Close(); cerr != nil {
			res.Leftovers = append(res.Leftovers, "lab close: "+cerr.Error())
		}
		res.Leftovers = append(res.Leftovers, leftovers(prefix, dir, cgroup)...)
		if boxNS != "" {
			if _, err := os.Stat(filepath.Join("/run/owrtbox", boxNS)); err == nil {
				res.Leftovers = append(res.Leftovers, "box run directory /run/owrtbox/"+boxNS)
			}
		}
		res.Invariants = append(res.Invariants, ChaosInvariant{invTeardown, len(res.Leftovers) == 0,
			fmt.Sprintf("%d leftover(s) %s", len(res.Leftovers), strings.Join(res.Leftovers, "; "))})
	}()
	supCtx, stopSup := context.WithCancel(context.Background())
	if l.Box() != nil {
		c.runDir, c.goodConfig, err = c.setupBoxChaos(ctx, ipks)
		if err != nil {
			stopSup()
			res.Error = fmt.Sprintf("OpenWrt router: %v; daemon log tail:\n%s", err, l.daemonLogTail(25))
			return res, nil
		}
		c.sup = newProcdWatch(l)
	} else {
		if err := mountRunTmpfs(runDir); err != nil {
			stopSup()
			res.Error = err.Error()
			return res, nil
		}
		mounted = true
		c.runDir = runDir
		if c.goodConfig, err = os.ReadFile(l.DaemonConfigPath()); err != nil {
			stopSup()
			res.Error = err.Error()
			return res, nil
		}
		c.sup = newSupervisor(l, []string{"run", "--config", l.DaemonConfigPath()})
	}
	go c.sup.run(supCtx)
	defer c.sup.stop(stopSup)

	hctx, cancel := context.WithTimeout(ctx, 2*healthyBudget)
	st, err := l.WaitDaemon(hctx, 2*healthyBudget, DaemonState.Healthy)
	if err == nil {
		_, err = l.WaitClientExit(hctx, 0, chaosNodeAddr(st.Node))
	}
	cancel()
	if err != nil {
		res.Error = fmt.Sprintf("daemon never healthy before the chaos: %v; log tail:\n%s", err, l.daemonLogTail(15))
		return res, nil
	}
	if _, err := l.ResetLeaks(ctx); err != nil {
		res.Error = err.Error()
		return res, nil
	}
	wctx, stopWatch := context.WithCancel(ctx)
	c.watch = newChaosWatch(l, c.sup, c.runDir)
	c.traffic = newChaosTraffic(l)
	c.watch.start(wctx)
	c.traffic.start(wctx)

	c.loop(ctx, res)

	stopWatch()
	c.traffic.wait()
	c.watch.wait()
	c.report(res)
	return res, nil
}

// ChaosSets are the daemon's overrides for a chaos run from the CLI: the
// scenarios' short intervals, and a subscription cooldown short enough to
// end within a burst's budget (the shipped hour would hold every later
// burst offline).
func ChaosSets() []string {
	return append(slices.Clone(ScenarioBaseSets), "surflare.auth=auth", "surflare.auth.subscription_cooldown=20")
}

func chaosNodeAddr(name string) string {
	for _, n := range Nodes {
		if n.Name == name {
			return n.Addr.String()
		}
	}
	return ""
}

// loop runs bursts until the duration is used up.
func (c *chaosRun) loop(ctx context.Context, res *ChaosResult) {
	sched := newChaosSchedule(c.o.Seed, ProcdRespawnRetry-1)
	if c.l.Box() != nil {
		sched = newChaosScheduleFrom(c.o.Seed, ProcdRespawnRetry-1, boxCatalogue)
	}
	deadline := time.Now().Add(c.o.Duration)
	for n := 1; ctx.Err() == nil && time.Until(deadline) > 20*time.Second; n++ {
		b := sched.next()
		began := time.Now()
		end := c.burst(ctx, n, b)
		if ctx.Err() != nil {
			return
		}
		cb := ChaosBurst{N: n, EndedAt: end}
		for _, f := range b.Faults {
			cb.Faults = append(cb.Faults, strings.TrimSpace(f.Name+" "+strings.Join(f.Args, " ")))
		}
		// Wait for traffic through an exit node; keep waiting past the
		// budget (up to three times it) so the next burst starts from a
		// working tunnel, but record only what the budget allows.
		var at time.Time
		waitUntil := end.Add(3 * c.o.Budget)
		for ctx.Err() == nil && time.Now().Before(waitUntil) {
			if at = c.traffic.recoveredAfter(end); !at.IsZero() {
				break
			}
			sleepCtx(ctx, 100*time.Millisecond)
		}
		if !at.IsZero() {
			cb.RecoverS = seconds3(at.Sub(end).Seconds())
			cb.Recovered = at.Sub(end) <= c.o.Budget
			cb.OutageS = seconds3(0)
			if ff := c.traffic.firstFailAfter(began, at); !ff.IsZero() {
				cb.OutageS = seconds3(at.Sub(ff).Seconds())
			}
		}
		if !cb.Recovered {
			c.watch.violate(invRecovery, "burst %d (%s) not recovered within %s (recover_s %s)", n,
				strings.Join(cb.Faults, ", "), c.o.Budget, fmtSecs(cb.RecoverS))
		}
		res.Bursts = append(res.Bursts, cb)
		if c.o.Progress != nil {
			fmt.Fprintf(c.o.Progress, "chaos seed %d burst %d: %s -> recovered in %s\n", c.o.Seed, n, strings.Join(cb.Faults, " + "), fmtSecs(cb.RecoverS))
		}
		if !sleepCtx(ctx, b.Gap) {
			return
		}
	}
	// The tail: traffic keeps going a few seconds after the last burst.
	sleepCtx(ctx, 5*time.Second)
}

// burst applies one burst's faults at their offsets and holds, each in
// its own goroutine, and returns when the last one is off.
func (c *chaosRun) burst(ctx context.Context, n int, b chaosBurst) time.Time {
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	end := start
	for _, f := range b.Faults {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !sleepCtx(ctx, f.Offset) {
				return
			}
			c.phase(ctx, f.Phase)
			f.Args = c.resolveArgs(f.Args)
			ev := ChaosFaultEvent{At: time.Now(), Burst: n, Name: f.Name, On: true, Args: f.Args, Phase: f.Phase, State: c.watch.lastState()}
			detail, err := c.on(ctx, f)
			ev.Detail = detail
			if err != nil {
				ev.Error = err.Error()
			}
			c.record(ev)
			kind, _ := chaosKindOf(f.Name)
			last := time.Now()
			if !kind.oneShot {
				// A fault is switched off even when ctx ends (SIGINT): the
				// lab is torn down next, but the report's timeline should
				// say every fault ended.
				sleepCtx(ctx, f.Hold)
				octx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				off := ChaosFaultEvent{At: time.Now(), Burst: n, Name: f.Name, On: false, Args: f.Args, State: c.watch.lastState()}
				detail, err := c.off(octx, f)
				cancel()
				off.Detail = detail
				if err != nil {
					off.Error = err.Error()
				}
				c.record(off)
				last = time.Now()
			}
			mu.Lock()
			if last.After(end) {
				end = last
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return end
}

// resolveArgs replaces currentNode by the daemon's node now (the first
// candidate if it has none).
func (c *chaosRun) resolveArgs(args []string) []string {
	out := slices.Clone(args)
	for i, a := range out {
		if a == currentNode {
			out[i] = Nodes[0].Name
			if n := c.watch.lastNode(); n != "" {
				out[i] = n
			}
		}
	}
	return out
}

// connectingStates are the daemon's states while a connect is under way.
var connectingStates = []string{"connecting", "auth_wait", "disconnected", "starting"}

// phase waits for (or makes) the daemon phase a fault should land in.
func (c *chaosRun) phase(ctx context.Context, p string) {
	switch p {
	case chaosPhaseConnect:
		deadline := time.Now().Add(15 * time.Second)
		for ctx.Err() == nil && time.Now().Before(deadline) {
			if slices.Contains(connectingStates, c.watch.lastState()) {
				return
			}
			sleepCtx(ctx, 50*time.Millisecond)
		}
	case chaosPhaseReload:
		_ = c.hup()
	}
}

// leftovers lists what a torn-down lab left: namespaces, its directory,
// mounts under it, processes running its binaries, the daemon's cgroup.
func leftovers(prefix, dir, cgroup string) []string {
	var out []string
	for _, n := range listNamed(prefix + "-") {
		out = append(out, "namespace "+n)
	}
	if _, err := os.Stat(dir); err == nil {
		out = append(out, "directory "+dir)
	}
	for _, m := range labMounts() {
		if strings.HasPrefix(m, dir) {
			out = append(out, "mount "+m)
		}
	}
	if cgroup != "" {
		if _, err := os.Stat(cgroup); err == nil {
			out = append(out, "cgroup "+cgroup)
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/exe")
	for _, p := range procs {
		if exe, err := os.Readlink(p); err == nil && strings.HasPrefix(exe, dir+"/") {
			out = append(out, "process "+filepath.Base(filepath.Dir(p))+" "+exe)
		}
	}
	sort.Strings(out)
	return out
}
