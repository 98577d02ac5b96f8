package config

import (
	"fmt"
	"math"
	"regexp"
	"time"
)

// The schema: every section and option of /etc/config/surflare, bound to the
// Go fields. Ranges are checked here; checks that span options are in
// validate.go.

const (
	noMax = math.MaxInt64
	noMin = math.MinInt64
	day   = 24 * time.Hour
)

// singleton is a section that appears at most once, found by its type (any
// name is accepted; conventionalName is what Format writes and what
// `uci set surflare.NAME.option=…` in the docs uses).
type singleton struct {
	typ     string
	options []option
}

// singletons lists the once-only sections of c in file order.
func (c *Config) singletons() []singleton {
	return []singleton{
		{"surflare", c.Main.options()},
		{"storm503", c.Storm503.options()},
		{"auth", c.Auth.options()},
		{"detector", c.Detector.options()},
		{"loghealth", c.LogHealth.options()},
		{"fastsignal", c.FastSignal.options()},
		{"loopguard", c.LoopGuard.options()},
		{"paths", c.Paths.options()},
		{"web", c.Web.options()},
		{"dns", c.DNS.options()},
		{"keepalive", c.Keepalive.options()},
		{"vendor", c.Vendor.options()},
	}
}

// conventionalName is the name Format gives the once-only section of typ.
func conventionalName(typ string) string {
	if typ == "surflare" {
		return "main"
	}
	return typ
}

// Repeated section types.
const (
	typeProbe  = "probe"
	typeBypass = "bypass"
)

func (m *Main) options() []option {
	return []option{
		boolean("enabled", &m.Enabled),
		choice("mode", &m.Mode, ModeRule, ModeGlobal, ModeDirect),
		choice("role", &m.Role, RoleAuto, RoleRouter, RoleLaptop),
		str("node", &m.Node, notEmpty),
		texts("candidate", &m.Candidates, true),
		str("transit", &m.Transit, notEmpty),
		texts("transit_candidate", &m.TransitCandidates, false),
		seconds("check_interval", &m.CheckInterval, time.Second, day),
		seconds("degraded_interval", &m.DegradedInterval, time.Second, day),
		integer("fail_threshold", &m.FailThreshold, 1, 1000),
		seconds("heartbeat_interval", &m.HeartbeatInterval, 0, day),
		seconds("login_refresh", &m.LoginRefresh, 0, day),
		seconds("idle_probe_interval", &m.IdleProbeInterval, 0, time.Hour),
		seconds("storm_cooldown", &m.StormCooldown, time.Second, day),
		seconds("reconnect_window", &m.ReconnectWindow, time.Second, day),
		integer("reconnect_limit", &m.ReconnectLimit, 0, 1000),
		integer("cascade_after", &m.CascadeAfter, 1, 100),
		seconds("connect_local_timeout", &m.ConnectLocalTimeout, time.Second, time.Hour),
		seconds("connect_dataplane_timeout", &m.ConnectDataplaneTimeout, time.Second, time.Hour),
		seconds("domestic_confirm", &m.DomesticConfirm, 0, time.Hour),
		seconds("probe_timeout", &m.ProbeTimeout, 100*time.Millisecond, 10*time.Minute),
		boolean("fail_open", &m.FailOpen),
		boolean("strict_direct", &m.StrictDirect),
		boolean("strict_direct_rule", &m.StrictDirectRule),
		boolean("route_layer", &m.RouteLayer),
		choice("ipv6", &m.IPv6, IPv6Block, IPv6Proxy),
		str("expected_country", &m.ExpectedCountry, countryCode),
		str("domestic_country", &m.DomesticCountry, countryCode),
		str("username", &m.Username, nil),
		str("lan_interface", &m.LANInterface, ifName),
		str("wan_device", &m.WANDevice, optionalIfName),
		texts("wan_interface", &m.WANInterfaces, false),
		prefixList("lan_subnet", &m.LANSubnets),
		prefixList("private", &m.Private),
		prefixList("endpoint", &m.Endpoints),
	}
}

func (s *Storm503) options() []option {
	return []option{
		boolean("enabled", &s.Enabled),
		integer("count", &s.Count, 1, 100000),
		seconds("window", &s.Window, time.Second, day),
		seconds("active_window", &s.ActiveWindow, time.Second, day),
		seconds("probe_interval", &s.ProbeInterval, 0, time.Hour),
		str("probe_url", &s.ProbeURL, httpURL),
	}
}

func (a *Auth) options() []option {
	return []option{
		integer("login_retries", &a.LoginRetries, 1, 100),
		seconds("login_backoff_min", &a.LoginBackoffMin, time.Second, day),
		seconds("login_backoff_max", &a.LoginBackoffMax, time.Second, day),
		integer("fail_open_after", &a.FailOpenAfter, 1, 1000),
		seconds("subscription_cooldown", &a.SubscriptionCooldown, 0, 7*day),
		choice("login_mode", &a.LoginMode, LoginPTY, LoginArgv),
		seconds("login_timeout", &a.LoginTimeout, time.Second, time.Hour),
		texts("auth_needed", &a.AuthNeeded, true),
		texts("subscription_inactive", &a.SubscriptionInactive, true),
		texts("login_fatal", &a.LoginFatal, true),
	}
}

func (d *Detector) options() []option {
	return []option{
		boolean("enabled", &d.Enabled),
		seconds("interval", &d.Interval, 100*time.Millisecond, time.Hour),
		integer("threshold", &d.Threshold, 1, 1000000),
		seconds("cooldown", &d.Cooldown, 0, day),
	}
}

func (l *LogHealth) options() []option {
	return []option{
		boolean("enabled", &l.Enabled),
		minutes("window", &l.Window, time.Minute, day),
		integer("threshold", &l.Threshold, 0, noMax),
		size("tail", &l.Tail, 4<<10, 1<<30),
		minutes("stale", &l.Stale, time.Minute, 7*day),
		pattern("pattern", &l.Pattern, "node", "transit"),
	}
}

func (f *FastSignal) options() []option {
	return []option{
		boolean("enabled", &f.Enabled),
		boolean("proxy_exit", &f.ProxyExit),
		boolean("node_log", &f.NodeLog),
		boolean("counters", &f.Counters),
		boolean("conn_fail", &f.ConnFail),
		list("conn_fail_pattern", &f.ConnFailPatterns, parseConnFailPattern, func(s string) string { return s }, false),
	}
}

// parseConnFailPattern checks a failed-connection pattern: a valid regular
// expression with a group named error (package detectors/connfail).
func parseConnFailPattern(s string) (string, error) {
	re, err := regexp.Compile(s)
	if err != nil {
		return "", fmt.Errorf("not a regular expression: %v", err)
	}
	if re.SubexpIndex("error") < 0 {
		return "", fmt.Errorf("needs a group named error: (?P<error>...)")
	}
	return s, nil
}

func (p *Probe) options() []option {
	return []option{
		choice("kind", &p.Kind, ProbeSearch, ProbeCDNTrace, ProbeIPEcho, ProbeProxyPath),
		str("url", &p.URL, httpURL),
		boolean("listed", &p.Listed),
	}
}

func (b *Bypass) options() []option {
	return []option{
		str("name", &b.Name, nil),
		mac("mac", &b.MAC),
		addrList("ip", &b.IPs),
	}
}

func (l *LoopGuard) options() []option {
	return []option{
		integer("min_active", &l.MinActive, noMin, noMax),
		integer("ratio", &l.Ratio, noMin, 100),
	}
}

func (p *Paths) options() []option {
	return []option{
		str("surflare_bin", &p.SurflareBin, absPath),
		str("proxy_log", &p.ProxyLog, absPath),
		str("run_dir", &p.RunDir, absPath),
		str("ubus_socket", &p.UbusSocket, absPath),
		str("chnroute_v4", &p.ChnrouteV4, absPath),
		str("chnroute_v6", &p.ChnrouteV6, absPath),
		str("chnroute_url", &p.ChnrouteURL, httpURL),
		seconds("chnroute_refresh", &p.ChnrouteRefresh, 0, 365*day),
	}
}

func (w *Web) options() []option {
	return []option{
		boolean("enabled", &w.Enabled),
		address("listen", &w.Listen),
		integer("port", &w.Port, 1, 65535),
		str("token_file", &w.TokenFile, absPath),
	}
}

func (d *DNS) options() []option {
	return []option{
		addrList("foreign_resolver", &d.ForeignResolvers),
		addrList("doh_endpoint", &d.DoHEndpoints),
		addrList("domestic_upstream", &d.DomesticUpstreams),
		addrList("blocked_doh", &d.BlockedDoH),
		integer("local_resolver_port", &d.LocalResolverPort, 1, 65535),
	}
}

func (k *Keepalive) options() []option {
	return []option{
		boolean("enabled", &k.Enabled),
		seconds("idle", &k.Idle, time.Second, day),
		seconds("interval", &k.Interval, time.Second, day),
		integer("count", &k.Count, 1, 127),
	}
}

func (v *Vendor) options() []option {
	return []option{
		seconds("status_timeout", &v.StatusTimeout, time.Second, time.Hour),
		seconds("connect_timeout", &v.ConnectTimeout, time.Second, time.Hour),
		seconds("disconnect_timeout", &v.DisconnectTimeout, time.Second, time.Hour),
		seconds("nodes_timeout", &v.NodesTimeout, time.Second, time.Hour),
		str("proxy_comm", &v.ProxyComm, procComm),
		integer("proxy_port", &v.ProxyPort, 1, 65535),
	}
}
