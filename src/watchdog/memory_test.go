package watchdog

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// memSettings keeps the last-good file in dir, shared by two instances.
func memSettings(t *testing.T, dir string) Settings {
	s := testSettings(t)
	s.MemoryFile = filepath.Join(dir, MemoryFileName)
	return s
}

func writeMemory(t *testing.T, path string, m memory) {
	t.Helper()
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// A restarted daemon starts on the node that last worked, not on the
// configured first node that was found dead.
func TestRestartStartsOnLastGoodNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		wd := newWorld()
		h := start(t, memSettings(t, dir), wd)
		failDallas(h) // Dallas dies: rotation to Los Angeles, healthy there
		h.requireState(StateHealthy)
		h.stop()

		info, err := os.Stat(filepath.Join(dir, MemoryFileName))
		if err != nil {
			t.Fatalf("no last-good file: %v", err)
		}
		if info.Mode().Perm() != 0o600 {
			t.Errorf("last-good file mode %v, want 0600", info.Mode().Perm())
		}

		// A new instance; the vendor's tunnel is gone (crash cleanup or
		// reboot of the proxy), Dallas is still dead.
		wd2 := newWorld()
		wd2.dead["Dallas"] = true
		h2 := start(t, memSettings(t, dir), wd2)
		h2.advance(10 * time.Second)
		if got := h2.connects(); len(got) == 0 || got[0] != "Los Angeles" {
			t.Errorf("restart connects = %q, want Los Angeles first", got)
		}
		if h2.logged("Starting with Los Angeles via auto: last healthy") != 1 {
			t.Errorf("start choice not logged:\n%s", strings.Join(h2.logs(), "\n"))
		}
		h2.requireState(StateHealthy)
		h2.stop()
	})
}

// kill -9 while connecting to the next node: the file says Dallas was
// healthy but failed since. With the vendor's tunnel on Los Angeles
// healthy, start there; without it, skip Dallas in config order.
func TestRestartAfterKillDuringConnect(t *testing.T) {
	for _, tc := range []struct {
		name    string
		vendor  string // node the vendor's tunnel runs at startup
		logDead string // node log health marks dead
		age     time.Duration
		want    string
		why     string
	}{
		{"vendor tunnel healthy", "Los Angeles", "", time.Minute, "Los Angeles", "the vendor's tunnel was healthy"},
		{"vendor tunnel on the dead node", "Dallas", "", time.Minute, "Los Angeles", "configured order, skipping"},
		{"no tunnel", "", "", time.Minute, "Los Angeles", "configured order, skipping"},
		{"no tunnel, next dead by log health", "", "Los Angeles", time.Minute, "Chicago", "configured order, skipping"},
		{"memory too old", "", "", 2 * time.Hour, "Dallas", "configured order"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				dir := t.TempDir()
				s := memSettings(t, dir)
				now := time.Now()
				writeMemory(t, s.MemoryFile, memory{Node: "Dallas", Transit: "auto", ConfigTransit: "auto",
					At: now.Add(-tc.age - 5*time.Second), Failed: map[string]time.Time{"Dallas": now.Add(-tc.age)}})
				wd := newWorld()
				wd.dead["Dallas"] = true
				wd.connected = tc.vendor
				if tc.logDead != "" {
					wd.logErrors[tc.logDead] = 30
				}
				h := start(t, s, wd)
				h.advance(5 * time.Second)
				if got := h.connects(); len(got) == 0 || got[0] != tc.want {
					t.Errorf("first connect = %q, want %s", got, tc.want)
				}
				if h.logged("Starting with "+tc.want+" via auto: "+tc.why) != 1 {
					t.Errorf("start choice not logged as %q:\n%s", tc.why, strings.Join(h.logs(), "\n"))
				}
				h.stop()
			})
		})
	}
}

// The failures of the open cycle carry over: after a restart the cycle
// continues, so storm protection still comes once every node failed.
func TestRestartCarriesTheCycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		s := memSettings(t, dir)
		now := time.Now()
		failed := map[string]time.Time{}
		for _, n := range s.Candidates[:5] {
			failed[n] = now.Add(-time.Minute)
		}
		writeMemory(t, s.MemoryFile, memory{Failed: failed})
		wd := newWorld()
		for _, n := range s.Candidates {
			wd.dead[n] = true
		}
		h := start(t, s, wd)
		h.advance(3 * time.Minute)
		// Miami: its first failed connect is retried once, then the cycle
		// is over.
		if got := h.connects(); !slices.Equal(got, []string{"Miami", "Miami"}) {
			t.Errorf("connects = %q, want only Miami (the rest failed before the restart)", got)
		}
		h.requireState(StateCooldown)
		h.stop()
	})
}
