'use strict';
'require view';
'require rpc';
'require poll';
'require ui';

// Live status of surflare-watchdog, on LuCI's own origin (http and https
// alike, no other port, certificate or token; docs/luci-live.md): a long
// poll of `surflare events {since, wait}` through rpc, which answers as
// soon as the daemon has an event (its ubus notifications: state, health,
// log). While that fails (daemon not running) the page polls `surflare
// status`. Commands always go through rpc, so the ACL's write split
// applies to them; a read-only user gets them disabled.

// nobatch: a waiting call must not hold other calls of its batch back
var callEvents = rpc.declare({ object: 'surflare', method: 'events', params: ['since', 'wait'], nobatch: true });
var callStatus = rpc.declare({ object: 'surflare', method: 'status', expect: { '': {} } });
var callNodes = rpc.declare({ object: 'surflare', method: 'nodes', expect: { '': {} } });
var callCheck = rpc.declare({ object: 'surflare', method: 'check' });
var callRotate = rpc.declare({ object: 'surflare', method: 'rotate', params: ['node'] });
var callDiag = rpc.declare({ object: 'surflare', method: 'diag', params: ['enable'] });
var callHistory = rpc.declare({ object: 'surflare', method: 'history', params: ['span', 'buckets'], expect: { '': {} } });

// ago: how old a time is, for a person ("12 s ago"); '' for none or Go's
// zero time.
function ago(t) {
	var ms = Date.parse(t);
	if (!t || isNaN(ms) || ms < 0) return '';
	var s = Math.max(0, Math.round((Date.now() - ms) / 1000));
	if (s < 90) return _('%d s ago').format(s);
	if (s < 5400) return _('%d min ago').format(Math.round(s / 60));
	return _('%d h ago').format(Math.round(s / 3600));
}

// stale: the last check is older than 2.5 check intervals (and 10 s): the
// values it gave (exit, WAN) are not known to hold any more.
function stale(st) {
	var lc = st.last_check, every = st.check_interval_s > 0 ? st.check_interval_s : 60;
	var ms = lc ? Date.parse(lc.at) : NaN;
	return isNaN(ms) || ms < 0 || (Date.now() - ms) / 1000 > 2.5 * every + 10;
}

var MAX_TIMELINE = 100;
// How long the daemon may hold a call to events (below LuCI's rpc timeout).
var EVENTS_WAIT = 15;
// How long a burst of notifications (a rotation is several) is gathered
// before the status and nodes are read again.
var REFRESH_MS = 300;
var MAX_LOG = 200;

// nodeRows accepts the nodes reply as an array or {nodes: [...]}.
function nodeRows(reply) {
	if (Array.isArray(reply)) return reply;
	return (reply && (reply.nodes || reply.candidates)) || [];
}

// A time the daemon never set is Go's zero time (0001-01-01T00:00:00Z);
// any year before 1970 is taken as that and shown as "never", not as a
// clock time.
function clock(t) {
	if (t == null || t === '') return '';
	var ms = typeof t === 'number' ? t : Date.parse(t);
	if (isNaN(ms)) return '';
	if (ms < 0) return _('never');
	return new Date(ms).toLocaleTimeString([], { hour12: false });
}

// loopGuard says how the loop guard is woken (events: the kernel's NFLOG
// wake-ups; poll: the 100 ms fallback) and how many gate checks it made,
// from the daemon's part of the status; '' when the daemon does not say.
function loopGuard(st) {
	var g = st && st.daemon && st.daemon.loopguard;
	if (!g || (!g.mode && g.checks == null)) return '';
	var parts = [ g.enabled === false ? _('disabled') : _('mode %s').format(g.mode || _('not started')) ];
	if (typeof g.checks === 'number') parts.push(_('%d checks').format(g.checks));
	return parts.join(', ');
}

function duration(s) {
	if (typeof s !== 'number') return '-';
	var d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60);
	return d ? '%dd %dh'.format(d, h) : h ? '%dh %dm'.format(h, m) : '%dm %ds'.format(m, Math.floor(s % 60));
}

function describe(kind, d) {
	d = d || {};
	switch (kind) {
	case 'transition':
		return '%s → %s%s'.format(d.from || '?', d.to || '?', d.reason ? ' (' + d.reason + ')' : '');
	case 'rotation':
		return _('node %s → %s').format(d.from || '?', d.to || '?') + (d.reason ? ' (' + d.reason + ')' : '');
	case 'health':
		return (d.outcome || 'check') + (d.reason ? ': ' + d.reason : '') +
			(d.exit_ip ? ' · ' + _('exit') + ' ' + d.exit_ip + ' ' + (d.exit_country || '') : '');
	case 'signal':
		return (d.name || 'signal') + ': ' + (d.state || '') + (d.detail ? ' – ' + d.detail : '');
	default:
		return JSON.stringify(d);
	}
}

return view.extend({
	live: false,
	writable: true,
	retryMs: 2000,
	seen: null,
	diag: false,

	load: function() {
		return Promise.all([
			L.resolveDefault(callStatus(), {}),
			L.resolveDefault(callNodes(), {})
		]);
	},

	render: function(data) {
		this.seen = {};
		// false: the session has the read ACL only (null: no ACL at all,
		// then rpcd refuses the calls anyway)
		this.writable = L.hasViewPermission() !== false;
		var act = L.bind(function(attrs) {
			if (!this.writable) {
				attrs.disabled = '';
				attrs.title = _('Read-only access');
			}
			return attrs;
		}, this);
		var box = function(id) { return E('strong', { 'id': id }, '-'); };
		var kv = function(label, id) {
			return E('div', { 'class': 'cbi-value' }, [
				E('label', { 'class': 'cbi-value-title' }, label),
				E('div', { 'class': 'cbi-value-field' }, box(id))
			]);
		};
		var view = E('div', { 'class': 'cbi-map' }, [
			E('h2', {}, _('Surflare')),
			E('div', { 'class': 'cbi-map-descr' }, [
				_('Live state of the VPN watchdog.'), ' ',
				E('span', { 'id': 'surflare-conn', 'class': 'label' }, _('connecting…'))
			]),
			// The daemon's one line for a person (status.why): the cause and
			// what to do; its codes go in the tooltip.
			E('div', { 'id': 'why', 'class': 'alert-message', 'style': 'display:none' }, ''),
			E('div', { 'class': 'cbi-section' }, [
				kv(_('State'), 'state'), kv(_('Node'), 'node'), kv(_('Transit'), 'transit'),
				kv(_('Exit'), 'exit'), kv(_('WAN'), 'wan'), kv(_('Last check'), 'last-check'),
				kv(_('Checks'), 'checks'), kv(_('Uptime'), 'uptime')
			]),
			// The daemon draws the strip (an inert SVG, the same the web UI
			// shows): outages red, node switches marked.
			E('div', { 'class': 'cbi-section' }, [
				E('h3', {}, _('Last hour')),
				E('div', { 'id': 'strip', 'style': 'max-width:60em' }, ''),
				E('p', { 'id': 'strip-summary', 'class': 'cbi-value-description' }, '')
			]),
			E('div', { 'class': 'cbi-section' }, [
				E('button', act({ 'id': 'btn-check', 'class': 'cbi-button cbi-button-action',
					'click': ui.createHandlerFn(this, 'handleCheck') }), _('Check now')), ' ',
				E('select', act({ 'id': 'rotate-node', 'class': 'cbi-input-select' }),
					[E('option', { 'value': '' }, _('next node'))]), ' ',
				E('button', act({ 'id': 'btn-rotate', 'class': 'cbi-button cbi-button-apply',
					'click': ui.createHandlerFn(this, 'handleRotate') }), _('Rotate')), ' ',
				E('button', act({ 'id': 'btn-diag', 'class': 'cbi-button cbi-button-neutral',
					'click': ui.createHandlerFn(this, 'handleDiag') }), _('Diag on'))
			]),
			E('div', { 'class': 'cbi-section' }, [
				E('h3', {}, _('Timeline')),
				E('table', { 'class': 'table', 'id': 'timeline' }, [])
			]),
			E('div', { 'class': 'cbi-section' }, [
				E('h3', {}, _('Nodes')),
				E('table', { 'class': 'table', 'id': 'nodes' }, [])
			]),
			E('div', { 'class': 'cbi-section' }, [
				E('h3', {}, _('Signals')),
				E('table', { 'class': 'table', 'id': 'signals' }, [])
			]),
			E('div', { 'class': 'cbi-section' }, [
				E('h3', {}, _('Log')),
				E('pre', { 'id': 'log', 'style': 'max-height:20em;overflow:auto;white-space:pre-wrap' }, '')
			])
		]);
		this.root = view;
		this.renderStatus(data[0]);
		this.renderNodes(data[1]);
		this.loadStrip();
		// Every value keeps its age true, live or not; the strip follows.
		window.setInterval(L.bind(function() { if (this.lastStatus) this.paintAges(this.lastStatus); }, this), 1000);
		window.setInterval(L.bind(this.loadStrip, this), 60000);

		poll.add(L.bind(function() {
			if (this.live) return Promise.resolve();
			return this.refresh();
		}, this), 5);
		this.connect();
		return view;
	},

	refresh: function() {
		return Promise.all([L.resolveDefault(callStatus(), null), L.resolveDefault(callNodes(), null)])
			.then(L.bind(function(r) {
				if (r[0]) this.renderStatus(r[0]);
				if (r[1]) this.renderNodes(r[1]);
			}, this));
	},

	// refreshSoon reads the status again once a burst of notifications is
	// over (they carry the event, not the whole state).
	refreshSoon: function() {
		if (this.refreshTimer) return;
		this.refreshTimer = window.setTimeout(L.bind(function() {
			this.refreshTimer = null;
			this.refresh();
		}, this), REFRESH_MS);
	},

	$: function(id) { return this.root.querySelector('#' + id); },

	setConn: function(text, ok) {
		var c = this.$('surflare-conn');
		c.textContent = text;
		c.setAttribute('data-conn', ok ? 'live' : 'polling');
		c.setAttribute('data-transport', ok ? this.transport : '');
		c.style.background = ok ? '#4caf50' : '#f0ad4e';
		c.style.color = '#fff';
	},

	// connect starts the long poll from the daemon's newest event, or polls
	// (and tries again later) while the daemon does not answer.
	connect: function() {
		L.resolveDefault(callEvents(0, 0), null).then(L.bind(function(r) {
			if (r && typeof r.last === 'number')
				return this.longPoll(r.last);
			this.setConn(_('polling'), false);
			this.retry();
		}, this));
	},

	// longPoll asks for the events after since until a call fails; each
	// answer comes as soon as there is one (or after EVENTS_WAIT seconds).
	longPoll: function(since) {
		this.live = true;
		this.transport = 'events';
		this.retryMs = 2000;
		this.setConn(_('live'), true);
		this.refresh();
		var fail = L.bind(function() {
			this.live = false;
			this.setConn(_('polling'), false);
			this.retry();
		}, this);
		// each answer starts the next call (no promise chain grows)
		var next = L.bind(function() {
			var asked = Date.now();
			callEvents(since, EVENTS_WAIT).then(L.bind(function(r) {
				if (!r || typeof r.last !== 'number') throw new Error('no events reply');
				if (r.reset || r.missed) this.refresh();
				var state = false;
				(r.events || []).forEach(L.bind(function(e) {
					this.notified(e.kind, e.time, e.data || {});
					if (e.kind !== 'log') state = true;
				}, this));
				if (state) this.refreshSoon();
				since = r.last;
				// an answer without waiting (the daemon's waiters are all
				// taken) must not turn into a tight loop
				if (!(r.events || []).length && Date.now() - asked < 1000)
					window.setTimeout(next, 2000);
				else
					next();
			}, this)).catch(fail);
		}, this);
		next();
	},

	// notified turns one of the daemon's notifications into the timeline's
	// or the log's entry: state carries a transition's members, health and
	// log their own.
	notified: function(kind, time, d) {
		if (kind === 'state')
			this.handle({ time: time, kind: 'transition', via: 'push', data: { from: d.from, to: d.state, reason: d.reason } });
		else
			this.handle({ time: time, kind: kind, via: 'push', data: d });
	},

	retry: function() {
		window.setTimeout(L.bind(this.connect, this), this.retryMs);
		this.retryMs = Math.min(this.retryMs * 2, 60000);
	},

	handle: function(msg) {
		if (!msg || !msg.kind) return;
		if (msg.kind === 'snapshot') {
			var d = msg.data || {};
			if (d.status) this.renderStatus(d.status);
			if (d.nodes) this.renderNodes(d.nodes);
			(d.events || []).forEach(L.bind(this.handle, this));
			return;
		}
		var data = msg.data || {};
		var key = msg.kind + '|' + (data.at || msg.time) + '|' + JSON.stringify(data);
		if (this.seen[key]) return;
		this.seen[key] = true;
		if (msg.kind === 'log') {
			var pre = this.$('log');
			pre.appendChild(document.createTextNode('%s %s %s\n'.format(clock(msg.time), data.level || 'INFO', data.message || '')));
			while (pre.childNodes.length > MAX_LOG) pre.removeChild(pre.firstChild);
			pre.scrollTop = pre.scrollHeight;
			return;
		}
		this.addTimeline(msg.time, msg.kind, describe(msg.kind, data), msg.via);
	},

	// Rows stay newest first by event time; a run of identical results
	// (the healthy check every 30 s) is one row with a count.
	addTimeline: function(time, kind, text, via) {
		var t = this.$('timeline');
		var ts = Date.parse(time) || 0;
		var older = t.firstChild;
		while (older && +older.getAttribute('data-ts') > ts) older = older.nextSibling;
		if (older && older.getAttribute('data-kind') === kind && older.getAttribute('data-text') === text) {
			var n = +(older.getAttribute('data-count') || 1) + 1;
			older.setAttribute('data-count', n);
			older.setAttribute('data-ts', ts);
			older.firstChild.textContent = clock(time);
			older.lastChild.textContent = text + ' ×' + n;
			if (via) older.setAttribute('data-via', via);
			return;
		}
		var row = E('tr', { 'class': 'tr', 'data-kind': kind, 'data-text': text, 'data-ts': ts, 'data-via': via || 'poll' }, [
			E('td', { 'class': 'td', 'style': 'width:6em' }, clock(time)),
			E('td', { 'class': 'td', 'style': 'width:7em' }, E('span', { 'class': 'label' }, kind)),
			E('td', { 'class': 'td' }, text)
		]);
		t.insertBefore(row, older);
		while (t.childNodes.length > MAX_TIMELINE) t.removeChild(t.lastChild);
	},

	loadStrip: function() {
		return L.resolveDefault(callHistory(3600, 60), null).then(L.bind(function(h) {
			if (!h || !h.svg) return;
			this.$('strip').innerHTML = h.svg;
			this.$('strip-summary').textContent = h.summary || '';
		}, this));
	},

	// paintAges shows the exit, the WAN and the last check with their ages,
	// and as unknown when the last check is too old or the WAN is down.
	paintAges: function(st) {
		var sig = st.signals || {}, lc = st.last_check, old = stale(st);
		var exit = st.exit || {};
		var exitText = exit.ip ? exit.ip + (exit.country ? ' (' + exit.country + ')' : '') : '-';
		var up = st.state === 'healthy' || st.state === 'degraded';
		if (exit.ip && (!up || old || sig.wan_down))
			this.$('exit').textContent = _('unknown (last seen %s, %s)').format(exitText, lc ? ago(lc.at) : '-');
		else
			this.$('exit').textContent = exitText + (exit.ip && lc ? ' · ' + _('checked %s').format(ago(lc.at)) : '');
		if (sig.wan_down) this.$('wan').textContent = _('down — check the modem');
		else if (old) this.$('wan').textContent = lc ? _('unknown (no check for %s)').format(ago(lc.at)) : _('unknown (not checked yet)');
		else this.$('wan').textContent = _('up · checked %s').format(ago(lc.at));
		var ok = lc && (lc.outcome === 'OK' || lc.outcome === 'TUNNEL_OK');
		this.$('last-check').textContent = lc ? (ok ? _('passed') : _('failed')) + ', ' + ago(lc.at) : _('none yet');
		this.$('last-check').title = lc ? (lc.outcome || '') + (lc.reason ? ': ' + lc.reason : '') : '';
	},

	renderStatus: function(st) {
		if (!st || !st.state) return;
		this.lastStatus = st;
		var why = this.$('why');
		if (st.why && st.why.line) {
			why.textContent = st.why.line;
			why.title = st.why.detail || '';
			why.className = 'alert-message ' + ({ ok: 'success', info: 'notice', warn: 'warning', action: 'error' }[st.why.severity] || 'notice');
			why.style.display = '';
		} else {
			why.style.display = 'none';
		}
		this.$('state').textContent = st.state;
		this.$('node').textContent = st.node || '-';
		this.$('transit').textContent = st.transit || '-';
		this.paintAges(st);
		var c = st.counters || {};
		this.$('checks').textContent = c.checks != null ? _('%d, %d failed').format(c.checks, c.failed_checks || 0) : '-';
		this.$('uptime').textContent = duration(st.uptime_s);
		var sig = st.signals || {};
		this.diag = !!sig.diag;
		this.$('btn-diag').textContent = this.diag ? _('Diag off') : _('Diag on');

		var rows = [[_('Diagnostics'), sig.diag ? _('on') : _('off')], [_('WAN'), sig.wan_down ? _('down') : _('up')],
			[_('Login'), sig.auth ? sig.auth.state : '-']];
		if (sig.storm_cooldown_until) rows.push([_('Storm cooldown until'), clock(sig.storm_cooldown_until)]);
		if (sig.rate_limited_until) rows.push([_('Rate limited until'), clock(sig.rate_limited_until)]);
		var lg = loopGuard(st), lgShown = false;
		(sig.detectors || []).forEach(function(d) {
			var text = d.state + (d.detail ? ' – ' + d.detail : '');
			if (d.name === 'loopguard' && lg) { text += ' · ' + lg; lgShown = true; }
			rows.push([d.name, text]);
		});
		if (lg && !lgShown) rows.push(['loopguard', lg]);
		var table = this.$('signals');
		table.textContent = '';
		rows.forEach(function(r) {
			table.appendChild(E('tr', { 'class': 'tr', 'data-signal': r[0] }, [E('td', { 'class': 'td' }, r[0]), E('td', { 'class': 'td' }, E('strong', {}, r[1]))]));
		});

		// While polling, the timeline shows the status's own history.
		if (!this.live)
			(st.last_transitions || []).forEach(L.bind(function(t) {
				this.handle({ time: t.at, kind: 'transition', data: t });
			}, this));
		if (!this.live && st.last_check)
			this.handle({ time: st.last_check.at, kind: 'health', data: st.last_check });
	},

	renderNodes: function(reply) {
		var rows = nodeRows(reply);
		var table = this.$('nodes');
		table.textContent = '';
		table.appendChild(E('tr', { 'class': 'tr table-titles' }, [
			E('th', { 'class': 'th' }, _('Node')), E('th', { 'class': 'th' }, _('Health')),
			E('th', { 'class': 'th' }, _('Latency')), E('th', { 'class': 'th' }, _('Log errors'))
		]));
		rows.forEach(function(r) {
			var healthy = r.healthy != null ? r.healthy : !r.dead;
			table.appendChild(E('tr', { 'class': 'tr', 'data-node': r.node }, [
				E('td', { 'class': 'td' }, r.current ? E('strong', {}, r.node + ' ●') : r.node),
				E('td', { 'class': 'td' }, healthy ? _('ok') : _('dead')),
				E('td', { 'class': 'td' }, r.latency_ms != null ? r.latency_ms + ' ms' : '-'),
				E('td', { 'class': 'td' }, r.log_errors != null ? String(r.log_errors) : '-')
			]));
		});
		var sel = this.$('rotate-node');
		var keep = sel.value;
		while (sel.options.length > 1) sel.remove(1);
		rows.forEach(function(r) { if (r.node) sel.appendChild(E('option', { 'value': r.node }, r.node)); });
		sel.value = keep;
	},

	command: function(call, args, what) {
		return call.apply(null, args).then(function() {
			ui.addNotification(null, E('p', _('%s requested').format(what)), 'info');
		}).catch(function(e) {
			ui.addNotification(null, E('p', _('%s failed: %s').format(what, e.message)), 'danger');
		});
	},

	handleCheck: function() { return this.command(callCheck, [], _('Check')); },
	handleRotate: function() { return this.command(callRotate, [this.$('rotate-node').value || undefined], _('Rotation')); },
	handleDiag: function() { return this.command(callDiag, [!this.diag], _('Diag')); },

	handleSaveApply: null,
	handleSave: null,
	handleReset: null
});
