package config

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"surflare-watchdog/src/testenv"
	"testing"
	"time"
)

func repoRoot(t *testing.T) string { return testenv.RepoRoot(t) }

func mustParse(t *testing.T, text string) (*Config, []Warning) {
	t.Helper()
	c, w, err := Parse("/etc/config/surflare", []byte(text))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return c, w
}

func TestDefaultsAreTheDesignNumbers(t *testing.T) {
	c := Default()
	checks := []struct {
		name      string
		got, want any
	}{
		{"mode", c.Main.Mode, ModeRule},
		{"role", c.Main.Role, RoleAuto},
		{"node", c.Main.Node, "Dallas"},
		{"candidates", c.Main.Candidates, []string{"Dallas", "Los Angeles", "Chicago", "New York", "Atlanta", "Miami"}},
		{"transit", c.Main.Transit, "auto"},
		{"check_interval", c.Main.CheckInterval, 30 * time.Second},
		{"fail_threshold", c.Main.FailThreshold, 4},
		{"storm_cooldown", c.Main.StormCooldown, 600 * time.Second},
		{"heartbeat", c.Main.HeartbeatInterval, 600 * time.Second},
		{"fail_open", c.Main.FailOpen, false},
		{"strict_direct", c.Main.StrictDirect, true},
		{"ipv6", c.Main.IPv6, IPv6Block},
		{"503 count", c.Storm503.Count, 10},
		{"503 window", c.Storm503.Window, 300 * time.Second},
		{"503 active", c.Storm503.ActiveWindow, 60 * time.Second},
		{"login_retries", c.Auth.LoginRetries, 5},
		{"backoff", [2]time.Duration{c.Auth.LoginBackoffMin, c.Auth.LoginBackoffMax}, [2]time.Duration{3 * time.Second, 60 * time.Second}},
		{"fail_open_after", c.Auth.FailOpenAfter, 5},
		{"subscription_cooldown", c.Auth.SubscriptionCooldown, time.Hour},
		{"login_mode", c.Auth.LoginMode, LoginPTY},
		{"detector threshold", c.Detector.Threshold, 16},
		{"detector cooldown", c.Detector.Cooldown, 300 * time.Second},
		{"loghealth window", c.LogHealth.Window, 10 * time.Minute},
		{"loghealth threshold", c.LogHealth.Threshold, 10},
		{"loghealth tail", c.LogHealth.Tail, int64(2 * 1024 * 1024)},
		{"loghealth stale", c.LogHealth.Stale, 20 * time.Minute},
		{"loopguard", [2]int{c.LoopGuard.MinActive, c.LoopGuard.Ratio}, [2]int{1000, 80}},
		{"surflare_bin", c.Paths.SurflareBin, "/usr/bin/surflare"},
		{"proxy_log", c.Paths.ProxyLog, "/var/log/surflare/surflare-proxy.log"},
		{"run_dir", c.Paths.RunDir, "/run"},
		{"ubus_socket", c.Paths.UbusSocket, "/var/run/ubus/ubus.sock"},
		{"chnroute_refresh", c.Paths.ChnrouteRefresh, 7 * 24 * time.Hour},
		{"keepalive", [3]any{c.Keepalive.Idle, c.Keepalive.Interval, c.Keepalive.Count}, [3]any{30 * time.Second, 10 * time.Second, 3}},
		{"countries", c.Main.ExpectedCountry + "/" + c.Main.DomesticCountry, "US/CN"},
		{"proxy_port", c.Vendor.ProxyPort, uint16(10800)},
		{"local_resolver_port", c.DNS.LocalResolverPort, uint16(53)},
	}
	for _, k := range checks {
		if !reflect.DeepEqual(k.got, k.want) {
			t.Errorf("default %s = %v, want %v", k.name, k.got, k.want)
		}
	}
	kinds := map[ProbeKind]int{}
	for _, p := range c.Probes {
		kinds[p.Kind]++
	}
	if want := (map[ProbeKind]int{ProbeSearch: 1, ProbeCDNTrace: 2, ProbeIPEcho: 3, ProbeProxyPath: 1}); !reflect.DeepEqual(kinds, want) {
		t.Errorf("default probes by kind = %v, want %v (the seed's 6 parallel probes + probe 7)", kinds, want)
	}
}

func TestEmptyFileMeansDefaults(t *testing.T) {
	c, w := mustParse(t, "")
	if len(w) != 0 {
		t.Errorf("warnings on an empty file: %v", w)
	}
	if !Equal(c, Default()) {
		t.Errorf("empty file differs from Default():\n%s", Format(c))
	}
}

// The shipped file must load cleanly, spell out exactly the defaults and
// mention every option the schema knows, so users can find each one there.
func TestShippedDefaultFile(t *testing.T) {
	path := filepath.Join(repoRoot(t), "files", "etc", "config", "surflare")
	c, w, err := Load(path)
	if err != nil {
		t.Fatalf("the default file has errors:\n%v", err)
	}
	if len(w) != 0 {
		t.Errorf("the default file has warnings: %v", w)
	}
	if !Equal(c, Default()) {
		t.Errorf("the default file differs from Default().\nfile:\n%s\nDefault():\n%s", Format(c), Format(Default()))
	}
	text, _ := os.ReadFile(path)
	lines := strings.Split(string(text), "\n")
	d := Default()
	mentioned := func(name string, repeated bool) bool {
		re := regexp.MustCompile(`^\s*#?\s*(option|list) ` + name + ` `)
		for i, l := range lines {
			if re.MatchString(l) {
				// A comment says what it is: on the line above, or above the
				// run of list items / the commented example / the first of
				// the repeated probe sections.
				for j := i - 1; j >= 0; j-- {
					prev := strings.TrimSpace(lines[j])
					if strings.HasPrefix(prev, "#") && !regexp.MustCompile(`^#\s*(option|list) `).MatchString(prev) {
						return true
					}
					sameRun := strings.HasPrefix(prev, "list "+name) || strings.HasPrefix(prev, "#")
					sameSection := repeated && (strings.HasPrefix(prev, "option ") || strings.HasPrefix(prev, "config "))
					if !sameRun && !sameSection {
						return false
					}
				}
			}
		}
		return false
	}
	for _, s := range d.singletons() {
		for _, o := range s.options {
			if !mentioned(o.name, false) {
				t.Errorf("the default file does not document %s.%s", conventionalName(s.typ), o.name)
			}
		}
	}
	for _, o := range append((&Probe{}).options(), (&Bypass{}).options()...) {
		if !mentioned(o.name, true) {
			t.Errorf("the default file does not document the %s option", o.name)
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, _, err := Load(filepath.Join(t.TempDir(), "nope"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load of a missing file: %v, want fs.ErrNotExist", err)
	}
}

// The default log pattern must pick node and transit out of the lines the
// contract shows.
func TestDefaultLogPatternMatchesContract(t *testing.T) {
	path := filepath.Join(repoRoot(t), "..", "shared", "SURFLARE-CONTRACT.md")
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("contract not available (%v)", err)
	}
	want := map[string]string{"Dallas": "Tokyo", "Miami": "auto"}
	re := Default().LogHealth.Pattern
	n := 0
	for _, line := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(line, "+0000 ") || !strings.Contains(line, "outbound/urltest[") {
			continue
		}
		m := re.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("pattern does not match contract line %q", line)
			continue
		}
		node, transit := m[re.SubexpIndex("node")], m[re.SubexpIndex("transit")]
		if want[node] != transit {
			t.Errorf("line %q: node=%q transit=%q", line, node, transit)
		}
		n++
	}
	if n != len(want) {
		t.Errorf("matched %d contract lines, want %d", n, len(want))
	}
	// Node tags contain spaces; non-error lines and garbage don't match.
	m := re.FindStringSubmatch(`+0000 2026-11-29 14:03:12 ERROR [1 0.4s] outbound/urltest[Los Angeles via Singapore]: unexpected status: 503 Service Unavailable`)
	if m == nil || m[re.SubexpIndex("node")] != "Los Angeles" || m[re.SubexpIndex("transit")] != "Singapore" ||
		m[re.SubexpIndex("error")] != "unexpected status: 503 Service Unavailable" {
		t.Errorf("Los Angeles line: %q", m)
	}
	for _, l := range []string{
		`+0000 2026-11-29 14:03:12 INFO [1 0.4s] outbound/urltest[Dallas via auto]: fine`,
		`+0000 2026-11-29 14:03:12 ERROR [1 0.4s] outbound/urltest[Dall`,
		"\x00\x01 garbage",
	} {
		if re.MatchString(l) {
			t.Errorf("pattern matches %q", l)
		}
	}
}

func TestRoleResolve(t *testing.T) {
	dir := t.TempDir()
	release := filepath.Join(dir, "openwrt_release")
	if got := RoleAuto.Resolve(release); got != RoleLaptop {
		t.Errorf("auto without release file = %s, want laptop", got)
	}
	os.WriteFile(release, []byte("DISTRIB_ID='OpenWrt'\n"), 0o644)
	if got := RoleAuto.Resolve(release); got != RoleRouter {
		t.Errorf("auto with release file = %s, want router", got)
	}
	if got := RoleLaptop.Resolve(release); got != RoleLaptop {
		t.Errorf("explicit laptop = %s", got)
	}
}

func TestJSONUsesUCINames(t *testing.T) {
	b, err := json.Marshal(Default())
	if err != nil {
		t.Fatal(err)
	}
	if byValue, _ := json.Marshal(*Default()); string(byValue) != string(b) {
		t.Errorf("a Config by value marshals differently:\n%s\n%s", byValue, b)
	}
	var v struct {
		Main struct {
			CheckInterval string   `json:"check_interval"`
			Candidate     []string `json:"candidate"`
			Enabled       bool     `json:"enabled"`
		} `json:"main"`
		LoopGuard struct {
			Ratio int `json:"ratio"`
		} `json:"loopguard"`
		Probe []map[string]any `json:"probe"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("invalid JSON: %v\n%s", err, b)
	}
	if v.Main.CheckInterval != "30s" || len(v.Main.Candidate) != 6 || !v.Main.Enabled || v.LoopGuard.Ratio != 80 {
		t.Errorf("JSON main/loopguard = %+v %+v", v.Main, v.LoopGuard)
	}
	if len(v.Probe) != 7 || v.Probe[0][".name"] != "search" || v.Probe[0]["kind"] != "search" {
		t.Errorf("JSON probes = %v", v.Probe)
	}
}
