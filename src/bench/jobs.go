package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// A job is one independent measurement in its own lab(s); jobs run on a
// small pool, longest first, so the run takes about as long as its longest
// chain. Every job writes its own slot of the result under mu.
type job struct {
	name string
	run  func()
}

// plan lists the jobs of a run, longest first, each storing its figure in
// r. The order matters only for the total time.
func plan(ctx context.Context, o Options, env labEnv, r *Result, ours, base Params) []job {
	var mu sync.Mutex
	locked := func(f func()) { mu.Lock(); defer mu.Unlock(); f() }
	skip := func(part string) bool { return slices.Contains(o.Skip, part) }
	var jobs []job

	if !skip(PartChaos) && o.Chaos > 0 {
		for _, p := range []Params{ours, base} {
			jobs = append(jobs, job{"chaos " + string(p.Variant), func() {
				progress(o, "chaos %s: %s, seed %d", p.Variant, o.Chaos, o.ChaosSeed)
				c := chaosRun(ctx, env, p, o.Chaos, o.ChaosSeed)
				progress(o, "chaos %s: %d bursts, %d recovered, %d leaked %s", p.Variant, c.Bursts, c.Recovered, c.Leaked, firstLine(c.Error))
				locked(func() { r.Chaos = append(r.Chaos, c) })
			}})
		}
	}
	if !skip(PartDeadNodes) {
		d := &DeadNodes{Scenario: ScenarioDeadNodes, Description: deadNodesDescription()}
		r.DeadNodes = d
		without := Params{Variant: "ours without log health", Sets: append(slices.Clone(ours.Sets), "surflare.loghealth=loghealth", "surflare.loghealth.enabled=0")}
		// The warm-up is sized in rounds of a 5 s urltest (deadUrltestEvery):
		// this part measures what log health's data saves, not how fast
		// the data comes, so it keeps that cadence whatever the run's.
		env := env
		env.vendor = append(slices.Clone(env.vendor), URLTestCadence(int(deadUrltestEvery/time.Second)))
		jobs = append(jobs,
			job{"dead nodes without urltest data", func() {
				m := runScenario(ctx, env, ScenarioDeadNodes, without, o.DeadNodeRuns, o.Progress)
				locked(func() { d.WithoutData = m })
			}},
			job{"dead nodes with urltest data", func() {
				m := runScenario(ctx, env, ScenarioDeadNodes, ours, o.DeadNodeRuns, o.Progress)
				locked(func() { d.WithData = m })
			}})
	}
	if !skip(PartSoak) {
		for _, p := range []Params{ours, base} {
			jobs = append(jobs, job{"soak " + string(p.Variant), func() {
				progress(o, "soak %s: %s at %d %% loss, %d ms jitter", p.Variant, o.Soak, o.LossPct, o.JitterMS)
				s := soak(ctx, env, p, o.Soak, o.LossPct, o.JitterMS)
				progress(o, "soak %s: %d rotations, %d connect attempts %s", p.Variant, s.Rotations, s.Reconnects, firstLine(s.Error))
				locked(func() { r.Soak = append(r.Soak, s) })
			}})
		}
	}
	if !skip(PartScenarios) {
		type cell struct {
			name    string
			cadence int
		}
		var cells []cell
		for _, name := range o.Scenarios {
			if !slices.Contains(CadenceScenarios, name) {
				cells = append(cells, cell{name, cadenceOf(o.Vendor)})
				continue
			}
			for _, c := range o.Cadences {
				cells = append(cells, cell{name, c})
			}
		}
		r.Scenarios = make([]ScenarioRow, len(cells))
		for i, c := range cells {
			r.Scenarios[i].Name, r.Scenarios[i].CadenceS = c.name, c.cadence
		}
		// Baseline jobs first: with 30 s checks and no early signals every
		// baseline run is slow. Slow cadences first within each side.
		order := make([]int, len(cells))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int { return cells[b].cadence - cells[a].cadence })
		for _, side := range []struct {
			p        Params
			runs     int
			names    []string
			cadences []int
		}{{base, o.BaselineRuns, o.BaselineScenarios, o.BaselineCadences}, {ours, o.Runs, o.Scenarios, o.Cadences}} {
			for _, i := range order {
				c := cells[i]
				if !slices.Contains(side.names, c.name) ||
					(slices.Contains(CadenceScenarios, c.name) && !slices.Contains(side.cadences, c.cadence)) {
					continue
				}
				p, runs := side.p, side.runs
				env := env
				if slices.Contains(CadenceScenarios, c.name) {
					env.vendor = append(slices.Clone(env.vendor), URLTestCadence(c.cadence))
				}
				at := fmt.Sprintf("%s @ %d s urltest", c.name, c.cadence)
				jobs = append(jobs, job{"scenario " + at + " " + string(p.Variant), func() {
					progress(o, "scenario %s (%s): %d runs", at, p.Variant, runs)
					m := runScenario(ctx, env, registryName(c.name), p, runs, o.Progress)
					s := m.Summary
					progress(o, "scenario %s (%s): detect p50 %s p95 %s, recover p50 %s p95 %s %s", at, p.Variant,
						fmtSeconds(s.P50DetectS.f()), fmtSeconds(s.P95DetectS.f()), fmtSeconds(s.P50RecoverS.f()), fmtSeconds(s.P95RecoverS.f()), firstLine(m.Error))
					locked(func() {
						if p.Variant == Ours {
							r.Scenarios[i].Ours = m
						} else {
							r.Scenarios[i].Baseline = m
						}
					})
				}})
			}
		}
	}
	if !skip(PartFootprint) {
		for _, p := range []Params{ours, base} {
			jobs = append(jobs, job{"footprint " + string(p.Variant), func() {
				progress(o, "footprint %s: %s warm-up, %s window", p.Variant, o.SteadyWarmup, o.Steady)
				f := footprint(ctx, env, p, o.SteadyWarmup, o.Steady)
				progress(o, "footprint %s: RSS %d kB (peak %d kB), CPU %.1f s/h + children %.1f s/h, %.0f children/h %s",
					p.Variant, f.RSSKB, f.PeakRSSKB, f.CPUSecPerHour, f.ChildCPUSecPerHour, f.ChildrenPerHour, firstLine(f.Error))
				locked(func() { r.Footprint = append(r.Footprint, f) })
			}})
		}
	}
	if !skip(PartLeaks) {
		bootLock := abs(o.RepoRoot, BootLockRelPath)
		for _, c := range []struct {
			name  string
			check func() LeakCheck
		}{
			{"restart ours", func() LeakCheck { return restartLeaks(ctx, env, ours) }},
			{"restart baseline", func() LeakCheck { return restartLeaks(ctx, env, base) }},
			{"boot ours", func() LeakCheck { return bootLeaks(ctx, env, ours, bootLock, true) }},
			{"boot baseline", func() LeakCheck { return bootLeaks(ctx, env, base, bootLock, true) }},
			{"boot without lock", func() LeakCheck { return bootLeaks(ctx, env, ours, bootLock, false) }},
		} {
			slot := len(r.Leaks)
			r.Leaks = append(r.Leaks, LeakCheck{})
			jobs = append(jobs, job{"leaks " + c.name, func() {
				lc := c.check()
				progress(o, "leaks, %s (%s): %d %s", lc.Name, lc.Variant, lc.Packets, firstLine(lc.Error))
				locked(func() { r.Leaks[slot] = lc })
			}})
		}
	}
	jobs = append(jobs, job{"fake connect", func() {
		d, err := fakeConnect(ctx, env, fakeConnectRuns)
		locked(func() {
			if err != nil {
				r.Missing = append(r.Missing, "fake connect time: "+err.Error())
				return
			}
			r.FakeConnectS = Num(d.Seconds())
		})
		progress(o, "fake connect: %.2f s (median of %d)", d.Seconds(), fakeConnectRuns)
	}})
	return jobs
}

// runJobs runs jobs on n workers, in order, until all are done or ctx
// ends (a job sees ctx itself and ends early).
func runJobs(ctx context.Context, jobs []job, n int) {
	ch := make(chan job)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range ch {
				j.run()
			}
		}()
	}
	for _, j := range jobs {
		if ctx.Err() != nil {
			break
		}
		ch <- j
	}
	close(ch)
	wg.Wait()
}
