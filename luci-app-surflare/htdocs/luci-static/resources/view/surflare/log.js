'use strict';
'require view';
'require rpc';
'require poll';
'require ui';

// The watchdog's own log (`surflare log {lines}`), refreshed every 5 s.

var callLog = rpc.declare({ object: 'surflare', method: 'log', params: ['lines'], expect: { '': {} } });

// logText accepts {lines: [...]} (strings or {time, level, message}) or
// {log: "..."}.
function logText(reply) {
	if (!reply) return '';
	if (typeof reply.log === 'string') return reply.log;
	return (reply.lines || []).map(function(l) {
		if (typeof l === 'string') return l;
		return [l.time || l.at || '', l.level || '', l.message || l.msg || ''].join(' ').trim();
	}).join('\n');
}

return view.extend({
	lines: 200,

	load: function() {
		return L.resolveDefault(callLog(this.lines), {});
	},

	render: function(reply) {
		var pre = E('pre', { 'id': 'log', 'style': 'max-height:40em;overflow:auto;white-space:pre-wrap;font-size:90%' }, logText(reply) || _('No log lines yet.'));
		this.pre = pre;
		var select = E('select', { 'class': 'cbi-input-select', 'change': L.bind(function(ev) {
			this.lines = +ev.target.value;
			return this.refresh();
		}, this) }, [100, 200, 500, 1000].map(L.bind(function(n) {
			return E('option', { 'value': n, 'selected': n === this.lines ? '' : null }, n);
		}, this)));
		poll.add(L.bind(this.refresh, this), 5);
		window.requestAnimationFrame(function() { pre.scrollTop = pre.scrollHeight; });
		return E('div', { 'class': 'cbi-map' }, [
			E('h2', {}, _('Surflare log')),
			E('div', { 'class': 'cbi-map-descr' }, [_('Last lines of the watchdog log:'), ' ', select]),
			E('div', { 'class': 'cbi-section' }, pre)
		]);
	},

	refresh: function() {
		return L.resolveDefault(callLog(this.lines), null).then(L.bind(function(reply) {
			if (!reply) return;
			var pre = this.pre;
			var atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
			pre.textContent = logText(reply) || _('No log lines yet.');
			if (atEnd) pre.scrollTop = pre.scrollHeight;
		}, this));
	},

	handleSaveApply: null,
	handleSave: null,
	handleReset: null
});
