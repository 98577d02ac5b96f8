'use strict';
'require view';
'require rpc';
'require poll';
'require ui';

// Exit nodes with their health as the watchdog sees them (`surflare nodes`),
// with a rotate action per node and a probe of one or every node (disabled
// for a session with the read ACL only: rpcd would refuse them).

var callNodes = rpc.declare({ object: 'surflare', method: 'nodes', expect: { '': {} } });
var callRotate = rpc.declare({ object: 'surflare', method: 'rotate', params: ['node'] });
var callProbe = rpc.declare({ object: 'surflare', method: 'probe', params: ['node'] });

function nodeRows(reply) {
	if (Array.isArray(reply)) return reply;
	return (reply && (reply.nodes || reply.candidates)) || [];
}

function yesNo(v) { return v == null ? '-' : v ? _('yes') : _('no'); }

return view.extend({
	load: function() {
		return L.resolveDefault(callNodes(), {});
	},

	render: function(reply) {
		this.writable = L.hasViewPermission() !== false;
		var table = E('table', { 'class': 'table', 'id': 'nodes' });
		this.table = table;
		this.fill(reply);
		poll.add(L.bind(function() {
			return L.resolveDefault(callNodes(), null).then(L.bind(function(r) { if (r) this.fill(r); }, this));
		}, this), 10);
		return E('div', { 'class': 'cbi-map' }, [
			E('h2', {}, _('Surflare nodes')),
			E('div', { 'class': 'cbi-map-descr' },
				_('Health of each exit node. Rotate connects to that node now; the watchdog keeps rotating by itself when a node fails.')),
			E('div', { 'class': 'cbi-section' }, [
				table,
				E('div', { 'class': 'right', 'style': 'margin-top:1em' }, [
					E('button', this.act({ 'class': 'cbi-button cbi-button-neutral',
						'click': ui.createHandlerFn(this, 'handleProbe', null) }), _('Probe all nodes'))
				])
			])
		]);
	},

	// act disables an action's button for a read-only session.
	act: function(attrs) {
		if (!this.writable) {
			attrs.disabled = '';
			attrs.title = _('Read-only access');
		}
		return attrs;
	},

	fill: function(reply) {
		var rows = nodeRows(reply);
		var t = this.table;
		t.textContent = '';
		t.appendChild(E('tr', { 'class': 'tr table-titles' }, [
			E('th', { 'class': 'th' }, _('Node')), E('th', { 'class': 'th' }, _('Current')),
			E('th', { 'class': 'th' }, _('Healthy')), E('th', { 'class': 'th' }, _('Latency')),
			E('th', { 'class': 'th' }, _('Log errors')), E('th', { 'class': 'th cbi-section-actions' }, '')
		]));
		if (!rows.length)
			t.appendChild(E('tr', { 'class': 'tr placeholder' }, E('td', { 'class': 'td' }, E('em', {}, _('No node information (is the watchdog running?)')))));
		rows.forEach(L.bind(function(r) {
			var healthy = r.healthy != null ? r.healthy : (r.dead != null ? !r.dead : null);
			t.appendChild(E('tr', { 'class': 'tr', 'data-node': r.node }, [
				E('td', { 'class': 'td' }, r.current ? E('strong', {}, r.node) : r.node),
				E('td', { 'class': 'td' }, r.current ? '●' : ''),
				E('td', { 'class': 'td' }, yesNo(healthy)),
				E('td', { 'class': 'td' }, r.latency_ms != null ? r.latency_ms + ' ms' : '-'),
				E('td', { 'class': 'td' }, r.log_errors != null ? String(r.log_errors) : '-'),
				E('td', { 'class': 'td cbi-section-actions' }, [
					E('button', this.act({ 'class': 'cbi-button cbi-button-apply', 'disabled': r.current ? '' : null,
						'click': ui.createHandlerFn(this, 'handleRotate', r.node) }), _('Rotate here')), ' ',
					E('button', this.act({ 'class': 'cbi-button cbi-button-neutral',
						'click': ui.createHandlerFn(this, 'handleProbe', r.node) }), _('Probe'))
				])
			]));
		}, this));
	},

	handleRotate: function(node) {
		return callRotate(node).then(L.bind(function() {
			ui.addNotification(null, E('p', _('Rotating to %s…').format(node)), 'info');
			return L.resolveDefault(callNodes(), null).then(L.bind(function(r) { if (r) this.fill(r); }, this));
		}, this)).catch(function(e) {
			ui.addNotification(null, E('p', _('Rotation failed: %s').format(e.message)), 'danger');
		});
	},

	handleProbe: function(node) {
		return callProbe(node || undefined).then(L.bind(function() {
			ui.addNotification(null, E('p', node ? _('Probing %s…').format(node) : _('Probing every node…')), 'info');
			return L.resolveDefault(callNodes(), null).then(L.bind(function(r) { if (r) this.fill(r); }, this));
		}, this)).catch(function(e) {
			ui.addNotification(null, E('p', _('Probe failed: %s').format(e.message)), 'danger');
		});
	},

	handleSaveApply: null,
	handleSave: null,
	handleReset: null
});
