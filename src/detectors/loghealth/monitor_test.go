package loghealth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"
)

// stamped is an urltest error stamped at t, in the proxy's format.
func stamped(t time.Time, node, transit, msg string) string {
	return fmt.Sprintf("%s ERROR [1 2.1s] outbound/urltest[%s via %s]: %s\n", t.UTC().Format(timeLayout), node, transit, msg)
}

func readReport(t *testing.T, path string) Report {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r Report
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, data)
	}
	return r
}

func TestTrackerWindow(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)
	tr := NewTracker(10*time.Minute, 2)
	l := Line{Node: "Dallas", Transit: "Tokyo", Error: "timeout"}
	tr.Add(l, t0)
	tr.Add(l, t0.Add(4*time.Minute))
	tr.Add(Line{Node: "Dallas", Transit: "Tokyo", Error: "503"}, t0.Add(8*time.Minute))
	tr.Add(l, t0.Add(2*time.Minute)) // out of order (a rotated file's tail)

	r := tr.Report(t0.Add(9 * time.Minute))
	p := r.Nodes["Dallas via Tokyo"]
	if p.ErrorCount != 4 || p.UrltestHealthy || p.LastError != "503" {
		t.Errorf("at +9m: %+v, want 4 errors, unhealthy, last error the newest (503)", p)
	}
	// At +13m the errors at +0 and +2 have left the window.
	if n, _ := tr.Count("Dallas", "Tokyo", t0.Add(13*time.Minute)); n != 2 {
		t.Errorf("at +13m count %d, want 2", n)
	}
	r = tr.Report(t0.Add(13 * time.Minute))
	if p := r.Nodes["Dallas via Tokyo"]; p.ErrorCount != 2 || !p.UrltestHealthy {
		t.Errorf("at +13m: %+v, want 2 errors and healthy (threshold 2)", p)
	}
	if r := tr.Report(t0.Add(19 * time.Minute)); len(r.Nodes) != 0 {
		t.Errorf("at +19m the window is empty, report still lists %v", r.Nodes)
	}
}

func TestMonitorWritesFileDebounced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		logPath, out := filepath.Join(dir, "proxy.log"), filepath.Join(dir, "surflare_node_health.json")
		start := time.Now()
		// An old error, outside the window, and garbage: neither counts.
		appendFile(t, logPath, stamped(start.Add(-30*time.Minute), "Dallas", "Tokyo", "old")+"\x00\x01binary\n")
		var seen []Line
		m, err := NewMonitor(Options{LogPath: logPath, OutPath: out, Threshold: 2, OnLine: func(l Line) { seen = append(seen, l) }})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { m.Run(ctx); close(done) }()
		synctest.Wait()

		r := readReport(t, out)
		if len(r.Nodes) != 0 || r.WindowMinutes != 10 || r.Threshold != 2 || r.Stats.Garbage != 1 {
			t.Fatalf("initial report %+v (stats %+v), want empty nodes, window 10, one garbage line", r, r.Stats)
		}
		if st, _ := os.Stat(out); st.Mode().Perm() != 0o600 {
			t.Errorf("mode %v, want 0600", st.Mode().Perm())
		}

		for range 3 {
			appendFile(t, logPath, stamped(time.Now(), "Los Angeles", "auto", "unexpected status: 503 Service Unavailable"))
		}
		time.Sleep(600 * time.Millisecond) // the 500 ms poll has read them
		synctest.Wait()
		if r := readReport(t, out); len(r.Nodes) != 0 {
			t.Fatalf("file rewritten %v after the last write; want at most one write per second", time.Since(start))
		}
		if dead, n := m.Dead("Los Angeles", "auto"); !dead || n != 3 {
			t.Errorf("live Dead = %v, %d; want true, 3", dead, n)
		}
		time.Sleep(500 * time.Millisecond) // the 1 s poll writes
		synctest.Wait()
		r = readReport(t, out)
		p, ok := r.Nodes["Los Angeles via auto"]
		if !ok || p.ErrorCount != 3 || p.UrltestHealthy || p.Node != "Los Angeles" || p.Transit != "auto" {
			t.Fatalf("after 1 s: %+v", r.Nodes)
		}
		if len(seen) != 4 || !seen[3].Is503() {
			t.Errorf("OnLine saw %d lines, want 4 (the old one too: the window is the consumer's business)", len(seen))
		}

		// Ten minutes later with no new line the refresh drops the pair.
		time.Sleep(11 * time.Minute)
		synctest.Wait()
		if r := readReport(t, out); len(r.Nodes) != 0 {
			t.Errorf("after the window: %v, want no pair", r.Nodes)
		}
		if n, _, ok := m.Errors("Los Angeles", "auto"); ok || n != 0 {
			t.Errorf("live Errors after the window: %d %v", n, ok)
		}
		cancel()
		<-done
	})
}

func TestLoadNodeHealth(t *testing.T) {
	now := time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)
	path := filepath.Join(t.TempDir(), "h.json")
	tr := NewTracker(10*time.Minute, 10)
	for range 11 {
		tr.Add(Line{Node: "Dallas", Transit: "auto", Error: "EOF"}, now.Add(-time.Minute))
	}
	tr.Add(Line{Node: "Miami", Transit: "auto", Error: "EOF"}, now.Add(-time.Minute))
	if err := WriteReport(path, tr.Report(now)); err != nil {
		t.Fatal(err)
	}

	s, err := LoadNodeHealth(path, now.Add(5*time.Minute), 20*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if dead, n := s.Dead("Dallas", "auto"); !dead || n != 11 {
		t.Errorf("Dallas: dead %v n %d, want dead with 11", dead, n)
	}
	if dead, _ := s.Dead("Miami", "auto"); dead {
		t.Error("Miami with 1 error is dead")
	}
	if n, at, ok := s.Errors("Dallas", "auto"); !ok || n != 11 || !at.Equal(now) {
		t.Errorf("Errors = %d %v %v", n, at, ok)
	}

	s, err = LoadNodeHealth(path, now.Add(21*time.Minute), 20*time.Minute)
	if err != nil || !s.Stale {
		t.Fatalf("21 min old: stale %v err %v", s.Stale, err)
	}
	if dead, _ := s.Dead("Dallas", "auto"); dead {
		t.Error("stale data marks Dallas dead; stale must mean all healthy")
	}

	for name, content := range map[string]string{"garbled": "{not json", "empty": "{}"} {
		p := filepath.Join(t.TempDir(), name)
		os.WriteFile(p, []byte(content), 0o600)
		s, err := LoadNodeHealth(p, now, 20*time.Minute)
		if err == nil {
			t.Errorf("%s file: no error", name)
		}
		if dead, _ := s.Dead("Dallas", "auto"); dead {
			t.Errorf("%s file: a node is dead", name)
		}
	}
	if _, err := LoadNodeHealth(filepath.Join(t.TempDir(), "none"), now, time.Minute); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}
