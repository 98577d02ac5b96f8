package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The shell scripts we ship run on a router (busybox ash) we do not have
// here. These tests run them under /bin/sh with the OpenWrt functions they
// call (procd_*, config_*, ubus, nft, rc.common) replaced by stubs that log
// what they were asked to do, and check those requests.

func TestShellcheckEveryShippedScript(t *testing.T) {
	if _, err := exec.LookPath("shellcheck"); err != nil {
		t.Skip("shellcheck not installed (CI installs it: apt-get install shellcheck)")
	}
	root := repoRoot(t)
	out, err := exec.Command("sh", filepath.Join(root, "scripts", "shellcheck.sh")).CombinedOutput()
	if err != nil {
		t.Fatalf("shellcheck found problems: %v\n%s", err, out)
	}
	// The discovery must have found at least our own scripts.
	m := regexp.MustCompile(`on (\d+) scripts`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no script count in output:\n%s", out)
	}
	if n, _ := strconv.Atoi(string(m[1])); n < 11 {
		t.Errorf("shellcheck ran on %d scripts, want at least the 11 we ship:\n%s", n, out)
	}
}

// shell runs a script body under /bin/sh with a clean environment plus env,
// in dir, and returns its combined output.
func shell(t *testing.T, dir, body string, env ...string) string {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", body)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + filepath.Join(dir, "bin") + ":/usr/bin:/bin"}, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("script failed: %v\n%s", err, out)
	}
	return string(out)
}

// writeExec writes an executable stub.
func writeExec(t *testing.T, name, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
}

func readLog(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// procdStubs stand in for rc.common/procd.sh/functions.sh: every call is
// echoed, config values come from STUB_* variables.
const procdStubs = `
config_load() { :; }
config_get_bool() { eval "$1=\${STUB_ENABLED:-1}"; }
config_get() { eval "$1=\${STUB_WAN:-$4}"; }
procd_open_instance() { echo "open_instance $*"; }
procd_set_param() { echo "set_param $*"; }
procd_close_instance() { echo "close_instance"; }
procd_add_reload_trigger() { echo "reload_trigger $*"; }
procd_add_reload_interface_trigger() { echo "interface_trigger $*"; }
procd_running() { [ "${STUB_RUNNING:-1}" = 1 ]; }
procd_send_signal() { echo "send_signal $*"; }
start() { echo "start"; }
stop() { echo "stop"; }
sleep() { :; }
`

// initHarness sources an init script after the stubs and runs one of its
// functions; PROG and the stub log live in dir.
func initHarness(t *testing.T, script, function string, env ...string) (out, log string) {
	t.Helper()
	dir := t.TempDir()
	logFile := filepath.Join(dir, "calls.log")
	writeExec(t, filepath.Join(dir, "bin", "surflare-watchdog"), `echo "daemon $*" >>"$STUB_LOG"`+"\n")
	writeExec(t, filepath.Join(dir, "bin", "ubus"), `echo "ubus $*" >>"$STUB_LOG"; exit "${STUB_UBUS_RC:-0}"`+"\n")
	writeExec(t, filepath.Join(dir, "bin", "nft"), `echo "nft $*" >>"$STUB_LOG"
[ "$1" = list ] && exit "${STUB_NFT_LIST_RC:-1}"
exit 0
`)
	writeExec(t, filepath.Join(dir, "bin", "logger"), `echo "logger $*" >>"$STUB_LOG"`+"\n")
	writeExec(t, filepath.Join(dir, "watchdog-init"), `echo "watchdog-init $*" >>"$STUB_LOG"; exit "${STUB_WATCHDOG_ENABLED_RC:-0}"`+"\n")
	body := procdStubs + `
. "$SCRIPT"
PROG="$STUB_DIR/bin/surflare-watchdog"
WATCHDOG_INIT="$STUB_DIR/watchdog-init"
BOOTLOCK_NFT="$STUB_DIR/boot-lock.nft"
` + function + "\n"
	env = append(env, "SCRIPT="+filepath.Join(repoRoot(t), script), "STUB_DIR="+dir, "STUB_LOG="+logFile)
	out = shell(t, dir, body, env...)
	return out, readLog(t, logFile)
}

func TestInitScriptRunsTheDaemonUnderProcd(t *testing.T) {
	const script = "files/etc/init.d/surflare-watchdog"
	out, _ := initHarness(t, script, "start_service")
	for _, want := range []string{
		"open_instance main",
		"/bin/surflare-watchdog run --config /etc/config/surflare",
		"set_param respawn 3600 5 5",
		"set_param stdout 1",
		"set_param stderr 1",
		"close_instance",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("start_service output lacks %q:\n%s", want, out)
		}
	}

	out, _ = initHarness(t, script, "start_service", "STUB_ENABLED=0")
	if strings.Contains(out, "open_instance") || !strings.Contains(out, "disabled") {
		t.Errorf("main.enabled=0 still starts an instance:\n%s", out)
	}

	out, _ = initHarness(t, script, "service_triggers", "STUB_WAN=wan wanb")
	for _, want := range []string{"reload_trigger surflare", "interface_trigger wan\n", "interface_trigger wanb\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("service_triggers output lacks %q:\n%s", want, out)
		}
	}
}

func TestInitScriptReloadKeepsTheDaemon(t *testing.T) {
	const script = "files/etc/init.d/surflare-watchdog"
	for _, c := range []struct {
		name    string
		env     []string
		want    []string // in output or log
		mustNot []string
	}{
		{"ubus answers", nil,
			[]string{"ubus -t 5 call surflare reload"}, []string{"send_signal", "start", "stop", "teardown"}},
		{"ubus down: SIGHUP through procd", []string{"STUB_UBUS_RC=4"},
			[]string{"ubus -t 5 call surflare reload", "send_signal surflare-watchdog main HUP"}, []string{"start", "stop", "teardown"}},
		{"not running: start it", []string{"STUB_RUNNING=0"},
			[]string{"start"}, []string{"ubus", "send_signal", "teardown"}},
		{"disabled: stop and tear down", []string{"STUB_ENABLED=0", "STUB_RUNNING=0"},
			[]string{"start", "daemon teardown"}, []string{"ubus", "send_signal"}},
	} {
		out, log := initHarness(t, script, "reload_service", c.env...)
		all := out + log
		for _, w := range c.want {
			if !strings.Contains(all, w) {
				t.Errorf("%s: lacks %q:\n%s", c.name, w, all)
			}
		}
		for _, w := range c.mustNot {
			if strings.Contains(all, w) {
				t.Errorf("%s: should not %q:\n%s", c.name, w, all)
			}
		}
	}
}

func TestBootLockInit(t *testing.T) {
	const script = "files/etc/init.d/surflare-bootlock"
	withFile := func(t *testing.T, function string, env ...string) (string, string) {
		// initHarness makes a fresh dir; the ruleset file must exist in it,
		// so create it from inside the harness.
		return initHarness(t, script, `: >"$STUB_DIR/boot-lock.nft"; `+function, env...)
	}

	out, log := withFile(t, "start_service")
	if !strings.Contains(log, "nft -f ") || !strings.Contains(out, "open_instance expiry") ||
		!strings.Contains(out, "sleep 120; nft delete table inet surflare_boot_lock") {
		t.Errorf("lock not loaded with a 120 s expiry:\n%s%s", out, log)
	}

	out, log = withFile(t, "start_service", "STUB_NFT_LIST_RC=0")
	if strings.Contains(log, "nft -f") || !strings.Contains(out, "open_instance expiry") {
		t.Errorf("table already loaded by fw4: want only the expiry timer:\n%s%s", out, log)
	}

	out, log = withFile(t, "start_service", "STUB_WATCHDOG_ENABLED_RC=1")
	if strings.Contains(log, "nft") || strings.Contains(out, "open_instance") {
		t.Errorf("watchdog disabled, yet the lock went up:\n%s%s", out, log)
	}

	out, log = withFile(t, "start_service", "STUB_ENABLED=0")
	if strings.Contains(log, "nft") || strings.Contains(out, "open_instance") {
		t.Errorf("main.enabled=0, yet the lock went up:\n%s%s", out, log)
	}

	out, log = initHarness(t, script, "start_service") // no ruleset file
	if strings.Contains(log, "nft -f") || strings.Contains(out, "open_instance") || !strings.Contains(log, "boot lock not loaded") {
		t.Errorf("missing ruleset: want a log line and nothing else:\n%s%s", out, log)
	}

	_, log = initHarness(t, script, "stop_service")
	if !strings.Contains(log, "nft delete table inet surflare_boot_lock") {
		t.Errorf("stop does not remove the lock:\n%s", log)
	}
}

func TestHotplugTellsTheDaemonAboutTheWAN(t *testing.T) {
	root := repoRoot(t)
	src, err := os.ReadFile(filepath.Join(root, "files/etc/hotplug.d/iface/90-surflare"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	logFile := filepath.Join(dir, "calls.log")
	// jshn.sh is libubox's; this stub builds the same JSON for plain strings.
	jshn := filepath.Join(dir, "jshn.sh")
	if err := os.WriteFile(jshn, []byte(`json_init() { _j=""; }
json_add_string() { _j="$_j${_j:+,}\"$1\":\"$2\""; }
json_dump() { printf '{%s}' "$_j"; }
`), 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "90-surflare")
	if err := os.WriteFile(script, []byte(strings.Replace(string(src), "/usr/share/libubox/jshn.sh", jshn, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	writeExec(t, filepath.Join(dir, "bin", "ubus"), `echo "ubus $*" >>"$STUB_LOG"; echo "Command failed: Not found" >&2; exit "${STUB_UBUS_RC:-0}"`+"\n")
	writeExec(t, filepath.Join(dir, "bin", "uci"), `[ -n "$STUB_WAN" ] && echo "$STUB_WAN"; exit 0`+"\n")

	for _, c := range []struct {
		env  []string
		want string // "" = no call
	}{
		{[]string{"ACTION=ifup", "INTERFACE=wan", "DEVICE=pppoe-wan"}, `ubus -t 3 call surflare hotplug {"action":"ifup","interface":"wan","device":"pppoe-wan"}`},
		{[]string{"ACTION=ifdown", "INTERFACE=wan", "DEVICE=eth1"}, `ubus -t 3 call surflare hotplug {"action":"ifdown","interface":"wan","device":"eth1"}`},
		{[]string{"ACTION=ifup", "INTERFACE=lan", "DEVICE=br-lan"}, ""},
		{[]string{"ACTION=ifupdate", "INTERFACE=wan", "DEVICE=eth1"}, ""},
		{[]string{"ACTION=ifup", "INTERFACE=wanb", "DEVICE=eth2", "STUB_WAN=wan wanb"}, `"interface":"wanb"`},
		{[]string{"ACTION=ifup", "INTERFACE=wan", "DEVICE=eth2", "STUB_WAN=wanb"}, ""},
		// The daemon is not running: ubus says "Not found" (4); hotplug stays quiet.
		{[]string{"ACTION=ifup", "INTERFACE=wan", "DEVICE=eth1", "STUB_UBUS_RC=4"}, `"action":"ifup"`},
	} {
		os.Remove(logFile)
		// hotplug-call sources each script in a subshell.
		out := shell(t, dir, `( . "$SCRIPT" )`, append(c.env, "SCRIPT="+script, "STUB_LOG="+logFile)...)
		log := readLog(t, logFile)
		if out != "" {
			t.Errorf("%v: hotplug printed %q, want silence", c.env, out)
		}
		if c.want == "" && log != "" || c.want != "" && !strings.Contains(log, c.want) {
			t.Errorf("%v: ubus calls %q, want %q", c.env, log, c.want)
		}
	}
}

// rcCommonStub records how the maintainer scripts call /etc/rc.common.
const rcCommonStub = `echo "IPKG_INSTROOT=$IPKG_INSTROOT $*" >>"$STUB_LOG"` + "\n"

func TestMaintainerScriptsInAnOfflineRoot(t *testing.T) {
	root := repoRoot(t)
	for _, c := range []struct {
		name string
		env  func(dir string) []string
	}{
		// opkg --offline-root ROOT --force-postinstall sets PKG_ROOT=ROOT/
		// (fixture results/lifecycle.txt), not IPKG_INSTROOT.
		{"opkg offline root", func(dir string) []string { return []string{"PKG_ROOT=" + dir + "/", "PKG_UPGRADE=0"} }},
		// OpenWrt's image builder sets IPKG_INSTROOT.
		{"image build", func(dir string) []string { return []string{"IPKG_INSTROOT=" + dir} }},
	} {
		dir := t.TempDir()
		logFile := filepath.Join(dir, "rc.log")
		writeExec(t, filepath.Join(dir, "etc", "rc.common"), rcCommonStub)
		for _, svc := range []string{"surflare-watchdog", "surflare-bootlock"} {
			writeExec(t, filepath.Join(dir, "etc", "init.d", svc), "exit 99\n")
		}
		env := append(c.env(dir), "STUB_LOG="+logFile)
		for script, verb := range map[string]string{"surflare-watchdog.postinst": "enable", "surflare-watchdog.prerm": "disable"} {
			os.Remove(logFile)
			shell(t, dir, `sh "$SCRIPT" configure`, append(env, "SCRIPT="+filepath.Join(root, "openwrt", "ipk", script))...)
			log := readLog(t, logFile)
			for _, svc := range []string{"surflare-watchdog", "surflare-bootlock"} {
				want := "IPKG_INSTROOT=" + dir + " " + filepath.Join(dir, "etc", "init.d", svc) + " " + verb
				if !strings.Contains(log, want) {
					t.Errorf("%s, %s: no %q in\n%s", c.name, script, want, log)
				}
			}
		}
		// The LuCI scripts have nothing to do offline and must not touch the host.
		out := shell(t, dir, `sh "$SCRIPT"; echo "rc=$?"`, append(env, "SCRIPT="+filepath.Join(root, "openwrt", "ipk", "luci-app-surflare.postinst"))...)
		if strings.TrimSpace(out) != "rc=0" {
			t.Errorf("%s: luci postinst: %q", c.name, out)
		}
	}

	// IPKG_NO_SCRIPT=1 (opkg --nodeps image assembly) skips everything.
	dir := t.TempDir()
	logFile := filepath.Join(dir, "rc.log")
	writeExec(t, filepath.Join(dir, "etc", "rc.common"), rcCommonStub)
	writeExec(t, filepath.Join(dir, "etc", "init.d", "surflare-watchdog"), "exit 99\n")
	shell(t, dir, `sh "$SCRIPT"`, "IPKG_NO_SCRIPT=1", "IPKG_INSTROOT="+dir, "STUB_LOG="+logFile,
		"SCRIPT="+filepath.Join(root, "openwrt", "ipk", "surflare-watchdog.postinst"))
	if log := readLog(t, logFile); log != "" {
		t.Errorf("IPKG_NO_SCRIPT=1 still ran: %s", log)
	}
}

func TestInstallScriptLaptop(t *testing.T) {
	root := repoRoot(t)
	bin := tinyBinary(t, "amd64")
	for _, c := range []struct {
		init    string
		prefix  string
		service string
	}{
		{"systemd", "/usr/local", "/etc/systemd/system/surflare-watchdog.service"},
		{"systemd", "/usr", "/usr/lib/systemd/system/surflare-watchdog.service"},
		{"openrc", "/usr/local", "/etc/init.d/surflare-watchdog"},
		{"runit", "/opt/sw", "/etc/sv/surflare-watchdog/run"},
	} {
		dest := t.TempDir()
		env := []string{"DESTDIR=" + dest, "PREFIX=" + c.prefix, "INIT=" + c.init}
		out := shell(t, root, `sh scripts/install.sh "$BIN"`, append(env, "BIN="+bin)...)
		if !strings.Contains(out, "enable with:") {
			t.Errorf("%s: no enable hint:\n%s", c.init, out)
		}
		if fi, err := os.Stat(filepath.Join(dest, c.prefix, "bin", "surflare-watchdog")); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: binary not installed 0755 under %s: %v", c.init, c.prefix, err)
		}
		conf, err := os.ReadFile(filepath.Join(dest, "etc", "config", "surflare"))
		if err != nil || !strings.Contains(string(conf), "option role 'laptop'") {
			t.Errorf("%s: config not installed in role laptop: %v", c.init, err)
		}
		svc, err := os.ReadFile(filepath.Join(dest, c.service))
		if err != nil {
			t.Errorf("%s: %v", c.init, err)
			continue
		}
		if want := c.prefix + "/bin/surflare-watchdog run --config /etc/config/surflare"; !strings.Contains(string(svc), want) &&
			!strings.Contains(string(svc), c.prefix+`/bin/surflare-watchdog"`) {
			t.Errorf("%s: service file does not run %s:\n%s", c.init, want, svc)
		}

		// A second install keeps the user's config and leaves the new default beside it.
		if err := os.WriteFile(filepath.Join(dest, "etc", "config", "surflare"), []byte("mine\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		shell(t, root, `sh scripts/install.sh "$BIN"`, append(env, "BIN="+bin)...)
		if b, _ := os.ReadFile(filepath.Join(dest, "etc", "config", "surflare")); string(b) != "mine\n" {
			t.Errorf("%s: reinstall overwrote the user's config", c.init)
		}
		if _, err := os.Stat(filepath.Join(dest, "etc", "config", "surflare.new")); err != nil {
			t.Errorf("%s: no surflare.new: %v", c.init, err)
		}
	}
}

// The LuCI ACL is the only thing between a read-only LuCI user and a node
// rotation: reads and writes must be split exactly as the daemon's methods
// are, and hotplug (root's, from netifd) must not be reachable at all.
func TestLuciACLSplitsReadFromWrite(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "luci-app-surflare/root", luciACL))
	if err != nil {
		t.Fatal(err)
	}
	var acl map[string]struct {
		Read, Write struct {
			Ubus map[string][]string `json:"ubus"`
			UCI  []string            `json:"uci"`
		}
	}
	if err := json.Unmarshal(b, &acl); err != nil {
		t.Fatal(err)
	}
	g, ok := acl[luciPackage]
	if !ok {
		t.Fatalf("no %s group: %s", luciPackage, b)
	}
	sorted := func(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }
	if got, want := sorted(g.Read.Ubus["surflare"]), []string{"events", "log", "nodes", "status", "token"}; !slices.Equal(got, want) {
		t.Errorf("read ubus surflare %q, want %q", got, want)
	}
	if got, want := sorted(g.Write.Ubus["surflare"]), []string{"check", "diag", "probe", "reconnect", "reload", "rotate", "set_credentials"}; !slices.Equal(got, want) {
		t.Errorf("write ubus surflare %q, want %q", got, want)
	}
	if !slices.Equal(g.Read.UCI, []string{"surflare"}) || !slices.Equal(g.Write.UCI, []string{"surflare"}) {
		t.Errorf("uci read %q write %q, want surflare for both", g.Read.UCI, g.Write.UCI)
	}
	if strings.Contains(string(b), "hotplug") {
		t.Error("the ACL exposes hotplug to LuCI users")
	}

	// Every menu entry is guarded by this ACL (through its parent) and
	// points at a view under surflare/.
	b, err = os.ReadFile(filepath.Join(repoRoot(t), "luci-app-surflare/root", luciMenu))
	if err != nil {
		t.Fatal(err)
	}
	var menu map[string]struct {
		Action struct {
			Type string `json:"type"`
			Path string `json:"path"`
		} `json:"action"`
		Depends struct {
			ACL []string `json:"acl"`
		} `json:"depends"`
	}
	if err := json.Unmarshal(b, &menu); err != nil {
		t.Fatal(err)
	}
	top, ok := menu["admin/services/surflare"]
	if !ok || !slices.Contains(top.Depends.ACL, luciPackage) {
		t.Errorf("admin/services/surflare missing or not guarded by the ACL: %+v", top)
	}
	for path, e := range menu {
		if path != "admin/services/surflare" && (e.Action.Type != "view" || !strings.HasPrefix(e.Action.Path, "surflare/")) {
			t.Errorf("%s: action %+v, want a surflare/ view", path, e.Action)
		}
	}
}
