package storm503

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newMonitor(t *testing.T) (*Monitor, *fakeClock, *[]string, string) {
	clk := &fakeClock{t: time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)}
	var triggers []string
	file := filepath.Join(t.TempDir(), "surflare_503_state")
	m := New(Options{StateFile: file, Now: clk.Now, Trigger: func(r string) { triggers = append(triggers, r) }})
	return m, clk, &triggers, file
}

func TestStormNeedsCountWithinWindow(t *testing.T) {
	m, clk, triggers, file := newMonitor(t)
	// Nine 503s 20 s apart: no storm.
	for range 9 {
		m.Record(clk.Now())
		clk.advance(20 * time.Second)
	}
	if m.OverrideActive(clk.Now()) || len(*triggers) != 0 {
		t.Fatalf("9 503s: active %v triggers %v", m.OverrideActive(clk.Now()), *triggers)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("state file written without a storm (%v)", err)
	}
	// The tenth, 180 s after the first: a storm, one trigger, evidence.
	m.Record(clk.Now())
	if !m.OverrideActive(clk.Now()) {
		t.Fatal("10 503s within 300 s is not a storm")
	}
	if len(*triggers) != 1 || (*triggers)[0] != "503 storm: 10 urltest 503" {
		t.Fatalf("triggers %q", *triggers)
	}
	var st State
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	if st.Count != 10 || st.WindowS != 300 || !st.Since.Equal(clk.Now()) || !st.ActiveUntil.Equal(clk.Now().Add(60*time.Second)) {
		t.Errorf("state file %s", data)
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o600 {
		t.Errorf("state file mode %v", fi.Mode().Perm())
	}

	// More 503s during the storm do not trigger again.
	clk.advance(10 * time.Second)
	m.Record(clk.Now())
	if len(*triggers) != 1 {
		t.Errorf("a second trigger inside one storm: %q", *triggers)
	}
	// 60 s after the last 503 the override ends.
	clk.advance(60 * time.Second)
	if !m.OverrideActive(clk.Now()) {
		t.Error("override ended before the active window")
	}
	clk.advance(time.Second)
	if m.OverrideActive(clk.Now()) {
		t.Error("override still on 61 s after the last 503")
	}
}

func TestStormEndsWhenCountLeavesWindowAndRetriggers(t *testing.T) {
	m, clk, triggers, _ := newMonitor(t)
	burst := func() {
		for range 10 {
			m.Record(clk.Now())
			clk.advance(time.Second)
		}
	}
	burst()
	if len(*triggers) != 1 {
		t.Fatalf("first burst: %d triggers", len(*triggers))
	}
	// One 503 every 50 s keeps the last one recent, but the burst leaves
	// the 300 s window: the storm ends on the count.
	var endedAt time.Duration
	for i := 0; i < 10; i++ {
		clk.advance(50 * time.Second)
		m.Record(clk.Now())
		if !m.OverrideActive(clk.Now()) && endedAt == 0 {
			endedAt = time.Duration(i+1) * 50 * time.Second
		}
	}
	if endedAt == 0 {
		t.Fatal("the storm never ended although the burst left the window")
	}
	clk.advance(5 * time.Minute)
	burst()
	if len(*triggers) != 2 {
		t.Errorf("a new storm after the first ended: %d triggers, want 2", len(*triggers))
	}
}

func TestOldLinesFromTheTailDoNotStorm(t *testing.T) {
	m, clk, triggers, _ := newMonitor(t)
	for i := range 50 {
		m.Record(clk.Now().Add(-time.Hour + time.Duration(i)*time.Second))
	}
	if m.OverrideActive(clk.Now()) || len(*triggers) != 0 || m.State(clk.Now()).Count != 0 {
		t.Errorf("50 hour-old 503s: active %v, triggers %v, count %d", m.OverrideActive(clk.Now()), *triggers, m.State(clk.Now()).Count)
	}
	// Future timestamps count as now (a skewed clock), not forever.
	for range 10 {
		m.Record(clk.Now().Add(time.Hour))
	}
	if !m.OverrideActive(clk.Now()) {
		t.Fatal("10 future-stamped 503s: no storm")
	}
	clk.advance(2 * time.Minute)
	if m.OverrideActive(clk.Now()) {
		t.Error("future-stamped 503s kept the storm alive past the active window")
	}
}
