package watchdog

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestStartupAndHealthySteadyState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		s := testSettings(t)
		h := start(t, s, wd)
		h.requireState(StateHealthy)
		calls := wd.get().calls
		wantPrefix := []string{
			"fw.Set kill-switch", "vendor.Status", "cleanup.stale-proxy", "cleanup.fwmark", "fw.Set kill-switch", // startup (a look at the vendor's tunnel before cleanup)
			"fw.FlushVendor", "fw.Set kill-switch", "vendor.Status", "vendor.Connect Dallas", "fw.Set lan-proxy", // connect
		}
		if !slices.Equal(calls[:len(wantPrefix)], wantPrefix) {
			t.Fatalf("calls = %q\nwant prefix %q", calls, wantPrefix)
		}
		if got := h.w.ISPAddr().String(); got != "198.18.2.2" {
			t.Errorf("ISP address = %s", got)
		}

		h.advance(10*time.Minute + 20*time.Second)
		st := h.w.Status()
		if st.State != StateHealthy || st.Node != "Dallas" || st.Exit.Country != "US" {
			t.Errorf("status = %s %s %+v", st.State, st.Node, st.Exit)
		}
		// One check at connect (phase 2) and then one every 30 s.
		if got := wd.get().checks; got < 20 || got > 22 {
			t.Errorf("%d checks in 10 min, want ~21 (every 30 s)", got)
		}
		if got := h.connects(); len(got) != 1 {
			t.Errorf("connects = %q, want just the first", got)
		}
		if n := h.logged("VPN healthy: exit=US"); n != 2 {
			t.Errorf("heartbeat logged %d times in 10 min, want 2 (at connect, after 600 s)", n)
		}
		h.stop()
	})
}

func TestStatusJSONAndStateFile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		s := testSettings(t)
		h := start(t, s, wd)
		h.advance(31 * time.Second)
		data, err := json.Marshal(h.w.Status())
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		json.Unmarshal(data, &m)
		for _, k := range []string{"state", "node", "transit", "mode", "exit", "counters", "last_check",
			"signals", "candidates", "started_at", "uptime_s", "last_transitions"} {
			if _, ok := m[k]; !ok {
				t.Errorf("status JSON lacks %q: %s", k, data)
			}
		}
		if m["state"] != "healthy" || m["uptime_s"].(float64) != 32 {
			t.Errorf("state %v uptime %v", m["state"], m["uptime_s"])
		}
		lc := m["last_check"].(map[string]any)
		if lc["outcome"] != "OK" {
			t.Errorf("last_check = %v", lc)
		}
		c := m["counters"].(map[string]any)
		if c["fail_threshold"].(float64) != 4 || c["checks"].(float64) != 2 {
			t.Errorf("counters = %v", c)
		}

		fi, err := os.Stat(s.StateFile)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("state file mode %v, want 0600", fi.Mode().Perm())
		}
		file, _ := os.ReadFile(s.StateFile)
		if !strings.Contains(string(file), `"state": "healthy"`) {
			t.Errorf("state file:\n%s", file)
		}
		h.stop()
		file, _ = os.ReadFile(s.StateFile)
		if !strings.Contains(string(file), `"state": "stopped"`) {
			t.Errorf("state file after stop does not say stopped:\n%s", file)
		}
	})
}

func TestThresholdRotatesAndCutsOldConnections(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wd := newWorld()
		h := start(t, testSettings(t), wd)
		h.advance(time.Minute)
		wd.set(func(w *world) { w.dead["Dallas"] = true })
		// Next check at ~+30 s fails (1/4), then every 10 s: 2/4, 3/4, 4/4.
		h.advance(40 * time.Second)
		h.requireState(StateDegraded)
		if got := h.connects(); len(got) != 1 {
			t.Fatalf("rotated before the threshold: %q", got)
		}
		h.advance(30 * time.Second)
		h.requireState(StateHealthy)
		if got := h.connects(); !slices.Equal(got, []string{"Dallas", "Los Angeles"}) {
			t.Errorf("connects = %q", got)
		}
		if h.logged("Node rotation: Dallas -> Los Angeles (2/6)") != 1 {
			t.Errorf("rotation not logged:\n%s", strings.Join(h.logs(), "\n"))
		}
		if cuts := wd.get().cuts; !slices.Equal(cuts, []string{"Dallas"}) {
			t.Errorf("connections cut for %q, want those pinned to Dallas", cuts)
		}
		st := h.w.Status()
		if st.Node != "Los Angeles" || st.Counters.Rotations != 1 || st.Counters.ConsecutiveFailures != 0 {
			t.Errorf("status %s rotations %d fails %d", st.Node, st.Counters.Rotations, st.Counters.ConsecutiveFailures)
		}
		h.stop()
	})
}
