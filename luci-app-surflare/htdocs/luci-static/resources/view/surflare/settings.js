'use strict';
'require view';
'require form';
'require rpc';
'require uci';
'require network';
'require ui';

// Settings of /etc/config/surflare. Option and section names follow
// src/config/schema.go; defaults shown as placeholders are the daemon's.
// Save & Apply commits UCI and procd reloads the daemon (ucitrack), which
// keeps its last good config if this one fails `surflare-watchdog config check`.

var callNodes = rpc.declare({ object: 'surflare', method: 'nodes', expect: { '': {} } });
var callStatus = rpc.declare({ object: 'surflare', method: 'status', expect: { '': {} } });
// set_credentials hands the password to the daemon, which keeps it in its
// own 0600 file (src/credentials) (and would set main.username, but the
// page sends none); it answers with the credentials status (never the
// password).
var callSetCredentials = rpc.declare({
	object: 'surflare', method: 'set_credentials',
	params: [ 'username', 'password' ], expect: { '': {} }
});

// credentialState is the daemon's word on the vendor password, from the
// `daemon.credentials` part of its status ({present, source, problem}), or
// null when it did not say (daemon not running, or too old to tell): the
// page then shows nothing rather than guess.
function credentialState(reply) {
	var c = reply && reply.daemon ? reply.daemon.credentials : reply;
	return (c && typeof c.present === 'boolean') ? c : null;
}

// The same checks as the daemon's (credentials.ValidateUsername and
// ValidatePassword), so a bad value is caught before the form is sent.
function validUsername(section_id, value) {
	if (value == null || value === '') return true;
	return (/^[^\s@]+@[^\s@]+$/.test(value) && value.length <= 254) || _('Expecting the account e-mail, like name@example.com');
}

function validPassword(section_id, value) {
	if (value == null || value === '') return true;
	if (/[\r\n\0]/.test(value)) return _('The password must be one line');
	return value.length <= 4096 || _('The password is too long');
}

function nodeNames(reply) {
	var rows = Array.isArray(reply) ? reply : (reply && (reply.nodes || reply.candidates)) || [];
	return rows.map(function(r) { return typeof r === 'string' ? r : r.node; }).filter(function(n) { return n; });
}

// A duration: whole seconds (or minutes where unit says so), or Go's
// "90s", "10m", "1h", or days as "7d".
function validDuration(section_id, value) {
	if (value == null || value === '') return true;
	if (/^\d+$/.test(value) || /^\d+d$/.test(value) || /^(\d+(\.\d+)?(ms|s|m|h))+$/.test(value)) return true;
	return _('Expecting a number of seconds, or a duration like 90s, 10m, 1h, 7d');
}

function duration(s, tab, name, title, descr, def) {
	var o = tab ? s.taboption(tab, form.Value, name, title, descr) : s.option(form.Value, name, title, descr);
	o.placeholder = def;
	o.rmempty = true;
	o.validate = validDuration;
	return o;
}

function integer(s, tab, name, title, descr, def, datatype) {
	var o = tab ? s.taboption(tab, form.Value, name, title, descr) : s.option(form.Value, name, title, descr);
	o.placeholder = def;
	o.rmempty = true;
	o.datatype = datatype || 'uinteger';
	return o;
}

// singleton is a once-only section found by type, whatever its name. A
// config kept from an older release may lack it (fastsignal came later):
// an empty one named after its type is staged then, so its options show
// (with the daemon's defaults) and a save creates it; an empty section
// means the defaults, so saving it changes nothing else.
function singleton(m, type, title, descr) {
	if (!uci.sections('surflare', type).length) uci.add('surflare', type, type);
	var s = m.section(form.TypedSection, type, title, descr);
	s.anonymous = true;
	s.addremove = false;
	return s;
}

return view.extend({
	load: function() {
		return Promise.all([
			uci.load('surflare'),
			L.resolveDefault(network.getHostHints(), null),
			L.resolveDefault(callNodes(), {}),
			L.resolveDefault(callStatus(), null)
		]);
	},

	render: function(data) {
		var hosts = data[1];
		var nodes = nodeNames(data[2]);
		var cred = credentialState(data[3]);
		var m, s, o;

		m = new form.Map('surflare', _('Surflare'),
			_('The watchdog keeps the Surflare VPN healthy, rotates exit nodes when one fails and blocks traffic outside the tunnel (kill switch).'));

		// --- main -------------------------------------------------------------
		s = singleton(m, 'surflare', _('General'));
		s.tab('general', _('General'));
		s.tab('rotation', _('Health and rotation'));
		s.tab('network', _('Network'));

		o = s.taboption('general', form.Flag, 'enabled', _('Enabled'));
		o.default = '1';
		o.rmempty = false;

		o = s.taboption('general', form.ListValue, 'mode', _('Mode'),
			_('The Surflare client\'s mode. Rule: it tunnels only the sites on its own list and sends the rest direct, foreign sites too. Global: it tunnels everything it gets. Direct: it tunnels nothing. In every mode domestic (cn_direct) destinations go direct.'));
		o.value('rule', _('Rule'));
		o.value('global', _('Global'));
		o.value('direct', _('Direct'));
		o.default = 'rule';

		o = s.taboption('general', form.ListValue, 'role', _('Role'),
			_('Router protects the LAN; laptop protects this host only; auto is router on OpenWrt.'));
		o.value('auto', _('Auto'));
		o.value('router', _('Router'));
		o.value('laptop', _('Laptop'));
		o.default = 'auto';

		// Any tag `surflare nodes` lists is valid (Tokyo too), and auto lets
		// Surflare pick; the daemon warns about a name the client does not list.
		o = s.taboption('general', form.Value, 'node', _('Preferred node'), _('Exit node connected at start; auto lets Surflare pick.'));
		nodes.forEach(function(n) { o.value(n); });
		if (nodes.indexOf('auto') < 0) o.value('auto');
		o.rmempty = false;

		o = s.taboption('general', form.DynamicList, 'candidate', _('Rotation candidates'),
			_('Nodes tried in this order when the current one fails; auto lets Surflare pick.'));
		nodes.forEach(function(n) { o.value(n); });
		if (nodes.indexOf('auto') < 0) o.value('auto');

		o = s.taboption('general', form.Value, 'transit', _('Transit relay'), _('Relay passed to connect; auto lets Surflare choose.'));
		o.placeholder = 'auto';
		o.value('auto');

		o = s.taboption('general', form.Flag, 'fail_open', _('Fail open'),
			_('Open the kill switch after repeated login failures (traffic then leaves without the tunnel). Off keeps it closed.'));
		o.default = '0';

		o = s.taboption('general', form.ListValue, 'ipv6', _('IPv6'), _('Block IPv6, or send it through the tunnel.'));
		o.value('block', _('Block'));
		o.value('proxy', _('Through the tunnel'));
		o.default = 'block';

		duration(s, 'rotation', 'check_interval', _('Check interval'), _('Health check period while healthy.'), '30');
		duration(s, 'rotation', 'degraded_interval', _('Degraded interval'), _('Health check period after a failed check.'), '10');
		integer(s, 'rotation', 'fail_threshold', _('Fail threshold'), _('Failed checks in a row before reconnecting.'), '4', 'range(1,1000)');
		integer(s, 'rotation', 'cascade_after', _('Cascade after'), _('Failed reconnects before rotating fast through the candidates.'), '2', 'range(1,100)');
		duration(s, 'rotation', 'storm_cooldown', _('Storm cooldown'), _('Pause after every candidate failed.'), '600');
		duration(s, 'rotation', 'reconnect_window', _('Longest reconnect wait'), _('Cap of the wait between reconnects over the limit.'), '600');
		integer(s, 'rotation', 'reconnect_limit', _('Reconnect limit'), _('Reconnects in a row without a lasting tunnel before each next one waits longer (30 s, 1, 2, 4 min, … up to the longest wait); 0 = no limit.'), '6', 'range(0,1000)');
		duration(s, 'rotation', 'heartbeat_interval', _('Heartbeat'), _('Period of the "VPN healthy" log line; 0 = never.'), '600');
		duration(s, 'rotation', 'probe_timeout', _('Probe timeout'), null, '5');
		duration(s, 'rotation', 'domestic_confirm', _('Domestic exit confirmation'), _('Wait before confirming that traffic leaves without the tunnel.'), '3');
		o = s.taboption('rotation', form.Value, 'expected_country', _('Expected exit country'), _('Two-letter code of a healthy exit.'));
		o.placeholder = 'US';
		o.validate = function(id, v) { return !v || /^[A-Z]{2}$/.test(v) || _('Expecting a two-letter country code like US'); };

		o = s.taboption('network', form.Value, 'lan_interface', _('LAN bridge'));
		o.placeholder = 'br-lan';
		o = s.taboption('network', form.Value, 'wan_device', _('WAN device'), _('Empty: the device of the default route.'));
		o.rmempty = true;
		o = s.taboption('network', form.DynamicList, 'lan_subnet', _('LAN subnets'), _('Empty: the addresses of the LAN bridge.'));
		o.datatype = 'cidr';
		o = s.taboption('network', form.DynamicList, 'endpoint', _('Extra allowed endpoints'),
			_('Addresses the kill switch lets through while reconnecting (relays, account API).'));
		o.datatype = 'or(ipaddr,cidr)';

		// --- credentials ----------------------------------------------------------
		// The username is UCI main.username. The password never touches UCI:
		// it goes to the daemon over ubus (set_credentials) and is never read
		// back; the page only says whether the daemon has one.
		s = singleton(m, 'surflare', _('Credentials'),
			_('The Surflare account the watchdog logs in with when the session expires.'));

		o = s.option(form.Value, 'username', _('Account e-mail'));
		o.datatype = 'string';
		o.rmempty = true;
		o.validate = validUsername;

		if (cred) {
			o = s.option(form.DummyValue, '_password_state', _('Stored password'));
			o.cfgvalue = function() {
				var t = cred.present ? _('stored') : _('not set');
				return cred.problem ? t + ' – ' + cred.problem : t;
			};
		}

		o = s.option(form.Value, '_password', _('New password'),
			_('Write-only: sent to the daemon, which keeps it in a file only root can read. Leave empty to keep the stored password.'));
		o.password = true;
		o.rmempty = true;
		o.validate = validPassword;
		o.load = function() { return null; };        // never read back
		o.cfgvalue = function() { return null; };
		o.remove = function() {};                    // empty: keep the stored one
		// The username goes with the form's other options, through uci and
		// Save & Apply; set_credentials gets an empty one, which keeps the
		// daemon's hands off /etc/config/surflare (it would commit the name
		// behind LuCI's back, and Apply then finds nothing to apply).
		o.write = function(section_id, value) {
			return callSetCredentials('', value).then(function(reply) {
				cred = credentialState(reply) || cred;
				ui.addNotification(null, E('p', _('The new password was handed to the watchdog.')), 'info');
			});
		};

		// --- probes -------------------------------------------------------------
		s = m.section(form.GridSection, 'probe', _('Probe targets'),
			_('Health probes. The tunnel probes run in parallel and the first success wins. These sections replace the built-in list.'));
		s.addremove = true;
		s.anonymous = false;
		s.nodescriptions = true;
		o = s.option(form.ListValue, 'kind', _('Kind'));
		o.value('search', _('search (2xx)'));
		o.value('cdn-trace', _('CDN trace'));
		o.value('ip-echo', _('IP echo (JSON)'));
		o.value('proxy-path', _('LAN/proxy path'));
		o = s.option(form.Value, 'url', _('URL'));
		o.datatype = 'string';
		o.validate = function(id, v) { return /^https?:\/\/[^\s\/]+/.test(v || '') || _('Expecting an http:// or https:// URL'); };

		// --- bypass devices -----------------------------------------------------
		s = m.section(form.GridSection, 'bypass', _('Bypass devices'), _('LAN devices that never use the tunnel.'));
		s.addremove = true;
		s.anonymous = true;
		o = s.option(form.Value, 'name', _('Name'));
		o.rmempty = true;
		o = s.option(form.Value, 'mac', _('MAC address'));
		o.datatype = 'macaddr';
		o.rmempty = false;
		if (hosts)
			hosts.getMACHints(true).forEach(function(h) {
				o.value(h[0], h[1] ? '%s (%s)'.format(h[0], h[1]) : h[0]);
			});
		o = s.option(form.DynamicList, 'ip', _('Fixed addresses'), _('Only when matching by MAC is impossible.'));
		o.datatype = 'ipaddr';
		o.modalonly = true;

		// --- loop guard, auth, detectors, fast signals, web -----------------------
		s = singleton(m, 'loopguard', _('Loop guard'), _('Circuit breaker for proxy connection loops.'));
		integer(s, null, 'min_active', _('Minimum active connections'),
			_('In-flight proxy connections before the ratio is checked; 0 = default, below 0 = off.'), '1000', 'integer');
		integer(s, null, 'ratio', _('Ratio (%)'), _('Share of them to one destination that trips the breaker.'), '80', 'range(0,100)');

		s = singleton(m, 'auth', _('Login'));
		integer(s, null, 'login_retries', _('Login retries'), null, '5', 'range(1,100)');
		integer(s, null, 'fail_open_after', _('Fail open after'), _('Failed logins before fail-open (only with Fail open on).'), '5', 'range(1,1000)');
		duration(s, null, 'subscription_cooldown', _('Subscription cooldown'), _('No login attempts this long after "subscription not active".'), '3600');
		o = s.option(form.ListValue, 'login_mode', _('Password entry'));
		o.value('pty', _('At the prompt (never in the process list)'));
		o.value('argv', _('As an argument (fallback)'));
		o.default = 'pty';

		s = singleton(m, 'detector', _('Early detector'), _('Scores TCP health of tunnel sockets to catch a dead path early.'));
		o = s.option(form.Flag, 'enabled', _('Enabled'));
		o.default = '1';
		integer(s, null, 'threshold', _('Threshold'), _('Score that triggers an immediate check.'), '16', 'range(1,1000000)');

		s = singleton(m, 'loghealth', _('Log health'), _('Counts urltest errors per node in the proxy log.'));
		o = s.option(form.Flag, 'enabled', _('Enabled'));
		o.default = '1';
		integer(s, null, 'threshold', _('Errors'), _('More errors than this in the window marks a node dead.'), '10');
		duration(s, null, 'window', _('Window (minutes)'), null, '10');

		s = singleton(m, 'storm503', _('503 storm override'),
			_('A burst of HTTP 503 from the exit means the node is overloaded: rotate away from it.'));
		o = s.option(form.Flag, 'enabled', _('Enabled'), _('Off: no 503 monitor; 503s never trigger a check nor a rotation.'));
		o.default = '1';
		integer(s, null, 'count', _('503s'), _('503s within the window that trigger a rotation.'), '10', 'range(1,100000)');
		duration(s, null, 'window', _('Window'), null, '300');

		// The three signals depend on the section's switch; retain keeps
		// their own values in UCI while it is off (LuCI removes a hidden
		// option's value on save otherwise), so switching back on restores
		// them instead of turning every signal on.
		s = singleton(m, 'fastsignal', _('Fast signals'),
			_('Cheap events that ask for a health check at once instead of waiting for the check interval, and let a single failed check rotate. Off: the next regular check finds the fault.'));
		o = s.option(form.Flag, 'enabled', _('Enabled'), _('Off: none of the signals below runs.'));
		o.default = '1';
		[
			[ 'proxy_exit', _('Proxy exit'), _('The proxy process exiting.') ],
			[ 'node_log', _('Node errors in the proxy log'), _('Urltest errors of the node in use (needs Log health enabled).') ],
			[ 'counters', _('Drop counters'), _('Jumps of the kill switch\'s drops, strict direct\'s refusals and relay resets.') ]
		].forEach(function(f) {
			o = s.option(form.Flag, f[0], f[1], f[2]);
			o.default = '1';
			o.depends('enabled', '1');
			o.retain = true;
		});

		s = singleton(m, 'web', _('Live view and API'));
		o = s.option(form.Flag, 'enabled', _('Enabled'));
		o.default = '1';
		o = s.option(form.Value, 'listen', _('Listen address'), _('Empty: the LAN address.'));
		o.datatype = 'ipaddr';
		o.rmempty = true;
		o = s.option(form.Value, 'port', _('Port'));
		o.datatype = 'port';
		o.placeholder = '9099';

		return m.render();
	}
});
