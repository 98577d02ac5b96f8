package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"surflare-watchdog/src/detectors/loghealth"
	"surflare-watchdog/src/nodeprobe"
	"surflare-watchdog/src/runfiles"
)

// The detectors against the daemon in the lab (issue 6 part 6): each fault
// is one the detector exists for, and each test checks the daemon's own
// words (its log) and its state, as a user would.

// bulkUpload keeps n TCP uploads from LAN client 0 through the tunnel to a
// sink in the internet namespace until ctx ends, so the proxy always has
// data in flight towards the relay: a black-holed relay then stalls the
// proxy's sockets (cwnd 1, retransmission backoff), which is what the early
// detector scores. (A download would leave the proxy's relay sockets with
// nothing but ACKs to send: no backoff to see.) It returns the bytes
// written so far.
func bulkUpload(t *testing.T, ctx context.Context, l *Lab, n int) *atomic.Int64 {
	t.Helper()
	ins, err := l.NS(RoleInternet)
	if err != nil {
		t.Fatal(err)
	}
	sink := net.JoinHostPort(Search.String(), "9009")
	ln, err := listenIn(ins, "tcp4", sink)
	if err != nil {
		t.Fatal(err)
	}
	context.AfterFunc(ctx, func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(io.Discard, c) }()
		}
	}()
	lan, err := l.NS(l.Clients()[0].Role)
	if err != nil {
		t.Fatal(err)
	}
	var sent atomic.Int64
	buf := bytes.Repeat([]byte("surflare-lab-bulk "), 4096)
	for i := 0; i < n; i++ {
		go func() {
			for ctx.Err() == nil {
				dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				c, err := dialIn(dctx, lan, "tcp4", sink)
				cancel()
				if err != nil {
					time.Sleep(100 * time.Millisecond)
					continue
				}
				context.AfterFunc(ctx, func() { c.Close() })
				for ctx.Err() == nil {
					c.SetWriteDeadline(time.Now().Add(30 * time.Second))
					k, err := c.Write(buf)
					sent.Add(int64(k))
					if err != nil {
						break
					}
				}
				c.Close()
			}
		}()
	}
	return &sent
}

// A black-holed relay under load is caught by the early detector long
// before the next periodic check (60 s away) would have run.
func TestEarlyDetectorCatchesBlackholedRelay(t *testing.T) {
	l := upDaemon(t, "surflare.main.check_interval=60",
		"surflare.detector.threshold=8", "surflare.detector.cooldown=60")
	ctx := context.Background()
	st, err := l.WaitDaemon(ctx, 20*time.Second, DaemonState.Healthy)
	if err != nil {
		t.Fatalf("%v\n%s", err, st.Raw)
	}
	bctx, stopBulk := context.WithCancel(ctx)
	defer stopBulk()
	sent := bulkUpload(t, bctx, l, 4)
	// The uploads are flowing through the tunnel before the fault.
	deadline := time.Now().Add(5 * time.Second)
	for sent.Load() < 4<<20 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if sent.Load() < 4<<20 {
		t.Fatalf("bulk upload moved only %d bytes in 5 s", sent.Load())
	}
	checks := st.Counters.Checks
	t0 := time.Now()
	if err := l.Fault(ctx, FaultRelayBlackhole, true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Fault(context.Background(), FaultRelayBlackhole, false) })

	var warnAt time.Duration
	for warnAt == 0 && time.Since(t0) < 30*time.Second {
		if strings.Contains(l.DaemonLog(), "EARLY_WARN_TRIGGERED") {
			warnAt = time.Since(t0)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if warnAt == 0 {
		t.Fatalf("no EARLY_WARN_TRIGGERED within 30 s of the black-hole (uploaded %d bytes)", sent.Load())
	}
	st, err = l.WaitDaemon(ctx, 20*time.Second, func(s DaemonState) bool { return !s.Healthy() })
	if err != nil {
		t.Fatalf("the daemon stayed healthy after the early warning: %v", err)
	}
	left := time.Since(t0)
	if st.Counters.Checks <= checks {
		t.Errorf("no check ran after the early warning (checks %d -> %d)", checks, st.Counters.Checks)
	}
	t.Logf("relay black-hole under load: EARLY_WARN_TRIGGERED after %s, state %s after %s (periodic checks every 60 s)",
		warnAt.Round(time.Millisecond), st.State, left.Round(time.Millisecond))
	if left > 30*time.Second {
		t.Errorf("left healthy only after %s: not well before the 60 s periodic check", left)
	}
	if !strings.Contains(l.DaemonLog(), "Check requested by a detector") {
		t.Error("the log does not say the detector requested the check")
	}
}

// readNodeHealth reads the daemon's node health file.
func readNodeHealth(t *testing.T, l *Lab) loghealth.Report {
	t.Helper()
	var r loghealth.Report
	b, err := os.ReadFile(l.Path(dirRun, runfiles.NodeHealthFile))
	if err == nil {
		err = json.Unmarshal(b, &r)
	}
	if err != nil {
		t.Logf("node health file: %v", err)
	}
	return r
}

// Log health marks exactly the nodes the lab broke: every one of their
// NODE via TRANSIT pairs (each relay and auto), and nothing else.
func TestLogHealthMarksExactlyTheBrokenNodes(t *testing.T) {
	// The point is the urltest errors per pair: the old 5 s cadence.
	l := upDaemonVendor(t, fastURLTest, "surflare.loghealth=loghealth", "surflare.loghealth.threshold=1")
	ctx := context.Background()
	if _, err := l.WaitDaemon(ctx, 20*time.Second, DaemonState.Healthy); err != nil {
		t.Fatal(err)
	}
	broken := []string{"Chicago", "Miami"}
	for _, n := range broken {
		if err := l.Fault(ctx, FaultNodeDown, true, n); err != nil {
			t.Fatal(err)
		}
	}
	var want []string
	for _, n := range broken {
		for _, tr := range []string{"Tokyo", "Singapore", "auto"} {
			want = append(want, loghealth.Key(n, tr))
		}
	}
	sort.Strings(want)
	// urltest runs every 5 s: two cycles put each broken pair over the
	// threshold of 1.
	t0 := time.Now()
	var dead, listed []string
	for time.Since(t0) < 25*time.Second {
		r := readNodeHealth(t, l)
		dead, listed = nil, nil
		for k, p := range r.Nodes {
			listed = append(listed, k)
			if !p.UrltestHealthy {
				dead = append(dead, k)
			}
		}
		sort.Strings(dead)
		sort.Strings(listed)
		if slices.Equal(dead, want) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if !slices.Equal(dead, want) {
		t.Fatalf("dead pairs after %s:\n got %q\nwant %q", time.Since(t0).Round(time.Second), dead, want)
	}
	if !slices.Equal(listed, want) {
		t.Errorf("pairs with errors beyond the broken nodes: %q", listed)
	}
	t.Logf("node health marked exactly %d pairs dead after %s", len(dead), time.Since(t0).Round(time.Millisecond))
	st, err := l.DaemonStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range st.Candidates {
		if c.Dead != slices.Contains(broken, c.Node) {
			t.Errorf("status: %s dead=%v", c.Node, c.Dead)
		}
	}
}

// A 503 storm on the current node: the monitor sees it in the proxy log
// ("503 storm:"), the engine's override vetoes a passing check ("G2: 503
// storm override") and a reconnect or rotation follows.
func TestStorm503TriggersOverride(t *testing.T) {
	// The storm monitor counts urltest 503s: the old 5 s cadence, and our
	// own 503 probe off, so this is the urltest path
	// (TestStorm503ProbeWithoutURLTest is the probe's).
	l := upDaemonVendor(t, fastURLTest, "surflare.storm503=storm503", "surflare.storm503.count=3", "surflare.storm503.probe_interval=0")
	ctx := context.Background()
	st, err := l.WaitDaemon(ctx, 20*time.Second, DaemonState.Healthy)
	if err != nil {
		t.Fatal(err)
	}
	node, attempts := st.Node, st.Counters.ConnectAttempts
	t0 := time.Now()
	if err := l.Fault(ctx, Fault503, true, node); err != nil {
		t.Fatal(err)
	}
	wait := func(what string, timeout time.Duration) time.Duration {
		t.Helper()
		for time.Since(t0) < timeout {
			if strings.Contains(l.DaemonLog(), what) {
				return time.Since(t0)
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Fatalf("%q not in the daemon log within %s", what, timeout)
		return 0
	}
	storm := wait("503 storm:", 20*time.Second)
	override := wait("G2: 503 storm override", 30*time.Second)
	st, err = l.WaitDaemon(ctx, 20*time.Second, func(s DaemonState) bool { return s.Counters.ConnectAttempts > attempts })
	if err != nil {
		t.Fatalf("no reconnect or rotation after the storm: %v", err)
	}
	log := l.DaemonLog()
	i := strings.Index(log, "G2: 503 storm override")
	line := log[i:]
	line = line[:strings.IndexByte(line, '\n')+1]
	t.Logf("503 on %s: storm seen after %s, override after %s: %s", node, storm.Round(time.Millisecond), override.Round(time.Millisecond), strings.TrimSpace(line))
	if !strings.Contains(log[i:], "Reconnecting to") && !strings.Contains(log[i:], "Node rotation") {
		t.Errorf("neither a reconnect nor a rotation follows the override")
	}
	if !strings.Contains(line, "override on "+node) {
		t.Logf("NOTE: the override hit another node than the 503-ing %s (see TestStorm503OverrideSparesOtherNodes)", node)
	}
}

// The override is about the exit in use: 503s that the proxy's urltest
// sees on another node must not veto healthy checks of the current one.
// Today the daemon feeds every urltest 503 of every NODE via TRANSIT pair
// to the monitor (daemon_detectors.go, OnLine), so once the probes have
// rotated away from a 503-ing node the storm keeps reconnecting the
// healthy node it rotated to (seen: "G2: 503 storm override on Los
// Angeles" 0.2 s after the rotation away from a 503-ing Dallas).
func TestStorm503OverrideSparesOtherNodes(t *testing.T) {
	// The storm monitor counts urltest 503s: the old 5 s cadence, and our
	// own 503 probe off, so this is the urltest path
	// (TestStorm503ProbeWithoutURLTest is the probe's).
	l := upDaemonVendor(t, fastURLTest, "surflare.storm503=storm503", "surflare.storm503.count=3", "surflare.storm503.probe_interval=0")
	ctx := context.Background()
	st, err := l.WaitDaemon(ctx, 20*time.Second, DaemonState.Healthy)
	if err != nil {
		t.Fatal(err)
	}
	bad := st.Node
	if err := l.Fault(ctx, Fault503, true, bad); err != nil {
		t.Fatal(err)
	}
	if st, err = l.WaitDaemon(ctx, 20*time.Second, func(s DaemonState) bool { return s.Healthy() && s.Node != bad }); err != nil {
		t.Fatalf("no rotation away from the 503-ing %s: %v", bad, err)
	}
	time.Sleep(12 * time.Second) // two more urltest rounds of 503s from the old node
	log := l.DaemonLog()
	if i := strings.Index(log, "G2: 503 storm override on "+st.Node); i >= 0 {
		t.Errorf("the healthy %s was overridden for %s's 503s: %.160s", st.Node, bad, log[i:])
	}
}

// The node probe through the daemon: a node 80 ms away measures about
// 80 ms more than one 0 ms away, exits are where the lab says, the LAN
// stays protected (kill switch armed, nothing leaks) and the original node
// comes back.
func TestProbeMeasuresLabNodeProperties(t *testing.T) {
	l := upDaemon(t)
	ctx := context.Background()
	st, err := l.WaitDaemon(ctx, 20*time.Second, DaemonState.Healthy)
	if err != nil {
		t.Fatal(err)
	}
	orig := st.Node
	// The moat counts only relays it has learned from the proxy's
	// connections: let it learn them first, so every node gets a SYN ratio.
	if _, err := l.WaitDaemon(ctx, 10*time.Second, func(s DaemonState) bool {
		exitOf(ctx, l)
		return moatRelays(s) > 0
	}); err != nil {
		t.Fatalf("the moat learned no relay: %v", err)
	}
	if err := l.Fault(ctx, FaultLatency, true, "Chicago", "80"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.ResetLeaks(ctx); err != nil {
		t.Fatal(err)
	}

	// Watch while it runs: the LAN client keeps asking, the daemon's
	// state and the kill switch are sampled.
	wctx, stopWatch := context.WithCancel(ctx)
	var mu sync.Mutex
	states := map[string]bool{}
	var clientOK, clientFail, ksMissing int
	var wg sync.WaitGroup
	wg.Go(func() {
		for wctx.Err() == nil {
			if s, err := l.DaemonStatus(wctx); err == nil {
				mu.Lock()
				states[s.State] = true
				mu.Unlock()
			}
			if !killSwitchArmed(wctx, l) && wctx.Err() == nil {
				mu.Lock()
				ksMissing++
				mu.Unlock()
			}
			time.Sleep(150 * time.Millisecond)
		}
	})
	wg.Go(func() {
		for wctx.Err() == nil {
			_, err := exitOf(wctx, l)
			mu.Lock()
			if err == nil {
				clientOK++
			} else {
				clientFail++
			}
			mu.Unlock()
			time.Sleep(100 * time.Millisecond)
		}
	})

	t0 := time.Now()
	var stdout, stderr bytes.Buffer
	cmd := l.CommandContext(ctx, RoleRouter, l.DaemonBinary(), "probe", "Dallas", "Chicago", "--json", "--config", l.DaemonConfigPath())
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	took := time.Since(t0)
	if runErr != nil {
		stopWatch()
		wg.Wait()
		t.Fatalf("probe: %v\nstderr:\n%s\nstdout:\n%s", runErr, stderr.String(), stdout.String())
	}
	t.Logf("probe took %s; progress:\n%s", took.Round(time.Millisecond), stderr.String())
	var rep nodeprobe.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("probe --json: %v\n%s", err, stdout.String())
	}
	st, err = l.WaitDaemon(ctx, 25*time.Second, func(s DaemonState) bool { return s.Healthy() && s.Node == orig })
	stopWatch()
	wg.Wait()
	if err != nil {
		t.Fatalf("the daemon did not come back healthy on %s: %v", orig, err)
	}
	if len(rep.Nodes) != 2 || rep.Nodes[0].Node != "Dallas" || rep.Nodes[1].Node != "Chicago" {
		t.Fatalf("report nodes: %+v", rep.Nodes)
	}
	d, c := rep.Nodes[0], rep.Nodes[1]
	for _, r := range rep.Nodes {
		b, _ := json.Marshal(r)
		t.Logf("%s", b)
		if !r.OK || r.L4RTTMS == nil || r.L7TTFBMS == nil {
			t.Fatalf("%s not measured: %s", r.Node, r.Error)
		}
		if r.ExitCountry != "US" {
			t.Errorf("%s exit country %q, want US", r.Node, r.ExitCountry)
		}
		if r.ExitIP != nodeAddr(r.Node) {
			t.Errorf("%s exits at %s, want %s", r.Node, r.ExitIP, nodeAddr(r.Node))
		}
		if len(r.ServerIPs) == 0 || r.SynRatio == nil || r.SACKRate == nil || r.Urltest == nil {
			t.Errorf("%s: server IPs %q, syn ratio %v, SACK %v, urltest %v", r.Node, r.ServerIPs, r.SynRatio, r.SACKRate, r.Urltest)
		}
		if r.RSTInjected != 0 {
			t.Errorf("%s: %d RSTs from relays on a clean lab path", r.Node, r.RSTInjected)
		}
	}
	// The fake exit sleeps 80 ms before answering the CONNECT (L4: tunnel
	// set-up) and 40 ms on each chunk each way (L7: a warm round trip).
	dL4, dL7 := *c.L4RTTMS-*d.L4RTTMS, *c.L7TTFBMS-*d.L7TTFBMS
	t.Logf("Chicago (80 ms) minus Dallas (0 ms): L4 %+.1f ms, L7 %+.1f ms, cold TTFB %+.1f ms",
		dL4, dL7, *c.ColdTTFBMS-*d.ColdTTFBMS)
	for what, v := range map[string]float64{"L4": dL4, "L7": dL7} {
		if v < 60 || v > 140 {
			t.Errorf("%s difference %.1f ms, want about 80 ms", what, v)
		}
	}
	if rep.OriginalNode != orig {
		t.Errorf("report says original node %q, want %q", rep.OriginalNode, orig)
	}
	fi, err := os.Stat(filepath.Join(l.Path(dirRun), nodeprobe.ResultsFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("results file: %v %v", fi, err)
	}
	mu.Lock()
	t.Logf("during the probe: states %v, LAN client %d ok / %d failed, kill switch missing %d times", keys(states), clientOK, clientFail, ksMissing)
	if !states["probing"] {
		t.Error("the daemon never said it was probing")
	}
	if ksMissing > 0 {
		t.Errorf("the kill switch was missing %d times during the probe", ksMissing)
	}
	mu.Unlock()
	lc, err := l.Leaks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lc.Total() != 0 {
		t.Errorf("leaked during the probe: %s", lc)
	}
	if !strings.Contains(l.DaemonLog(), "Node probe finished: back to "+orig) {
		t.Error("the log does not say the probe restored the node")
	}
}

func nodeAddr(name string) string {
	for _, n := range Nodes {
		if n.Name == name {
			return n.Addr.String()
		}
	}
	return fmt.Sprintf("(no node %q)", name)
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// moatRelays is the number of relay addresses in the moat's set, from
// status --json.
func moatRelays(s DaemonState) int {
	var v struct {
		Daemon struct {
			NFT []struct {
				Name string         `json:"name"`
				Sets map[string]int `json:"sets"`
			} `json:"nft"`
		} `json:"daemon"`
	}
	json.Unmarshal(s.Raw, &v)
	for _, t := range v.Daemon.NFT {
		if t.Name == "inet surflare_moat" {
			return t.Sets["relays4"]
		}
	}
	return 0
}
