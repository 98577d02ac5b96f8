package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"surflare-watchdog/src/lab"
)

// Steady state: after the daemon is healthy it settles for warmup (first
// detector and log-health rounds, GC) before the window starts. A LAN
// client makes one request every steadyTrafficPeriod — a quiet household,
// not an idle box — and nothing polls the daemon's status during the
// window (each poll would be work the daemon does for the benchmark).
const (
	steadyTrafficPeriod = 5 * time.Second
	forkMethod          = "the kernel's proc connector (fork events of the daemon's pid and its descendants; exact, nothing polled)"
)

// footprint measures the daemon's memory, CPU and child processes over a
// steady window.
func footprint(ctx context.Context, env labEnv, p Params, warmup, window time.Duration) Footprint {
	f := Footprint{Variant: p.Variant, WindowS: Num(window.Seconds()), ChildMethod: forkMethod}
	fc, err := NewForkCounter()
	if err != nil {
		f.Error = err.Error()
		return f
	}
	defer fc.Close()
	fctx, stopForks := context.WithCancel(ctx)
	forksDone := make(chan error, 1)
	go func() { forksDone <- fc.Run(fctx) }()
	defer func() { stopForks(); <-forksDone }()

	l, err := env.up(ctx)
	if err != nil {
		f.Error = err.Error()
		return f
	}
	defer l.Close()
	defer stopDaemon(l)
	sets, probeURL := footprintSets(p)
	f.ProbeURL = probeURL
	st, err := startHealthy(ctx, l, sets)
	if err != nil {
		f.Error = err.Error()
		return f
	}
	pid := st.PID
	if comm, _ := os.ReadFile(filepath.Join("/proc", fmt.Sprint(pid), "comm")); !strings.HasPrefix(string(comm), "surflare-watch") {
		f.Error = fmt.Sprintf("pid %d from the daemon's status is %q, not the daemon", pid, strings.TrimSpace(string(comm)))
		return f
	}
	fc.Watch(pid)
	tr := startTraffic(ctx, l, steadyTrafficPeriod, false)
	defer tr.stop()
	if err := sleep(ctx, warmup); err != nil {
		f.Error = err.Error()
		return f
	}
	fc.Reset()
	s0, err := ReadProc(pid)
	if err != nil {
		f.Error = err.Error()
		return f
	}
	if err := sleep(ctx, window); err != nil {
		f.Error = err.Error()
		return f
	}
	s1, err := ReadProc(pid)
	if err != nil {
		f.Error = fmt.Sprintf("the daemon is gone at the end of the window: %v", err)
		return f
	}
	children, descendants, lost := fc.Counts()
	if lost > 0 {
		f.ChildMethod += fmt.Sprintf("; %d receive overruns may have lost events", lost)
	}
	w := s1.At.Sub(s0.At)
	f.RSSKB, f.PeakRSSKB = s1.RSSKB, s1.PeakRSSKB
	f.CPUSecPerHour = perHour((s1.CPU - s0.CPU).Seconds(), w)
	f.ChildCPUSecPerHour = perHour((s1.ChildCPU - s0.ChildCPU).Seconds(), w)
	f.ChildrenPerHour = perHour(float64(children), w)
	f.DescendantsPerHour = perHour(float64(descendants), w)
	if after, err := l.DaemonStatus(ctx); err == nil && after.State != "healthy" {
		f.Error = fmt.Sprintf("not steady: the daemon left healthy during the window (now %s)", after.State)
	}
	return f
}

// FootprintProbeURL is the 503 probe's URL in our footprint window:
// https, as shipped (the default storm503.probe_url is an https:// URL:
// a TLS handshake through the tunnel every probe_interval), at the lab's
// search host, whose certificate the lab's CA signs. The lab's own config
// (and the latency scenarios) keep its plain-http URL, which costs the
// daemon ~300 µs less a round: a footprint on it would not be a router's.
// The variable lets a run compare (surflare-bench --footprint-probe-url).
var FootprintProbeURL = lab.SearchHTTPSURL

// footprintSets are p's sets for a footprint window and the 503 probe URL
// in it. Only ours gets the https URL: the baseline's 503 monitor is off
// (storm503.enabled=0), it has no probe to point anywhere.
func footprintSets(p Params) ([]string, string) {
	if p.Variant != Ours {
		return p.Sets, ""
	}
	return append(slices.Clone(p.Sets), "surflare.storm503=storm503", "surflare.storm503.probe_url="+FootprintProbeURL), FootprintProbeURL
}

// fakeConnect times the lab's fake `surflare connect` (after one login),
// n times, and returns the median: the recovery target allows 10 s plus
// this.
func fakeConnect(ctx context.Context, env labEnv, n int) (time.Duration, error) {
	l, err := env.up(ctx)
	if err != nil {
		return 0, err
	}
	defer l.Close()
	if err := l.Login(ctx); err != nil {
		return 0, fmt.Errorf("fake login: %w", err)
	}
	var ds []*float64
	for i := range n {
		node := lab.Nodes[i%len(lab.Nodes)].Name
		start := time.Now()
		if _, err := l.Surflare(ctx, "connect", "--node", node, "--daemon"); err != nil {
			return 0, fmt.Errorf("fake connect %s: %w", node, err)
		}
		d := time.Since(start).Seconds()
		ds = append(ds, &d)
		if _, err := l.Surflare(ctx, "disconnect"); err != nil {
			return 0, fmt.Errorf("fake disconnect: %w", err)
		}
	}
	return time.Duration(Percentile(ds, 50) * float64(time.Second)), nil
}
