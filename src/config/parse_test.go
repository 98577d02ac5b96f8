package config

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

// everyOption sets every option of the schema to a value that differs from
// its default (lab addresses only).
const everyOption = `
config surflare 'main'
	option enabled '0'
	option mode 'global'
	option role 'laptop'
	option node 'Chicago'
	list candidate 'Chicago'
	list candidate 'Los Angeles'
	option transit 'Tokyo'
	option check_interval '45'
	option degraded_interval '5'
	option fail_threshold '3'
	option heartbeat_interval '0'
	option login_refresh '0'
	option storm_cooldown '15m'
	option reconnect_window '1h'
	option reconnect_limit '0'
	option cascade_after '3'
	option connect_local_timeout '15'
	option connect_dataplane_timeout '45'
	option domestic_confirm '1500ms'
	option probe_timeout '2'
	option fail_open 'yes'
	option strict_direct '0'
	option strict_direct_rule '1'
	option route_layer '0'
	option idle_probe_interval '30'
	option ipv6 'proxy'
	option expected_country 'JP'
	option domestic_country 'RU'
	option username 'user@example.org'
	option lan_interface 'br-home'
	option wan_device 'pppoe-wan'
	list transit_candidate 'Osaka'
	list wan_interface 'wan_4g'
	list lan_subnet '198.18.1.0/24'
	list lan_subnet 'fd00:1::/64'
	list private '198.18.1.0/24'
	list endpoint '198.18.10.1'
	list endpoint '198.18.40.0/24'

config storm503 'storm503'
	option enabled '0'
	option count '20'
	option window '120'
	option active_window '30'
	option probe_interval '5'
	option probe_url 'http://198.18.30.21/generate_204'

config auth 'auth'
	option login_retries '3'
	option login_backoff_min '1'
	option login_backoff_max '20'
	option fail_open_after '2'
	option subscription_cooldown '0'
	option login_mode 'argv'
	option login_timeout '12'
	list auth_needed 'please log in'
	list subscription_inactive 'no plan'
	list login_fatal 'banned'

config detector 'detector'
	option enabled 'off'
	option interval '1'
	option threshold '8'
	option cooldown '60'

config loghealth 'loghealth'
	option enabled 'false'
	option window '5'
	option threshold '3'
	option tail '512K'
	option stale '1h'
	option pattern 'urltest\[(?P<node>[^]]+) over (?P<transit>[^]]+)\]'

config fastsignal 'fastsignal'
	option enabled 'no'
	option proxy_exit '0'
	option node_log 'off'
	option counters 'disabled'
	option conn_fail '0'
	list conn_fail_pattern 'ERROR conn (?P<outbound>\w+): (?P<error>.*)'

config probe 'echo'
	option kind 'ip-echo'
	option url 'http://198.18.30.1/'
	option listed '1'

config probe
	option kind 'proxy-path'
	option url 'http://198.18.30.21/generate_204'

config bypass 'tv'
	option name 'living room TV'
	option mac '02:00:00:00:00:0A'
	list ip '198.18.1.50'

config bypass
	option mac '02:00:00:00:00:0b'

config loopguard 'loopguard'
	option min_active '-1'
	option ratio '50'

config paths 'paths'
	option surflare_bin '/opt/lab/bin/surflare'
	option proxy_log '/opt/lab/log/surflare-proxy.log'
	option run_dir '/opt/lab/run'
	option ubus_socket '/opt/lab/ubus.sock'
	option chnroute_v4 '/opt/lab/chnroute.txt'
	option chnroute_v6 '/opt/lab/chnroute6.txt'
	option chnroute_url 'http://198.18.40.1/delegated'
	option chnroute_refresh '1d'

config web 'web'
	option enabled '0'
	option listen '198.18.1.1'
	option port '8080'
	option token_file '/opt/lab/token'

config dns 'dns'
	list foreign_resolver '198.18.50.1'
	list doh_endpoint '198.18.50.2'
	list domestic_upstream '198.19.0.53'
	list blocked_doh ''
	option local_resolver_port '5353'

config keepalive 'keepalive'
	option enabled '0'
	option idle '60'
	option interval '5'
	option count '9'

config vendor 'vendor'
	option status_timeout '4'
	option connect_timeout '40'
	option disconnect_timeout '6'
	option nodes_timeout '7'
	option proxy_comm 'fake-proxy'
	option proxy_port '10900'
`

func everyOptionWant() *Config {
	c := Default()
	c.Main = Main{
		Enabled: false, Mode: ModeGlobal, Role: RoleLaptop, Node: "Chicago",
		Candidates: []string{"Chicago", "Los Angeles"}, Transit: "Tokyo",
		CheckInterval: 45 * time.Second, DegradedInterval: 5 * time.Second, FailThreshold: 3,
		HeartbeatInterval: 0, StormCooldown: 15 * time.Minute, ReconnectWindow: time.Hour,
		ReconnectLimit: 0, CascadeAfter: 3, ConnectLocalTimeout: 15 * time.Second,
		ConnectDataplaneTimeout: 45 * time.Second, DomesticConfirm: 1500 * time.Millisecond,
		ProbeTimeout: 2 * time.Second, FailOpen: true, StrictDirect: false, StrictDirectRule: true, RouteLayer: false, IPv6: IPv6Proxy,
		IdleProbeInterval: 30 * time.Second,
		ExpectedCountry:   "JP", DomesticCountry: "RU", Username: "user@example.org",
		LANInterface: "br-home", WANDevice: "pppoe-wan", WANInterfaces: []string{"wan_4g"}, TransitCandidates: []string{"Osaka"},
		LANSubnets: []netip.Prefix{netip.MustParsePrefix("198.18.1.0/24"), netip.MustParsePrefix("fd00:1::/64")},
		Private:    []netip.Prefix{netip.MustParsePrefix("198.18.1.0/24")},
		Endpoints:  []netip.Prefix{netip.MustParsePrefix("198.18.10.1/32"), netip.MustParsePrefix("198.18.40.0/24")},
	}
	c.Storm503 = Storm503{Enabled: false, Count: 20, Window: 120 * time.Second, ActiveWindow: 30 * time.Second,
		ProbeInterval: 5 * time.Second, ProbeURL: "http://198.18.30.21/generate_204"}
	c.Auth = Auth{LoginRetries: 3, LoginBackoffMin: time.Second, LoginBackoffMax: 20 * time.Second,
		FailOpenAfter: 2, SubscriptionCooldown: 0, LoginMode: LoginArgv, LoginTimeout: 12 * time.Second,
		AuthNeeded: []string{"please log in"}, SubscriptionInactive: []string{"no plan"}, LoginFatal: []string{"banned"}}
	c.Detector = Detector{Enabled: false, Interval: time.Second, Threshold: 8, Cooldown: time.Minute}
	c.LogHealth = LogHealth{Enabled: false, Window: 5 * time.Minute, Threshold: 3, Tail: 512 << 10, Stale: time.Hour,
		Pattern: regexp.MustCompile(`urltest\[(?P<node>[^]]+) over (?P<transit>[^]]+)\]`)}
	c.FastSignal = FastSignal{ConnFailPatterns: []string{`ERROR conn (?P<outbound>\w+): (?P<error>.*)`}}
	c.Probes = []Probe{
		{Name: "echo", Kind: ProbeIPEcho, URL: "http://198.18.30.1/", Listed: true},
		{Kind: ProbeProxyPath, URL: "http://198.18.30.21/generate_204"},
	}
	c.Bypass = []Bypass{
		{Section: "tv", Name: "living room TV", MAC: net.HardwareAddr{2, 0, 0, 0, 0, 0x0a},
			IPs: []netip.Addr{netip.MustParseAddr("198.18.1.50")}},
		{MAC: net.HardwareAddr{2, 0, 0, 0, 0, 0x0b}},
	}
	c.LoopGuard = LoopGuard{MinActive: -1, Ratio: 50}
	c.Paths = Paths{SurflareBin: "/opt/lab/bin/surflare", ProxyLog: "/opt/lab/log/surflare-proxy.log",
		RunDir: "/opt/lab/run", UbusSocket: "/opt/lab/ubus.sock", ChnrouteV4: "/opt/lab/chnroute.txt",
		ChnrouteV6: "/opt/lab/chnroute6.txt", ChnrouteURL: "http://198.18.40.1/delegated", ChnrouteRefresh: 24 * time.Hour}
	c.Web = Web{Enabled: false, Listen: netip.MustParseAddr("198.18.1.1"), Port: 8080, TokenFile: "/opt/lab/token"}
	c.DNS = DNS{ForeignResolvers: []netip.Addr{netip.MustParseAddr("198.18.50.1")},
		DoHEndpoints: []netip.Addr{netip.MustParseAddr("198.18.50.2")}, DomesticUpstreams: []netip.Addr{netip.MustParseAddr("198.19.0.53")},
		BlockedDoH: nil, LocalResolverPort: 5353}
	c.Keepalive = Keepalive{Enabled: false, Idle: time.Minute, Interval: 5 * time.Second, Count: 9}
	c.Vendor = Vendor{StatusTimeout: 4 * time.Second, ConnectTimeout: 40 * time.Second, DisconnectTimeout: 6 * time.Second,
		NodesTimeout: 7 * time.Second, ProxyComm: "fake-proxy", ProxyPort: 10900}
	return c
}

func TestEveryOptionParsed(t *testing.T) {
	got, w := mustParse(t, everyOption)
	if len(w) != 0 {
		t.Errorf("warnings: %v", w)
	}
	want := everyOptionWant()
	if !Equal(got, want) {
		t.Errorf("parsed:\n%s\nwant:\n%s", Format(got), Format(want))
	}
	// Field by field too: Equal compares text, this also checks the Go values
	// (e.g. the MAC bytes, the masked prefixes).
	gv, wv := reflect.ValueOf(got).Elem(), reflect.ValueOf(want).Elem()
	for i := 0; i < gv.NumField(); i++ {
		name := gv.Type().Field(i).Name
		if name == "LogHealth" {
			g, w := got.LogHealth, want.LogHealth
			if g.Pattern.String() != w.Pattern.String() {
				t.Errorf("LogHealth.Pattern = %q", g.Pattern)
			}
			g.Pattern, w.Pattern = nil, nil
			if !reflect.DeepEqual(g, w) {
				t.Errorf("LogHealth = %+v, want %+v", g, w)
			}
			continue
		}
		if !reflect.DeepEqual(gv.Field(i).Interface(), wv.Field(i).Interface()) {
			t.Errorf("%s = %+v\nwant %+v", name, gv.Field(i).Interface(), wv.Field(i).Interface())
		}
	}
}

// The test file above must really set every option to a non-default value,
// otherwise a broken binding could hide behind a default.
func TestEveryOptionDiffersFromDefault(t *testing.T) {
	want, def := everyOptionWant(), Default()
	wantSecs, defSecs := want.UCI(), def.UCI()
	for i, ws := range wantSecs.Sections[:len(def.singletons())] {
		ds := defSecs.Sections[i]
		for _, o := range (&Config{}).singletons()[i].options {
			wo, do := ws.Option(o.name), ds.Option(o.name)
			if wo != nil && do != nil && reflect.DeepEqual(wo.Values, do.Values) {
				t.Errorf("everyOption sets %s.%s to its default %q", ws.Name, o.name, wo.Values)
			}
			if !strings.Contains(everyOption, "\t"+keyword(o)+" "+o.name+" ") {
				t.Errorf("everyOption does not set %s.%s", ws.Name, o.name)
			}
		}
	}
}

func keyword(o option) string {
	if o.list {
		return "list"
	}
	return "option"
}

func TestFormatRoundTrips(t *testing.T) {
	for _, c := range []*Config{Default(), everyOptionWant()} {
		text := Format(c)
		back, w, err := Parse("formatted", text)
		if err != nil || len(w) != 0 {
			t.Fatalf("Format output does not parse cleanly: %v %v\n%s", err, w, text)
		}
		if !Equal(back, c) || !reflect.DeepEqual(back.Probes, c.Probes) || !reflect.DeepEqual(back.DNS, c.DNS) {
			t.Errorf("round trip changed the config:\n%s\nvs\n%s", Format(back), text)
		}
	}
}

func TestValueForms(t *testing.T) {
	c, _ := mustParse(t, `
config surflare 'main'
	option check_interval '90s'
	option degraded_interval '1m'
	option storm_cooldown '1d'
	option fail_open 'on'
	option candidate 'Solo'
	list private '198.18.7.9/16'
config loghealth
	option tail '1048576'
	option window '2h'
config loopguard 'loopguard'
	option min_active '0'
	option ratio '-5'
`)
	got := []any{c.Main.CheckInterval, c.Main.DegradedInterval, c.Main.StormCooldown, c.Main.FailOpen,
		c.Main.Candidates, c.Main.Private, c.LogHealth.Tail, c.LogHealth.Window, c.LoopGuard}
	want := []any{90 * time.Second, time.Minute, 24 * time.Hour, true,
		[]string{"Solo"}, []netip.Prefix{netip.MustParsePrefix("198.18.0.0/16")}, int64(1 << 20), 2 * time.Hour,
		LoopGuard{MinActive: 1000, Ratio: 80}}
	for i := range got {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("value %d = %v, want %v", i, got[i], want[i])
		}
	}
	if !c.LoopGuard.Enabled() {
		t.Error("min_active 0 must mean the default (on)")
	}
	if everyOptionWant().LoopGuard.Enabled() {
		t.Error("min_active -1 must switch the guard off")
	}
}

// brokenFile has one mistake per numbered line; all must be reported at once.
const brokenFile = `config surflare 'main'
	option check_interval 'abc'
	option mode 'turbo'
	option fail_threshold '0'
	option fail_open 'maybe'
	list node 'Dallas'
	option expected_country 'usa'
	option lan_interface 'br lan'
	list private '10.0.0.0/33'
	list candidate 'Dallas'
	list candidate 'Dallas'
	option frobnicate '1'

config auth 'auth'
	option login_backoff_min '30'
	option login_backoff_max '10'

config probe 'p1'
	option kind 'telepathy'
	option url 'ftp://198.18.30.1/'

config probe 'p2'
	option kind 'search'

config bypass 'b1'
	option mac '02:00:00:00:00:zz'

config bypass 'b2'
	option mac '02:00:00:00:00:01'

config bypass 'b3'
	option mac '02:00:00:00:00:01'

config web 'web'
	option port '70000'
	option listen '198.18.1.300'

config loghealth 'loghealth'
	option pattern 'urltest\[(?P<node>.+)\]'
	option tail '3 MB'

config paths 'paths'
	option run_dir 'run'

config loopguard 'loopguard'
	option ratio '101'

config surflare 'again'

config whatever 'w'

config fastsignal 'fastsignal'
	option counters 'sometimes'

config storm503 'storm503'
	option enabled '2'
`

func TestEveryErrorReportedAtOnce(t *testing.T) {
	_, warns, err := Parse("/etc/config/surflare", []byte(brokenFile))
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("err = %v, want an ErrorList", err)
	}
	want := []string{
		`/etc/config/surflare:2: main.check_interval: "abc" is not a number of seconds`,
		`/etc/config/surflare:3: main.mode: "turbo" is not one of rule, global, direct`,
		`/etc/config/surflare:4: main.fail_threshold: 0 is out of range: must be between 1 and 1000`,
		`/etc/config/surflare:5: main.fail_open: "maybe" is not a boolean (use 1 or 0)`,
		"/etc/config/surflare:6: main.node: takes one value: write `option node`, not `list node`",
		`/etc/config/surflare:7: main.expected_country: "usa" is not a two-letter country code (like US)`,
		`/etc/config/surflare:8: main.lan_interface: "br lan" is not a network interface name`,
		`/etc/config/surflare:9: main.private: "10.0.0.0/33" is not an address or prefix`,
		`/etc/config/surflare:11: main.candidate: "Dallas" is listed twice`,
		`/etc/config/surflare:16: auth.login_backoff_max: must not be less than login_backoff_min (30s)`,
		`/etc/config/surflare:19: p1.kind: "telepathy" is not one of search, cdn-trace, ip-echo, proxy-path`,
		`/etc/config/surflare:20: p1.url: "ftp://198.18.30.1/" is not an http:// or https:// URL`,
		`/etc/config/surflare:22: p2: missing option url`,
		`/etc/config/surflare:26: b1.mac: "02:00:00:00:00:zz" is not a MAC address (like 00:11:22:33:44:55)`,
		`/etc/config/surflare:32: b3.mac: 02:00:00:00:00:01 is already bypassed by section at line 29`,
		`/etc/config/surflare:35: web.port: 70000 is out of range: must be between 1 and 65535`,
		`/etc/config/surflare:36: web.listen: "198.18.1.300" is not an IP address`,
		`/etc/config/surflare:39: loghealth.pattern: the pattern needs a named group (?P<transit>...)`,
		`/etc/config/surflare:40: loghealth.tail: "3 MB" is not a size (bytes, or a number with K, M or G)`,
		`/etc/config/surflare:43: paths.run_dir: "run" is not an absolute path`,
		`/etc/config/surflare:46: loopguard.ratio: 101 is too large: must be at most 100`,
		`/etc/config/surflare:48: again: a second "surflare" section (the first is at line 1): merge them`,
		`/etc/config/surflare:53: fastsignal.counters: "sometimes" is not a boolean (use 1 or 0)`,
		`/etc/config/surflare:56: storm503.enabled: "2" is not a boolean (use 1 or 0)`,
	}
	var got []string
	for _, e := range list {
		got = append(got, e.Error())
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n%s\n\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	wantWarn := []string{
		`/etc/config/surflare:12: main.frobnicate: unknown option (ignored)`,
		`/etc/config/surflare:50: w: unknown section type "whatever" (ignored)`,
	}
	var gotWarn []string
	for _, w := range warns {
		gotWarn = append(gotWarn, w.String())
	}
	if !reflect.DeepEqual(gotWarn, wantWarn) {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(gotWarn, "\n"), strings.Join(wantWarn, "\n"))
	}
}

// The switches the benchmark's baseline uses: fastsignal.enabled turns off
// all three fast signals whatever their own options say, each can be turned
// off alone, and storm503.enabled turns off the 503 monitor.
func TestSignalSwitches(t *testing.T) {
	c, w := mustParse(t, "")
	if len(w) != 0 || !c.FastSignal.ProxyExitOn() || !c.FastSignal.NodeLogOn() || !c.FastSignal.CountersOn() || !c.Storm503.Enabled {
		t.Errorf("defaults must leave every signal on: %+v storm503 %+v", c.FastSignal, c.Storm503)
	}
	c, _ = mustParse(t, "config fastsignal 'fastsignal'\n\toption enabled '0'\nconfig storm503\n\toption enabled 'off'\n")
	if c.FastSignal.ProxyExitOn() || c.FastSignal.NodeLogOn() || c.FastSignal.CountersOn() {
		t.Errorf("fastsignal.enabled=0 must turn off all three: %+v", c.FastSignal)
	}
	if !c.FastSignal.ProxyExit || !c.FastSignal.NodeLog || !c.FastSignal.Counters {
		t.Errorf("the per-signal options keep their own values: %+v", c.FastSignal)
	}
	if c.Storm503.Enabled {
		t.Error("storm503.enabled=off left the monitor on")
	}
	c, _ = mustParse(t, "config fastsignal 'fs'\n\toption node_log '0'\n")
	if !c.FastSignal.ProxyExitOn() || c.FastSignal.NodeLogOn() || !c.FastSignal.CountersOn() {
		t.Errorf("node_log=0 must turn off only that one: %+v", c.FastSignal)
	}
	_, _, err := Parse("/etc/config/surflare", []byte("config fastsignal 'fastsignal'\n\toption enabled '1'\n\toption proxy_exit 'maybe'\n"))
	if err == nil || err.Error() != `/etc/config/surflare:3: fastsignal.proxy_exit: "maybe" is not a boolean (use 1 or 0)` {
		t.Errorf("err = %v", err)
	}
}

// A misspelled name is answered with the name of the schema it is closest
// to, among the options of that section's type (detector.threshold is not
// offered for main, which has none by that name) and among section types.
func TestUnknownNamesSuggestTheSchemasSpelling(t *testing.T) {
	_, w := mustParse(t, "config surflare 'main'\n\tlist candiate 'Dallas'\n\toption treshold '3'\n"+
		"config detector 'detector'\n\toption treshold '3'\nconfig loghelth 'lh'\n")
	var got []string
	for _, x := range w {
		got = append(got, x.String())
	}
	want := []string{
		`/etc/config/surflare:2: main.candiate: unknown option — did you mean "candidate"? (ignored)`,
		`/etc/config/surflare:3: main.treshold: unknown option (ignored)`,
		`/etc/config/surflare:5: detector.treshold: unknown option — did you mean "threshold"? (ignored)`,
		`/etc/config/surflare:6: lh: unknown section type "loghelth" — did you mean "loghealth"? (ignored)`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestUnknownOptionIsOnlyAWarning(t *testing.T) {
	c, w := mustParse(t, "config surflare 'main'\n\toption check_intervall '5'\n\toption fail_threshold '7'\n")
	if len(w) != 1 || w[0].String() != `/etc/config/surflare:2: main.check_intervall: unknown option — did you mean "check_interval"? (ignored)` {
		t.Errorf("warnings = %v", w)
	}
	if c.Main.FailThreshold != 7 || c.Main.CheckInterval != 30*time.Second {
		t.Errorf("the rest of the file must still apply: %+v", c.Main)
	}
}

func TestSyntaxErrorHasLine(t *testing.T) {
	_, _, err := Parse("/etc/config/surflare", []byte("config surflare 'main'\n\toption mode 'rule\n"))
	if err == nil || !strings.HasPrefix(err.Error(), "/etc/config/surflare:") || !strings.Contains(err.Error(), "syntax error: EOF with unterminated '") {
		t.Errorf("err = %v", err)
	}
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 1 || list[0].Line < 2 {
		t.Errorf("want one error with its line, got %#v", err)
	}
}

func TestEverySyntaxErrorReported(t *testing.T) {
	_, _, err := Parse("f", []byte("config surflare 'main'\n\tvalue a 'b'\n\toption mode 'rule'\n\toption bad-name '1'\n\toption fail_threshold 'x'\n"))
	want := "f:2: syntax error: invalid command\nf:4: syntax error: invalid character in name field"
	if err == nil || err.Error() != want {
		t.Errorf("err:\n%v\nwant:\n%s", err, want)
	}
}

func TestProbeOnlyProxyPathIsAnError(t *testing.T) {
	_, _, err := Parse("f", []byte("config probe 'x'\n\toption kind 'proxy-path'\n\toption url 'http://198.18.30.21/'\n"))
	if err == nil || err.Error() != "f:1: no probe of kind search, cdn-trace or ip-echo: the tunnel could never be checked" {
		t.Errorf("err = %v", err)
	}
}

func TestAnonymousSectionsAreLabelledLikeUCI(t *testing.T) {
	_, _, err := Parse("f", []byte("config probe\n\toption kind 'search'\n\toption url 'http://198.18.30.21/'\nconfig probe\n\toption kind 'nope'\n\toption url 'http://198.18.30.21/'\n"))
	if err == nil || err.Error() != `f:5: @probe[1].kind: "nope" is not one of search, cdn-trace, ip-echo, proxy-path` {
		t.Errorf("err = %v", err)
	}
}

func TestHolderKeepsLastGood(t *testing.T) {
	path := filepath.Join(t.TempDir(), "surflare")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("config surflare 'main'\n\toption check_interval '20'\n")
	h, err := NewHolder(path)
	if err != nil {
		t.Fatal(err)
	}
	if h.Get().Main.CheckInterval != 20*time.Second {
		t.Fatalf("initial check_interval = %v", h.Get().Main.CheckInterval)
	}

	// Same settings, different spelling: not a change.
	write("# comment\nconfig surflare 'main'\n\toption check_interval '20s'\n")
	if changed, _, err := h.Reload(); err != nil || changed {
		t.Errorf("reload of an equivalent file: changed=%v err=%v", changed, err)
	}

	write("config surflare 'main'\n\toption check_interval '40'\n\toption bogus '1'\n")
	changed, warns, err := h.Reload()
	if err != nil || !changed || h.Get().Main.CheckInterval != 40*time.Second {
		t.Errorf("good reload: changed=%v err=%v interval=%v", changed, err, h.Get().Main.CheckInterval)
	}
	if len(warns) != 1 || len(h.Warnings()) != 1 {
		t.Errorf("warnings = %v / %v", warns, h.Warnings())
	}

	before := h.Get()
	write("config surflare 'main'\n\toption check_interval 'soon'\n\toption fail_threshold '-1'\n")
	changed, _, err = h.Reload()
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 2 || changed {
		t.Errorf("bad reload: changed=%v err=%v, want both errors", changed, err)
	}
	if h.Get() != before || h.Get().Main.CheckInterval != 40*time.Second {
		t.Errorf("bad reload replaced the config: %v", h.Get().Main.CheckInterval)
	}

	os.Remove(path)
	if _, _, err := h.Reload(); err == nil || h.Get() != before {
		t.Errorf("reload of a deleted file: err=%v, config kept=%v", err, h.Get() == before)
	}

	if _, err := NewHolder(path); err == nil {
		t.Error("NewHolder on a missing file must fail: there is no last good config yet")
	}
}
