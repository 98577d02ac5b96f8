// Live view of surflare-watchdog. No build step, no dependencies: it talks
// to the daemon's /api/v1 with a bearer token, streams over a websocket and
// falls back to polling while the websocket is down. Without a token it
// requests nothing and asks for one.
(function () {
  'use strict';

  var TOKEN_KEY = 'surflare.token';
  var POLL_MS = 5000;
  var RETRY_MAX_MS = 30000;
  var MAX_TIMELINE = 150;
  var MAX_LOG = 400;
  var base = location.pathname.replace(/[^/]*$/, '');

  var token = null;
  var ws = null;
  var retryMs = 1000;
  var retryTimer = null;
  var pollTimer = null;
  var seen = new Set();
  var status = null;

  function $(id) { return document.getElementById(id); }

  function el(tag, props, children) {
    var e = document.createElement(tag);
    if (props) Object.keys(props).forEach(function (k) {
      if (k === 'text') e.textContent = props[k]; else e.setAttribute(k, props[k]);
    });
    (children || []).forEach(function (c) { e.appendChild(c); });
    return e;
  }

  // --- token -------------------------------------------------------------

  // A token in the fragment (#token=…) is never sent to a server; it is
  // moved to sessionStorage and the fragment removed from the address bar.
  function takeToken() {
    var m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
    if (m) {
      sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(m[1]));
      history.replaceState(null, '', location.pathname + location.search);
    }
    return sessionStorage.getItem(TOKEN_KEY);
  }

  function askToken(msg) {
    stopAll();
    token = null;
    sessionStorage.removeItem(TOKEN_KEY);
    $('main').hidden = true;
    $('btn-forget').hidden = true;
    $('updated').textContent = '';
    $('auth').hidden = false;
    $('auth-msg').textContent = msg || '';
    setConn('idle', 'not connected');
    $('token-input').focus();
  }

  function start(tok) {
    token = tok;
    $('auth').hidden = true;
    $('main').hidden = false;
    $('btn-forget').hidden = false;
    poll();
    connect();
  }

  function stopAll() {
    if (ws) { ws.onclose = null; ws.close(); ws = null; }
    clearTimeout(retryTimer);
    clearInterval(pollTimer);
    pollTimer = null;
  }

  // --- HTTP --------------------------------------------------------------

  function request(method, path, body) {
    var opts = { method: method, cache: 'no-store', headers: { Authorization: 'Bearer ' + token } };
    if (body !== undefined) {
      opts.headers['Content-Type'] = 'application/json';
      opts.body = JSON.stringify(body);
    }
    return fetch(base + 'api/v1/' + path, opts).then(function (r) {
      if (r.status === 401) {
        askToken('The token was refused (expired or wrong).');
        throw new Error('token refused');
      }
      return r.json().catch(function () { return {}; }).then(function (j) {
        if (r.status === 429) throw new Error('too many failed attempts; wait a minute');
        if (!r.ok) throw new Error(j.error || ('HTTP ' + r.status));
        return j;
      });
    });
  }

  function poll() {
    if (!token) return;
    Promise.all([request('GET', 'status'), request('GET', 'nodes'), request('GET', 'events?n=100')])
      .then(function (r) {
        renderStatus(r[0]);
        renderNodes(r[1]);
        (r[2].events || []).forEach(handle);
      })
      .catch(function (e) { if (token) setConn('error', 'error: ' + e.message); });
  }

  function startPolling() {
    if (!pollTimer) pollTimer = setInterval(poll, POLL_MS);
  }

  // --- websocket -----------------------------------------------------------

  // The token travels as a websocket subprotocol (browsers cannot set
  // headers on a websocket); the server answers with surflare.v1 only.
  function connect() {
    if (!token || ws) return;
    var url = (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + base + 'api/v1/ws';
    var opened = false;
    try {
      ws = new WebSocket(url, ['surflare.v1', 'bearer.' + token]);
    } catch (e) {
      ws = null;
      reconnectLater();
      return;
    }
    ws.onopen = function () {
      opened = true;
      retryMs = 1000;
      clearInterval(pollTimer);
      pollTimer = null;
      setConn('live', 'live');
    };
    ws.onmessage = function (e) {
      try { handle(JSON.parse(e.data)); } catch (err) { /* a bad frame is skipped */ }
    };
    ws.onclose = function () {
      ws = null;
      if (!token) return;
      setConn(opened ? 'reconnecting' : 'polling', opened ? 'reconnecting…' : 'polling');
      startPolling();
      if (!opened) poll(); // tells a refused token (401) from a missing stream
      reconnectLater();
    };
  }

  function reconnectLater() {
    clearTimeout(retryTimer);
    retryTimer = setTimeout(connect, retryMs);
    retryMs = Math.min(retryMs * 2, RETRY_MAX_MS);
  }

  function setConn(state, text) {
    var c = $('conn');
    c.dataset.conn = state;
    c.textContent = text;
  }

  // --- events ------------------------------------------------------------

  function handle(msg) {
    if (!msg || !msg.kind) return;
    if (msg.kind === 'snapshot') {
      var d = msg.data || {};
      if (d.status) renderStatus(d.status);
      if (d.nodes) renderNodes(d.nodes);
      (d.events || []).forEach(handle);
      return;
    }
    // A transition carries its own time (at); the status's
    // last_transitions and the stream then name the same one alike.
    var d0 = msg.data || {};
    var key = msg.kind + '|' + (d0.at || msg.time) + '|' + JSON.stringify(d0);
    if (seen.has(key)) return;
    if (seen.size > 5000) seen.clear();
    seen.add(key);
    if (msg.kind === 'log') addLog(msg); else addTimeline(msg);
  }

  // A time the daemon never set is Go's zero time (0001-01-01T00:00:00Z);
  // any year before 1970 is taken as that, and shown as "never" rather
  // than as a clock time (which would be midnight, or an odd local-mean-time
  // offset such as 08:05:43).
  function isZeroTime(t) {
    var ms = typeof t === 'number' ? t : Date.parse(t);
    return !isNaN(ms) && ms < 0;
  }

  function clock(t) {
    if (t === null || t === undefined || t === '') return '';
    if (isZeroTime(t)) return 'never';
    var d = new Date(t);
    return isNaN(d) ? '' : d.toLocaleTimeString([], { hour12: false });
  }

  // A value in an RFC 3339 form, as Go marshals a time.Time.
  var TIME_RE = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d/;

  function describe(msg) {
    var d = msg.data || {};
    switch (msg.kind) {
      case 'transition':
        return [(d.from || '?') + ' → ' + (d.to || '?') + (d.reason ? ' (' + d.reason + ')' : ''),
          /healthy/.test(d.to) ? 'ok' : /degraded|connecting|cooldown|diag/.test(d.to) ? 'warn' : 'bad'];
      case 'rotation':
        return ['node ' + (d.from || '?') + ' → ' + (d.to || '?') + (d.reason ? ' (' + d.reason + ')' : ''), 'warn'];
      case 'health':
        var ok = d.outcome === 'OK' || d.outcome === 'TUNNEL_OK';
        var exit = d.exit_ip ? ' · exit ' + d.exit_ip + (d.exit_country ? ' ' + d.exit_country : '') : '';
        return [(d.outcome || 'check') + (d.reason ? ': ' + d.reason : '') + exit, ok ? 'ok' : 'bad'];
      case 'signal':
        return [(d.name || 'signal') + ': ' + (d.state || '') + (d.detail ? ' – ' + d.detail : ''),
          d.state === 'ok' ? 'ok' : 'warn'];
      default:
        return [JSON.stringify(d), ''];
    }
  }

  // Rows are kept newest first by event time (history, snapshots and the
  // stream may arrive out of order). A run of identical results (the
  // healthy check every 30 s) is one row with a count, so transitions and
  // failures stay in view.
  function addTimeline(msg) {
    var t = describe(msg);
    var ts = Date.parse(msg.time) || 0;
    var list = $('timeline');
    var older = list.firstChild;
    while (older && Number(older.dataset.ts) > ts) older = older.nextSibling;
    if (older && older.dataset.kind === msg.kind && older.dataset.text === t[0]) {
      var n = Number(older.dataset.count || 1) + 1;
      older.dataset.count = n;
      older.dataset.ts = ts; // still no newer than the row above it
      older.querySelector('time').textContent = clock(msg.time);
      older.querySelector('.count').textContent = ' ×' + n;
      return;
    }
    var li = el('li', { 'data-kind': msg.kind, 'data-text': t[0], 'data-ts': ts }, [
      el('time', { datetime: msg.time, text: clock(msg.time) }),
      el('span', { 'class': 'kind ' + t[1], text: msg.kind }),
      el('span', { 'class': 'text', text: t[0] }, [el('span', { 'class': 'count' })])
    ]);
    list.insertBefore(li, older);
    while (list.children.length > MAX_TIMELINE) list.removeChild(list.lastChild);
  }

  function addLog(msg) {
    var d = msg.data || {};
    var pre = $('log');
    var atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    pre.appendChild(document.createTextNode(clock(msg.time) + ' ' + (d.level || 'INFO') + ' ' + (d.message || '') + '\n'));
    while (pre.childNodes.length > MAX_LOG) pre.removeChild(pre.firstChild);
    if (atEnd) pre.scrollTop = pre.scrollHeight;
  }

  // --- rendering -----------------------------------------------------------

  function duration(s) {
    if (typeof s !== 'number') return '–';
    var d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60);
    return d ? d + 'd ' + h + 'h' : h ? h + 'h ' + m + 'm' : m + 'm ' + Math.floor(s % 60) + 's';
  }

  function renderStatus(st) {
    status = st || {};
    var s = $('state');
    s.textContent = status.state || '–';
    s.dataset.state = status.state || '';
    $('node').textContent = status.node || '–';
    $('transit').textContent = status.transit || '–';
    var exit = status.exit || {};
    $('exit').textContent = exit.ip ? exit.ip + (exit.country ? ' (' + exit.country + ')' : '') : '–';
    var c = status.counters || {};
    $('checks').textContent = c.checks !== undefined ? c.checks + ' / ' + (c.failed_checks || 0) + ' failed' : '–';
    $('uptime').textContent = duration(status.uptime_s);
    $('updated').textContent = 'updated ' + clock(status.updated_at || Date.now());
    var diag = !!(status.signals && status.signals.diag);
    var b = $('btn-diag');
    b.dataset.diag = diag ? 'on' : 'off';
    b.textContent = diag ? 'Diag off' : 'Diag on';
    renderSignals(status.signals || {});
    if (status.last_transitions && !$('timeline').children.length) {
      status.last_transitions.forEach(function (t) { handle({ time: t.at, kind: 'transition', data: t }); });
    }
  }

  function renderSignals(sig) {
    var rows = [
      ['diagnostics', sig.diag ? 'on' : 'off', sig.diag ? 'bad' : 'ok'],
      ['WAN', sig.wan_down ? 'down' : 'up', sig.wan_down ? 'bad' : 'ok'],
      ['login', sig.auth ? sig.auth.state : '–', sig.auth && sig.auth.state !== 'ok' ? 'bad' : 'ok']
    ];
    // A zero time here ("never") is no cooldown, not an alarm.
    if (sig.storm_cooldown_until) rows.push(['storm cooldown until', clock(sig.storm_cooldown_until),
      isZeroTime(sig.storm_cooldown_until) ? 'ok' : 'bad']);
    if (sig.rate_limited_until) rows.push(['rate limited until', clock(sig.rate_limited_until),
      isZeroTime(sig.rate_limited_until) ? 'ok' : 'bad']);
    var lg = loopGuard(status);
    var lgShown = false;
    (sig.detectors || []).forEach(function (d) {
      var text = d.state + (d.detail ? ' – ' + d.detail : '');
      if (d.name === 'loopguard' && lg) { text += ' · ' + lg; lgShown = true; }
      rows.push([d.name, text, d.state === 'ok' || d.state === 'closed' ? 'ok' : 'bad']);
    });
    if (lg && !lgShown) rows.push(['loopguard', lg, 'ok']);
    var ul = $('signals');
    ul.textContent = '';
    rows.forEach(function (r) {
      ul.appendChild(el('li', { 'data-signal': r[0] }, [el('span', { text: r[0] }), el('span', { 'class': 'v ' + r[2], text: r[1] })]));
    });
  }

  // loopGuard says how the loop guard is woken (events: the kernel's NFLOG
  // wake-ups; poll: the 100 ms fallback) and how many gate checks it made,
  // from the daemon's part of the status; '' when the daemon does not say.
  function loopGuard(st) {
    var g = st && st.daemon && st.daemon.loopguard;
    if (!g || (!g.mode && g.checks === undefined)) return '';
    var parts = [];
    if (g.enabled === false) parts.push('disabled');
    else parts.push('mode ' + (g.mode || 'not started'));
    if (typeof g.checks === 'number') parts.push(g.checks + ' checks');
    return parts.join(', ');
  }

  // nodes may be an array of rows or {nodes: [...]}; columns are whatever
  // the rows carry, node first, so the table follows the daemon.
  function renderNodes(nodes) {
    var rows = Array.isArray(nodes) ? nodes : (nodes && (nodes.nodes || nodes.candidates)) || [];
    var cols = ['node'];
    rows.forEach(function (r) { Object.keys(r).forEach(function (k) { if (cols.indexOf(k) < 0) cols.push(k); }); });
    var head = el('tr', null, cols.map(function (c) { return el('th', { text: c.replace(/_/g, ' ') }); }));
    var body = rows.map(function (r) {
      return el('tr', { 'class': r.current ? 'current' : '', 'data-node': r.node || '' }, cols.map(function (c) {
        var v = r[c];
        if (c === 'current') return el('td', { text: v ? '●' : '' });
        if (typeof v === 'boolean') {
          var good = v === (c !== 'dead' && c !== 'failed');
          return el('td', { 'class': good ? '' : 'no', text: v ? 'yes' : 'no' });
        }
        if (typeof v === 'string' && TIME_RE.test(v)) return el('td', { text: clock(v) });
        return el('td', { text: v === undefined || v === null ? '' : String(v) });
      }));
    });
    var table = el('table', null, [el('thead', null, [head]), el('tbody', null, body)]);
    var box = $('nodes');
    box.textContent = '';
    box.appendChild(table);

    var sel = $('rotate-node');
    var keep = sel.value;
    while (sel.options.length > 1) sel.remove(1);
    rows.forEach(function (r) { if (r.node) sel.add(new Option(r.node + (r.current ? ' (current)' : ''), r.node)); });
    sel.value = keep;
    if (sel.selectedIndex < 0) sel.value = '';
  }

  // --- actions -------------------------------------------------------------

  function action(button, path, body, done) {
    var msg = $('action-msg');
    button.disabled = true;
    msg.className = 'msg';
    msg.textContent = path + '…';
    request('POST', path, body).then(function () {
      msg.textContent = path + ' requested';
      if (!ws) poll();
    }).catch(function (e) {
      msg.className = 'msg error';
      msg.textContent = path + ': ' + e.message;
    }).then(function () {
      button.disabled = false;
      if (done) done();
    });
  }

  function init() {
    $('token-form').addEventListener('submit', function (e) {
      e.preventDefault();
      var t = $('token-input').value.trim();
      if (!t) return;
      $('token-input').value = '';
      sessionStorage.setItem(TOKEN_KEY, t);
      start(t);
    });
    $('btn-forget').addEventListener('click', function () { askToken(''); });
    $('btn-check').addEventListener('click', function (e) { action(e.target, 'check'); });
    $('btn-rotate').addEventListener('click', function (e) {
      action(e.target, 'rotate', { node: $('rotate-node').value });
    });
    $('btn-diag').addEventListener('click', function (e) {
      action(e.target, 'diag', { enable: e.target.dataset.diag !== 'on' });
    });
    var t = takeToken();
    if (t) start(t); else askToken('');
  }

  init();
}());
