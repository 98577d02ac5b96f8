package fakes

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Vendor holds the knobs that choose how the fake vendor binaries and the
// account API behave where the evidence about the real client disagrees
// with the lab's first model (SURFLARE-CONTRACT.md, E1–E10). Each knob has
// a KEY=VALUE spelling (surflare-lab up --vendor KEY=VALUE, see Knobs) and
// lives in lab.json, so every fake sees the same choice. The zero value is
// not meaningful: start from DefaultVendor.
type Vendor struct {
	// Exits are the exit tags `surflare nodes` lists and connect accepts
	// (E1). Names must be lab exits (lab.Exits).
	Exits []string `json:"exits"`
	// Auto is how the node `auto` is treated (E1): AutoListed, AutoAccepted
	// or AutoOff.
	Auto string `json:"auto"`
	// Modes are the --mode values connect accepts (E2).
	Modes []string `json:"modes"`
	// RuleRouting is what rule mode sends through the tunnel (E3):
	// RoutingList or RoutingLegacy.
	RuleRouting string `json:"rule_routing"`
	// RuleList is the vendor's list for RoutingList: domain suffixes
	// (matched against the sniffed HTTP Host) and CIDR prefixes (matched
	// against the destination address).
	RuleList []string `json:"rule_list"`
	// NoTransit is what connect does without --transit (E4): NoTransitSingle
	// or NoTransitAuto.
	NoTransit string `json:"no_transit"`
	// InheritFDs: the proxy inherits every descriptor connect's caller left
	// open (E5); false = connect marks them close-on-exec first.
	InheritFDs bool `json:"inherit_fds"`
	// ProxyDelayMS > 0: connect --daemon returns as soon as the proxy is
	// launched, and the proxy listens only after this delay (E6).
	ProxyDelayMS int `json:"proxy_delay_ms"`
	// DisconnectStrict: disconnect when not fully connected exits non-zero
	// and leaves the table, rules and route; connect adds its ip rule
	// again each time (E7). false = the old always-clean disconnect.
	DisconnectStrict bool `json:"disconnect_strict"`
	// Foreground: `connect` without --daemon runs the tunnel in a
	// long-lived CLI process; killed, it orphans the kernel state (E7).
	Foreground bool `json:"foreground"`
	// UDP: the vendor table and the proxy capture UDP as well as TCP (E8).
	UDP bool `json:"udp"`
	// APIAccess: APIAny or APITunnel (E9: reachable only through the tunnel).
	APIAccess string `json:"api_access"`
	// APILossPct: percent of account API connections reset even when
	// allowed (E9: intermittently unreachable through the tunnel too).
	APILossPct int `json:"api_loss_pct"`
	// TokenTTLS: seconds a login token (auth.dat) is valid; 0 = forever (E9).
	TokenTTLS int `json:"token_ttl_s"`
	// TokenExpiry is how an expired token shows (E9): ExpiryAccountCheck
	// (connect fails "Account check failed", status stays silent) or
	// ExpiryStatus (status and connect say "session expired").
	TokenExpiry string `json:"token_expiry"`
	// Login is which login forms exist (E10): LoginBoth, LoginArgv, LoginPTY.
	Login string `json:"login"`
	// LogFormat is how the proxy logs a failed LAN connection (DESIGN §9):
	// LogSingBox112, LogSingBox18 or LogNone.
	LogFormat string `json:"log_format"`
}

// Knob values.
const (
	AutoListed   = "listed"   // `auto` is valid and listed first by `surflare nodes`
	AutoAccepted = "accepted" // valid for --node, not listed
	AutoOff      = "off"      // unknown node (the old fake)

	RoutingList   = "list"   // E3: only listed domains/prefixes tunnelled, the rest direct (0xff)
	RoutingLegacy = "legacy" // old fake: only the domestic range direct, the rest tunnelled

	NoTransitSingle = "single" // E4: no --transit = single hop, straight to the exit
	NoTransitAuto   = "auto"   // old fake: no --transit = --transit auto

	APIAny    = "any"    // old fake: the API answers every source
	APITunnel = "tunnel" // E9: only connections arriving from an exit (through the tunnel)

	ExpiryAccountCheck = "account_check" // E9
	ExpiryStatus       = "status"        // the contract's first table

	LoginBoth = "both" // -p and the terminal prompt
	LoginArgv = "argv" // only -p (no prompt)
	LoginPTY  = "pty"  // only the prompt (-p unknown)

	LogSingBox112 = "1.12" // connection: open connection to DST using outbound/TYPE[TAG]: ERR
	LogSingBox18  = "1.8"  // inbound/tproxy[TAG]: process connection from SRC: ERR
	LogNone       = "none" // failed connections are not logged
)

// DefaultURLTestIntervalS is the fake proxy's urltest cadence unless the
// urltest_interval knob says otherwise. Stock sing-box uses 3 min, the
// seed's thresholds imply well under a minute; 30 s is the middle case, and
// the lab's old 5 s made signals look faster than a real client allows.
const DefaultURLTestIntervalS = 30

// USExits are the seed's six exits (the old fake's whole list).
var USExits = []string{"Dallas", "Los Angeles", "Chicago", "New York", "Atlanta", "Miami"}

// DefaultRuleList is the lab's stand-in for the vendor's blocklist: the
// names under foreign.lab, blocked.ipecho.lab (an IP echo reached by name,
// so a client sees its exit) and the account API's address (the client
// tunnels its own API calls), and by address the search host (search.lab,
// the lab's Google) and the first CDN trace host: the daemon's lab probes
// reach them by address, and the lab config marks those two probes listed.
// open.ipecho.lab and domestic.lab are not on it.
var DefaultRuleList = []string{"foreign.lab", "search.lab", "blocked.ipecho.lab", "198.18.40.1/32", "198.18.30.21/32", "198.18.30.11/32"}

// DefaultVendor is the evidence's behaviour wherever it does not break the
// daemon as it is today; the exceptions keep the old fake's behaviour and
// are listed in src/lab/fakes/README.md.
func DefaultVendor() Vendor {
	return Vendor{
		Exits:       append(slices.Clone(USExits), "Tokyo"),
		Auto:        AutoAccepted,
		Modes:       []string{"rule", "global", "direct"},
		RuleRouting: RoutingLegacy, // the daemon's strict direct would cut E3's 0xff traffic
		RuleList:    slices.Clone(DefaultRuleList),
		NoTransit:   NoTransitSingle,
		InheritFDs:  true, // the daemon hands the CLI nothing but 0-2 (measured with lab.SharedFDs)
		UDP:         true,
		TokenTTLS:   86400,
		TokenExpiry: ExpiryAccountCheck,
		APIAccess:   APIAny, // the daemon logs in reactively, without the tunnel
		Login:       LoginBoth,
		LogFormat:   LogSingBox112,
	}
}

// Knob is one KEY=VALUE knob: its key, the evidence it models and what it
// does, for --help and the READMEs.
type Knob struct {
	Key, Evidence, Values, Help string
}

// Knobs lists every knob ApplyKnob understands.
var Knobs = []Knob{
	{"exits", "E1", "NAME,NAME…|us", "exit tags `surflare nodes` lists and connect accepts (us = the six US exits)"},
	{"auto", "E1", "listed|accepted|off", "node `auto`: valid and listed first, valid only, or unknown"},
	{"modes", "E2", "MODE,MODE…", "--mode values connect accepts (rule, global, direct)"},
	{"rule_routing", "E3", "list|legacy", "rule mode: only rule_list through the tunnel, the rest direct with 0xff; or only cn_direct direct"},
	{"rule_list", "E3", "SUFFIX|CIDR,…", "the vendor's list for rule_routing=list (HTTP Host suffixes, destination prefixes)"},
	{"no_transit", "E4", "single|auto", "connect without --transit: single hop to the exit, or transit auto"},
	{"inherit_fds", "E5", "1|0", "the proxy inherits the caller's open descriptors (0: connect marks them close-on-exec)"},
	{"proxy_delay", "E6", "DURATION", "connect --daemon returns at once and the proxy listens only after DURATION (0: connect waits for it)"},
	{"disconnect", "E7", "strict|clean", "strict: disconnect when not fully connected exits 1 and leaves table, rules, route; connect re-adds its rule"},
	{"foreground", "E7", "1|0", "connect without --daemon runs the tunnel in a long-lived CLI; SIGKILL orphans the kernel state"},
	{"udp", "E8", "1|0", "the vendor table and proxy capture UDP too (DNS through the tunnel in global mode)"},
	{"api_access", "E9", "any|tunnel", "the account API answers any source, or only connections through the tunnel"},
	{"api_loss", "E9", "PERCENT", "share of account API connections reset even when allowed"},
	{"token_ttl", "E9", "DURATION", "lifetime of a login token (0 = forever)"},
	{"token_expiry", "E9", "account_check|status", "an expired token: connect fails `Account check failed`, or status says `session expired`"},
	{"login", "E10", "both|argv|pty", "login forms: -p and prompt, -p only, prompt only"},
	{"urltest_interval", "issue 19", "SECONDS", "the proxy's urltest cadence (default 30)"},
	{"log_format", "DESIGN §9", "1.12|1.8|none", "how the proxy logs a failed LAN connection at ERROR"},
}

// ApplyKnob sets one KEY=VALUE knob on li (its Vendor, or
// URLTestIntervalS). Exit names are checked by the lab, which knows them.
func ApplyKnob(li *LabInfo, kv string) error {
	key, val, ok := strings.Cut(kv, "=")
	if !ok {
		return fmt.Errorf("--vendor %q: want KEY=VALUE", kv)
	}
	v := &li.Vendor
	bad := func(want string) error { return fmt.Errorf("--vendor %s=%q: want %s", key, val, want) }
	oneOf := func(dst *string, vals ...string) error {
		if !slices.Contains(vals, val) {
			return bad(strings.Join(vals, " or "))
		}
		*dst = val
		return nil
	}
	boolean := func(dst *bool) error {
		b, err := strconv.ParseBool(val)
		if err != nil {
			return bad("1 or 0")
		}
		*dst = b
		return nil
	}
	duration := func(unit time.Duration, dst *int) error {
		d, err := time.ParseDuration(val)
		if err != nil {
			if n, nerr := strconv.Atoi(val); nerr == nil {
				d, err = time.Duration(n)*time.Second, nil
			}
		}
		if err != nil || d < 0 {
			return bad("a duration such as 3s (or whole seconds)")
		}
		*dst = int(d / unit)
		return nil
	}
	switch key {
	case "exits":
		if val == "us" {
			v.Exits = slices.Clone(USExits)
			return nil
		}
		v.Exits = splitList(val)
		if len(v.Exits) == 0 {
			return bad("at least one exit")
		}
	case "auto":
		return oneOf(&v.Auto, AutoListed, AutoAccepted, AutoOff)
	case "modes":
		v.Modes = splitList(val)
		for _, m := range v.Modes {
			if !slices.Contains([]string{"rule", "global", "direct"}, m) {
				return bad("modes from rule, global, direct")
			}
		}
		if len(v.Modes) == 0 {
			return bad("at least one mode")
		}
	case "rule_routing":
		return oneOf(&v.RuleRouting, RoutingList, RoutingLegacy)
	case "rule_list":
		v.RuleList = splitList(val)
	case "no_transit":
		return oneOf(&v.NoTransit, NoTransitSingle, NoTransitAuto)
	case "inherit_fds":
		return boolean(&v.InheritFDs)
	case "proxy_delay":
		return duration(time.Millisecond, &v.ProxyDelayMS)
	case "disconnect":
		var s string
		if err := oneOf(&s, "strict", "clean"); err != nil {
			return err
		}
		v.DisconnectStrict = s == "strict"
	case "foreground":
		return boolean(&v.Foreground)
	case "udp":
		return boolean(&v.UDP)
	case "api_access":
		return oneOf(&v.APIAccess, APIAny, APITunnel)
	case "api_loss":
		n, err := strconv.Atoi(strings.TrimSuffix(val, "%"))
		if err != nil || n < 0 || n > 100 {
			return bad("a percentage 0..100")
		}
		v.APILossPct = n
	case "token_ttl":
		return duration(time.Second, &v.TokenTTLS)
	case "token_expiry":
		return oneOf(&v.TokenExpiry, ExpiryAccountCheck, ExpiryStatus)
	case "login":
		return oneOf(&v.Login, LoginBoth, LoginArgv, LoginPTY)
	case "urltest_interval":
		var s int
		if err := duration(time.Second, &s); err != nil || s < 1 {
			return bad("at least 1 second")
		}
		li.URLTestIntervalS = s
	case "log_format":
		return oneOf(&v.LogFormat, LogSingBox112, LogSingBox18, LogNone)
	default:
		var keys []string
		for _, k := range Knobs {
			keys = append(keys, k.Key)
		}
		return fmt.Errorf("--vendor %q: unknown knob %q (knobs: %s)", kv, key, strings.Join(keys, ", "))
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// RuleMatch reports whether a connection to dst (with the sniffed HTTP
// host, "" when none) is on the vendor's list.
func (v Vendor) RuleMatch(host string, dst netip.Addr) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if h, _, ok := strings.Cut(host, ":"); ok {
		host = h
	}
	for _, e := range v.RuleList {
		if p, err := netip.ParsePrefix(e); err == nil {
			if p.Contains(dst) {
				return true
			}
			continue
		}
		e = strings.ToLower(e)
		if host != "" && (host == e || strings.HasSuffix(host, "."+e)) {
			return true
		}
	}
	return false
}

// AcceptsNode reports whether connect takes name as --node.
func (v Vendor) AcceptsNode(name string) bool {
	return slices.Contains(v.Exits, name) || (name == NodeAuto && v.Auto != AutoOff)
}

// NodeAuto is the node tag that lets the client pick the exit (E1).
const NodeAuto = "auto"

// InfoWatcher re-reads lab.json when it changes (checked at most every
// WatchInterval), for long-running fakes whose knobs may be changed while
// they run (the account API). Safe for concurrent use.
type InfoWatcher struct {
	dir string

	mu        sync.Mutex
	lastCheck time.Time
	mod       time.Time
	cur       LabInfo
}

// NewInfoWatcher watches labDir/lab.json; until a read succeeds it hands
// out the defaults.
func NewInfoWatcher(labDir string) *InfoWatcher {
	return &InfoWatcher{dir: labDir, cur: DefaultLabInfo(labDir, "")}
}

// Current returns the lab info in force now (the last good read).
func (w *InfoWatcher) Current() LabInfo {
	w.mu.Lock()
	defer w.mu.Unlock()
	if now := time.Now(); now.Sub(w.lastCheck) >= WatchInterval {
		w.lastCheck = now
		if fi, err := os.Stat(filepath.Join(w.dir, LabInfoFile)); err == nil && !fi.ModTime().Equal(w.mod) {
			if li, err := LoadLabInfo(w.dir); err == nil {
				w.cur, w.mod = li, fi.ModTime()
			}
		}
	}
	return w.cur
}
