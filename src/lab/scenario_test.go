package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// --- pure parts: no root ---

func f64(x float64) *float64 { return &x }

func TestScenarioSummaryPercentilesAndCounts(t *testing.T) {
	r := ScenarioResult{Scenario: "x"}
	for i := 1; i <= 10; i++ {
		run := ScenarioRun{DetectS: f64(float64(i)), LeakedPackets: uint64(i % 4), Recovered: i%2 == 0}
		if i <= 4 {
			run.RecoverS = f64(float64(10 * i))
		}
		r.Runs = append(r.Runs, run)
	}
	r.Summarize()
	s := r.Summary
	check := func(name string, got *float64, want float64) {
		t.Helper()
		if got == nil || *got != want {
			t.Errorf("%s = %v, want %v", name, fmtSecs(got), want)
		}
	}
	check("p50 detect", s.P50DetectS, 5)
	check("p95 detect", s.P95DetectS, 10)
	check("p50 recover", s.P50RecoverS, 20)
	check("p95 recover", s.P95RecoverS, 40)
	if s.MaxLeakedPackets != 3 || s.RecoveredRuns != 5 {
		t.Errorf("max leaked %d recovered %d, want 3 and 5", s.MaxLeakedPackets, s.RecoveredRuns)
	}

	var none ScenarioResult
	none.Runs = []ScenarioRun{{}}
	none.Summarize()
	if none.Summary.P50DetectS != nil || none.Summary.P95RecoverS != nil {
		t.Errorf("no figures must give null percentiles, got %+v", none.Summary)
	}
}

// The benchmark reads this JSON: the field names are a contract.
func TestScenarioJSONShapeIsStable(t *testing.T) {
	r := ScenarioResult{Scenario: ScenarioNodeDown, Runs: []ScenarioRun{
		{DetectS: f64(1.5), NodesTried: []string{"Los Angeles"}, LeakedPackets: 0, Recovered: true},
		{NodesTried: []string{}},
	}}
	r.Summarize()
	var buf bytes.Buffer
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, buf.String())
	}
	if got["scenario"] != ScenarioNodeDown {
		t.Errorf("scenario = %v", got["scenario"])
	}
	runs, _ := got["runs"].([]any)
	if len(runs) != 2 {
		t.Fatalf("runs = %v", got["runs"])
	}
	run0 := runs[0].(map[string]any)
	for _, k := range []string{"detect_s", "recover_s", "nodes_tried", "dead_nodes_tried", "leaked_packets"} {
		if _, ok := run0[k]; !ok {
			t.Errorf("run lacks %q: %v", k, run0)
		}
	}
	if run0["recover_s"] != nil {
		t.Errorf("a missing recovery must be null, got %v", run0["recover_s"])
	}
	if run0["detect_s"] != 1.5 {
		t.Errorf("detect_s = %v, want 1.5", run0["detect_s"])
	}
	sum := got["summary"].(map[string]any)
	for _, k := range []string{"p50_detect_s", "p95_detect_s", "p50_recover_s", "p95_recover_s", "max_leaked_packets", "recovered_runs"} {
		if _, ok := sum[k]; !ok {
			t.Errorf("summary lacks %q: %v", k, sum)
		}
	}
	if sum["recovered_runs"] != 1.0 || sum["p50_recover_s"] != nil {
		t.Errorf("summary = %v", sum)
	}

	buf.Reset()
	if err := r.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "Los Angeles") || !strings.Contains(buf.String(), "recovered 1/2") {
		t.Errorf("table:\n%s", buf.String())
	}
}

func TestParseDaemonLogLine(t *testing.T) {
	seen := time.Date(2026, 11, 29, 15, 0, 0, 0, time.UTC)
	text := parseLogLine(`time=2026-11-29T14:03:11.250Z level=WARN msg="Node rotation: Dallas -> Los Angeles (2/6)" subsystem=watchdog reason="2 consecutive failed checks"`, seen)
	if text.Msg != "Node rotation: Dallas -> Los Angeles (2/6)" || !text.At.Equal(time.Date(2026, 11, 29, 14, 3, 11, 250e6, time.UTC)) {
		t.Errorf("text handler line: %+v", text)
	}
	js := parseLogLine(`{"time":"2026-11-29T14:03:12.5Z","level":"INFO","msg":"Connecting to New York","subsystem":"watchdog"}`, seen)
	if js.Msg != "Connecting to New York" || js.When().Sub(text.At) != 1250*time.Millisecond {
		t.Errorf("JSON handler line: %+v", js)
	}
	plain := parseLogLine("2026/11/29 14:03:11 INFO Connecting to Miami", seen)
	if !plain.When().Equal(seen) || !strings.Contains(plain.Msg, "Connecting to Miami") {
		t.Errorf("plain line: %+v", plain)
	}
	logs := []logLine{
		parseLogLine(`time=2026-11-29T14:03:10Z level=INFO msg="Connecting to Dallas"`, seen),
		text,
		parseLogLine(`time=2026-11-29T14:03:11.3Z level=INFO msg="Connecting to Los Angeles" reason=x`, seen),
		js,
	}
	got := connectsAfter(logs, nil, time.Date(2026, 11, 29, 14, 3, 11, 0, time.UTC))
	var nodes []string
	for _, c := range got {
		nodes = append(nodes, c.node)
	}
	if !slices.Equal(nodes, []string{"Los Angeles", "New York"}) {
		t.Errorf("connects after T0 = %q", nodes)
	}
}

func TestClientRecoveryNeedsALiveExitAfterTheOutage(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	dallas, la := Nodes[0].Addr.String(), Nodes[1].Addr.String()
	h := &Harness{deadFrom: map[string][]deadSpan{}, t0: t0}
	h.SetDead("Dallas", true, t0)

	clients := []clientResult{
		{Start: at(-100), End: at(10), OK: true, IP: dallas},             // before T0: ignored
		{Start: at(50), End: at(60), OK: true, IP: dallas},               // fault not seen yet, but Dallas is dead
		{Start: at(150), End: at(2150), OK: false},                       // the outage
		{Start: at(900), End: at(950), OK: true, IP: WANRouter.String()}, // direct: not a node
		{Start: at(3000), End: at(3040), OK: true, IP: la},               // recovery
		{Start: at(3100), End: at(3120), OK: true, IP: la},
	}
	got, failed, ok := h.clientRecovery(clients)
	if !ok || !failed || !got.Equal(at(3040)) {
		t.Errorf("recovery = %v failed=%v ok=%v, want %v", got.Sub(t0), failed, ok, 3040*time.Millisecond)
	}

	h.RecoverNotBefore(at(3050))
	if got, _, _ := h.clientRecovery(clients); !got.Equal(at(3120)) {
		t.Errorf("with RecoverNotBefore: recovery at %v, want 3.12s", got.Sub(t0))
	}

	// A node that comes back counts from then on.
	h2 := &Harness{deadFrom: map[string][]deadSpan{}, t0: t0}
	h2.SetDead("Dallas", true, t0)
	h2.SetDead("Dallas", false, at(5000))
	if h2.deadAt("Dallas", at(6000)) || !h2.deadAt("Dallas", at(4000)) {
		t.Error("dead spans wrong")
	}
	if _, _, ok := h2.clientRecovery([]clientResult{{Start: at(100), End: at(200), OK: false}, {Start: at(300), End: at(400), OK: true, IP: dallas}}); ok {
		t.Error("a dead node's answer counted as recovery")
	}
}

func TestScenarioSetsAddMissingSections(t *testing.T) {
	spec := ScenarioSpec{Name: "x", Sets: []string{"surflare.main.fail_threshold=3"}}
	// keepalive is not in the lab config, loopguard and main are.
	sets := scenarioSets(spec, []string{"surflare.keepalive.idle=20", "surflare.keepalive.count=5", "surflare.loopguard.min_active=-1"})
	i := slices.Index(sets, "surflare.keepalive=keepalive")
	j := slices.Index(sets, "surflare.keepalive.idle=20")
	if i < 0 || j < i || slices.Index(sets[i+1:], "surflare.keepalive=keepalive") >= 0 {
		t.Errorf("keepalive section not added once before its options: %q", sets)
	}
	if slices.Contains(sets, "surflare.main=main") || slices.Contains(sets, "surflare.loopguard=loopguard") {
		t.Errorf("an existing section was re-added: %q", sets)
	}
	if k := slices.Index(sets, "surflare.main.fail_threshold=3"); k < slices.Index(sets, "surflare.main.fail_threshold=2") {
		t.Errorf("the scenario's own set must come after the base: %q", sets)
	}
	if err := checkSets(sets); err != nil {
		t.Errorf("checkSets: %v", err)
	}
	if err := checkSets([]string{"surflare.main.fail_threshold"}); err == nil {
		t.Error("a set without = was accepted")
	}
}

func TestEveryScenarioIsRegistered(t *testing.T) {
	var names []string
	for _, s := range Scenarios() {
		names = append(names, s.Name)
		if s.Summary == "" || (s.Run == nil) == (s.Standalone == nil) {
			t.Errorf("scenario %s: needs a summary and exactly one of Run/Standalone", s.Name)
		}
	}
	for _, want := range []string{ScenarioNodeDown, ScenarioNodeBlackhole, ScenarioRelayBlackhole, ScenarioProxyCrash,
		ScenarioDomesticExit, ScenarioAuthExpired, ScenarioAuth429, ScenarioSubscription, ScenarioAPIDownReconnect,
		ScenarioStorm, ScenarioKill9Connect, ScenarioProxyLoop, ScenarioDNSLeak,
		ScenarioModeGlobal, ScenarioModeRule, ScenarioModeDirect, ScenarioTunnelOnlyAPI} {
		if !slices.Contains(names, want) {
			t.Errorf("scenario %s not registered (have %q)", want, names)
		}
	}
	if _, err := LookupScenario("nope"); !errors.Is(err, errNoScenario) || !strings.Contains(err.Error(), ScenarioStorm) {
		t.Errorf("unknown scenario error = %v", err)
	}
	if _, err := RunScenario(context.Background(), "nope", ScenarioOptions{}); err == nil {
		t.Error("RunScenario accepted an unknown name")
	}
}

// --- the scenarios against the real daemon: root ---

// scenarioCase is what a household expects from one scenario.
type scenarioCase struct {
	name  string
	sets  []string
	check func(t *testing.T, r ScenarioRun)
}

// recovers: traffic came back through a live node, the daemon noticed,
// and nothing leaked.
func recovers(t *testing.T, r ScenarioRun) {
	t.Helper()
	if r.DetectS == nil {
		t.Errorf("the daemon never left healthy (states %q)", r.States)
	}
	if !r.Recovered || r.RecoverS == nil {
		t.Errorf("LAN traffic never came back through a live node: %s", r.Outcome)
	}
	noLeak(t, r)
}

func noLeak(t *testing.T, r ScenarioRun) {
	t.Helper()
	if r.LeakedPackets != 0 {
		t.Errorf("%d LAN/router packets leaked past the kill switch: %s", r.LeakedPackets, r.Leaks)
	}
}

// holds: no traffic possible; the kill switch must hold without a login
// storm.
func holds(maxLogins int) func(t *testing.T, r ScenarioRun) {
	return func(t *testing.T, r ScenarioRun) {
		t.Helper()
		noLeak(t, r)
		if r.Extra["killswitch_table"] != true {
			t.Errorf("inet killswitch is gone while the account is bad")
		}
		if n, _ := r.Extra["direct_client_requests"].(int); n != 0 {
			t.Errorf("%d LAN requests got out directly", n)
		}
		if r.LoginAttempts > maxLogins {
			t.Errorf("login storm: %d logins in %s (at most %d allowed)", r.LoginAttempts, holdObserve, maxLogins)
		}
		if !r.Recovered {
			t.Errorf("not held: %s", r.Outcome)
		}
	}
}

func scenarioCases() []scenarioCase {
	return []scenarioCase{
		{name: ScenarioNodeDown, check: recovers},
		{name: ScenarioNodeBlackhole, check: recovers},
		{name: ScenarioRelayBlackhole, check: func(t *testing.T, r ScenarioRun) {
			if !r.Recovered {
				t.Errorf("LAN traffic never came back through the second relay: %s", r.Outcome)
			}
			noLeak(t, r)
		}},
		{name: ScenarioProxyCrash, check: recovers},
		{name: ScenarioDomesticExit, check: func(t *testing.T, r ScenarioRun) {
			if r.DetectS == nil || !r.Recovered {
				t.Errorf("domestic exit not detected or not recovered: %s", r.Outcome)
			}
			// The broken proxy's own direct packets before the reconnect
			// are the fault itself; after it nothing may leak.
			before, _ := r.Extra["leaked_before_reconnect"].(uint64)
			if r.LeakedPackets > before {
				t.Errorf("%d packets leaked after the reconnect (%s)", r.LeakedPackets-before, r.Leaks)
			}
		}},
		{name: ScenarioAuthExpired, check: func(t *testing.T, r ScenarioRun) {
			recovers(t, r)
			if r.LoginAttempts < 1 {
				t.Errorf("recovered without logging in again: %s", r.Outcome)
			}
		}},
		{name: ScenarioAuth429, check: holds(maxHoldLogins)},
		{name: ScenarioSubscription, check: holds(0)},
		{name: ScenarioAPIDownReconnect, check: recovers},
		{name: ScenarioStorm, check: func(t *testing.T, r ScenarioRun) {
			recovers(t, r)
			if !slices.Contains(r.States, "storm_cooldown") {
				t.Errorf("no storm protection with every exit down (states %q)", r.States)
			}
		}},
		{name: ScenarioKill9Connect, check: recovers},
		{name: ScenarioProxyLoop, check: func(t *testing.T, r ScenarioRun) {
			if open, _ := r.Extra["circuit_open_s"].(*float64); open == nil {
				t.Errorf("the loop guard never opened its circuit")
			}
			// The daemon knew both relays before the fault: the looping
			// relay's circuit must close the other relay with it.
			if learned, _ := r.Extra["relays_learned_s"].(*float64); learned != nil && r.Extra["sibling_opens"] == 0 {
				t.Errorf("no sibling circuit although the daemon knew the relays: the loop could fail over to the other relay; guard log %q", r.Extra["guard_log"])
			}
			if r.Extra["loop_contained"] != true {
				t.Errorf("the proxy sat at its fd limit for %s of the %s loop (peak %v of %v): the loop guard did not contain it; guard log %q",
					fmtExtra(r.Extra["fd_exhausted_for_s"]), loopHold, r.Extra["peak_fds"], r.Extra["fd_limit"], r.Extra["guard_log"])
			}
			recovers(t, r)
		}},
		{name: ScenarioTunnelOnlyAPI, check: func(t *testing.T, r ScenarioRun) {
			if r.Extra["token_expired_at_fault"] != false {
				t.Errorf("the token was %v s old when the node went down: not refreshed", fmtExtra(r.Extra["token_age_at_fault_s"]))
			}
			recovers(t, r)
		}},
		// Without the refresh the token has expired and the API cannot be
		// reached: no recovery, said plainly, and nothing leaks meanwhile.
		{name: ScenarioTunnelOnlyAPI, sets: []string{"surflare.main.login_refresh=0"}, check: func(t *testing.T, r ScenarioRun) {
			if r.Extra["token_expired_at_fault"] != true {
				t.Errorf("the token was renewed without a refresh: the scenario proves nothing")
			}
			if r.Recovered {
				t.Errorf("recovered with an expired token and no way to the account API: %s", r.Outcome)
			}
			if why, _ := r.Extra["why"].(string); !strings.Contains(why, "failed the account check") {
				t.Errorf("why line %q does not say the account check fails", why)
			}
			noLeak(t, r)
		}},
		// The guard switched off: the same loop must exhaust the proxy, or
		// the check above could not fail.
		{name: ScenarioProxyLoop, sets: []string{"surflare.loopguard.min_active=-1"}, check: func(t *testing.T, r ScenarioRun) {
			if r.Extra["fd_exhausted"] != true || r.Extra["loop_contained"] != false {
				t.Errorf("with the loop guard off the proxy kept its descriptors (at the limit for %s, peak %v of %v): the loop scenario proves nothing",
					fmtExtra(r.Extra["fd_exhausted_for_s"]), r.Extra["peak_fds"], r.Extra["fd_limit"])
			}
		}},
	}
}

// TestScenarios runs every scenario once against the real daemon in its
// own lab (dns-leak has its own test, TestDNSLeakScenario).
func TestScenarios(t *testing.T) {
	needRoot(t)
	if testing.Short() {
		t.Skip("-short: scenarios need the built binaries and take minutes")
	}
	if buildErr != nil {
		t.Fatalf("building the lab binaries: %v", buildErr)
	}
	for _, c := range scenarioCases() {
		name := c.name
		if len(c.sets) > 0 {
			name += "+" + strings.Join(c.sets, "+")
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			res, err := RunScenario(ctx, c.name, ScenarioOptions{Runs: 1, BinDir: binDir, Set: c.sets})
			if err != nil {
				t.Fatal(err)
			}
			r := res.Runs[0]
			b, _ := json.Marshal(r)
			t.Logf("%s: detect %s recover %s nodes %q leaks %d logins %d: %s\n%s", c.name, fmtSecs(r.DetectS),
				fmtSecs(r.RecoverS), r.NodesTried, r.LeakedPackets, r.LoginAttempts, r.Outcome, b)
			if r.Error != "" {
				t.Fatalf("run failed: %s", r.Error)
			}
			c.check(t, r)
		})
	}
}
