package keepalive

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestConfigDefaultsAndBounds(t *testing.T) {
	cfg, err := Config{CgroupPath: "/sys/fs/cgroup/x/"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Idle != 30*time.Second || cfg.Interval != 10*time.Second || cfg.Count != 3 || cfg.CgroupPath != "/sys/fs/cgroup/x" {
		t.Errorf("defaults = %+v, want 30s/10s/3 and a clean path", cfg)
	}
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Idle: 1500 * time.Millisecond}, "keepalive idle 1.5s: want whole seconds"},
		{Config{Idle: -time.Second}, "keepalive idle -1s"},
		{Config{Interval: 40000 * time.Second}, "keepalive interval 11h6m40s"},
		{Config{Count: 128}, "keepalive count 128: want 1 to 127"},
		{Config{Count: -1}, "keepalive count -1"},
	} {
		tc.cfg.CgroupPath = "/sys/fs/cgroup/x"
		if _, err := tc.cfg.withDefaults(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

func TestParseCgroup2Mount(t *testing.T) {
	for _, tc := range []struct{ name, text, want, err string }{
		{"openwrt", "18 23 0:17 / /sys rw,nosuid - sysfs sysfs rw\n" +
			"30 18 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw,nsdelegate\n", "/sys/fs/cgroup", ""},
		{"hybrid", "25 1 0:23 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n" +
			"26 25 0:24 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n" +
			"27 25 0:25 / /sys/fs/cgroup/unified rw shared:9 - cgroup2 cgroup2 rw\n", "/sys/fs/cgroup/unified", ""},
		{"escaped", "30 18 0:26 / /mnt/my\\040cg rw - cgroup2 none rw\n", "/mnt/my cg", ""},
		{"none", "25 1 0:23 / /sys/fs/cgroup rw - tmpfs tmpfs rw\ngarbage\n", "", "cgroup2 is not mounted"},
	} {
		got, err := parseCgroup2Mount(strings.NewReader(tc.text))
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: got %q, %v; want %q, %q", tc.name, got, err, tc.want, tc.err)
		}
	}
}

func TestStatusJSONAndString(t *testing.T) {
	st := Status{Active: true, Idle: 30 * time.Second, Interval: 10 * time.Second, Count: 3,
		Cgroup: "/sys/fs/cgroup/surflare-proxy", Capped: true, Sockets: 12}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"active":true,"idle_s":30,"interval_s":10,"count":3,"cgroup":"/sys/fs/cgroup/surflare-proxy","capped":true,"sockets":12,"failures":0}`
	if string(b) != want {
		t.Errorf("JSON\n got %s\nwant %s", b, want)
	}
	if s := st.String(); s != "active: idle=30s interval=10s count=3 cgroup=/sys/fs/cgroup/surflare-proxy sockets=12" {
		t.Errorf("String = %q", s)
	}
	off := Status{Reason: "/tmp is not on a cgroup2 mount"}
	if s := off.String(); s != "unavailable: /tmp is not on a cgroup2 mount" {
		t.Errorf("String = %q", s)
	}
	var nilClamp *Clamp
	if st := nilClamp.Status(); st.Active || st.Reason == "" || nilClamp.AddPID(1) != nil || nilClamp.Close() != nil {
		t.Errorf("nil Clamp: status %+v, want inactive with a reason and no-op methods", st)
	}
}

func TestInstanceCgroupIsPerInstanceAndStable(t *testing.T) {
	a, errA := InstanceCgroup("/tmp/surflare-lab-swl1/run")
	b, errB := InstanceCgroup("/tmp/surflare-lab-swl2/run")
	if errA != nil || errB != nil {
		t.Skipf("no cgroup2 mount visible: %v", errA)
	}
	again, _ := InstanceCgroup("/tmp/surflare-lab-swl1/run")
	if a == b || a != again {
		t.Errorf("instance groups: %q %q (again %q): want distinct and stable", a, b, again)
	}
	if filepath.Dir(a) != filepath.Dir(b) || !strings.HasPrefix(filepath.Base(a), DefaultCgroupName+"-") || len(filepath.Base(a)) != len(DefaultCgroupName)+9 {
		t.Errorf("instance group %q: want %s-XXXXXXXX under the cgroup2 mount", a, DefaultCgroupName)
	}
}
