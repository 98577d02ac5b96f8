package daemon

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"surflare-watchdog/src/config"
	"surflare-watchdog/src/detectors/storm503"
	"surflare-watchdog/src/nodeprobe"
	"surflare-watchdog/src/watchdog"
)

func TestKeepaliveCgroupIsPerRunDir(t *testing.T) {
	if got := keepaliveCgroup(config.Default().Paths.RunDir); got != "" {
		t.Errorf("the router's run dir must use the default group, got %q", got)
	}
	a, b := keepaliveCgroup("/tmp/lab-a/run"), keepaliveCgroup("/tmp/lab-b/run")
	if a != "" && (a == b || !strings.Contains(a, "surflare-proxy-")) {
		t.Errorf("labs share or misname their cgroup: %q %q", a, b)
	}
}

func TestToFieldsWrapsNonObjects(t *testing.T) {
	f, err := toFields([]string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Map()["result"]; !ok {
		t.Errorf("a list must be wrapped as {result: …}, got %v", f.Map())
	}
	f, err = toFields(map[string]any{"state": "healthy", "n": 3})
	if err != nil || f.Map()["state"] != "healthy" {
		t.Errorf("object: %v %v", f.Map(), err)
	}
}

func TestLogRingKeepsTheLastLines(t *testing.T) {
	var r logRing
	for i := range logRingSize + 10 {
		r.add(time.Unix(int64(i), 0), &watchdog.LogLine{Level: "INFO", Message: "line " + string(rune('a'+i%26))})
	}
	if got := len(r.last(0)); got != logRingSize {
		t.Errorf("kept %d lines, want %d", got, logRingSize)
	}
	if got := r.last(2); len(got) != 2 || !strings.HasSuffix(got[1], "line "+string(rune('a'+(logRingSize+9)%26))) {
		t.Errorf("last(2) = %q", got)
	}
}

func TestDetectorStatesWithDetectorsOff(t *testing.T) {
	s := &detectorSet{}
	names := map[string]string{}
	for _, st := range s.DetectorStates() {
		names[st.Name] = st.State
	}
	if names["early_detector"] != "off" || names["log_health"] != "off" || names["keepalive"] != "inactive" {
		t.Errorf("states = %v", names)
	}
}

// The daemon's logger carries the subsystems' lines as lines of their own:
// level, message, subsystem (they once came through package log as INFO
// with all of that folded into the message).
func TestSetupLoggingKeepsSubsystemLevels(t *testing.T) {
	old := slog.Default()
	t.Cleanup(func() { slog.SetDefault(old) })
	var b syncBuffer
	SetupLogging(&b, slog.LevelInfo)
	m := storm503.New(storm503.Options{Count: 2})
	m.Record(time.Now())
	m.Record(time.Now())
	want := `level=WARN msg="503 storm: 2 urltest 503 in 5m0s" subsystem=storm503`
	if got := b.String(); !strings.Contains(got, want) {
		t.Errorf("missing %s in:\n%s", want, got)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The cause of a failure is in its fields: `ubus call surflare log` shows
// them as the log does (the web log gets them in the event's fields).
func TestLogRingKeepsTheFields(t *testing.T) {
	var r logRing
	r.add(time.Unix(0, 0), &watchdog.LogLine{Level: "ERROR", Message: "Connect failed",
		Fields: map[string]string{"node": "Dallas", "err": "fork/exec /usr/bin/surflare: no such file or directory"}})
	got := r.last(1)[0]
	if !strings.HasSuffix(got, `ERROR Connect failed err="fork/exec /usr/bin/surflare: no such file or directory" node="Dallas"`) {
		t.Errorf("line = %q", got)
	}
}

// A node the tunnel has not been on gets the node probe's round trip; one
// with a passing check keeps the engine's own number.
func TestProbeLatencyFillsOnlyWhatTheEngineLacks(t *testing.T) {
	dir := t.TempDir()
	ms := func(v float64) *float64 { return &v }
	if err := nodeprobe.WriteResults(dir, nodeprobe.Report{Nodes: []nodeprobe.Result{
		{Node: "Dallas", OK: true, L7TTFBMS: ms(80)},
		{Node: "Chicago", OK: true, L7TTFBMS: ms(41.6)},
		{Node: "Tokyo", OK: false, L7TTFBMS: ms(300)},
	}}); err != nil {
		t.Fatal(err)
	}
	got := withProbeLatency([]watchdog.CandidateStatus{
		{Node: "Dallas", LatencyMS: 35}, {Node: "Chicago"}, {Node: "Tokyo"},
	}, dir)
	if got[0].LatencyMS != 35 || got[1].LatencyMS != 42 || got[2].LatencyMS != 0 {
		t.Errorf("latencies %d %d %d, want 35 42 0", got[0].LatencyMS, got[1].LatencyMS, got[2].LatencyMS)
	}
}
