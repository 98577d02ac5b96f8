package daemon

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"surflare-watchdog/src/config"
	"surflare-watchdog/src/loghealth"
	"surflare-watchdog/src/storm503"
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

func TestStormOverrideFollowsTheMonitor(t *testing.T) {
	now := time.Now()
	m := storm503.New(storm503.Options{Count: 3, Window: time.Minute, ActiveWindow: 30 * time.Second, Now: func() time.Time { return now }})
	o := &stormOverride{m: m}
	o.follow("Dallas")
	if _, on := o.Override(now); on {
		t.Fatal("override active without 503s")
	}
	line := func(n string) loghealth.Line {
		return loghealth.Line{Time: now, Node: n, Transit: "auto", Error: "unexpected status: 503 Service Unavailable"}
	}
	for range 3 {
		o.record(line("Miami")) // another node's storm is not ours
	}
	if _, on := o.Override(now); on {
		t.Fatal("override active for another node's 503s")
	}
	for range 3 {
		o.record(line("Dallas"))
	}
	why, on := o.Override(now)
	if !on || !strings.Contains(why, "3 urltest 503s") {
		t.Errorf("after 3 503s: %q %v", why, on)
	}
	if _, on := o.Override(now.Add(time.Minute)); on {
		t.Error("override still active after the active window")
	}
	for range 3 {
		o.record(line("Dallas"))
	}
	o.follow("Los Angeles") // rotated away: Dallas's storm must not veto it
	if _, on := o.Override(now); on {
		t.Error("override active on the node we rotated to")
	}
}

func TestSignalStatesWithDetectorsOff(t *testing.T) {
	s := &signals{}
	names := map[string]string{}
	for _, st := range s.SignalStates() {
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
