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
  var lastNews = 0;
  var tickTimer = null;
  var stripSoonTimer = null;

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
    loadStrip();
    clearInterval(tickTimer);
    tickTimer = setInterval(tick, 1000);
    clearInterval(stripTimer);
    stripTimer = setInterval(loadStrip, 60000);
  }

  // tick keeps every age on the page true, and says so when the page
  // itself has heard nothing for a while (a stream that silently died).
  function tick() {
    if (!status) return;
    paintStatus();
    if (ws && lastNews && Date.now() - lastNews > 45000) setConn('stale', 'no news for ' + ago(new Date(lastNews).toISOString()).replace(' ago', ''));
    else if (ws && $('conn').dataset.conn === 'stale') setConn('live', 'live');
  }

  function stripSoon() {
    clearTimeout(stripSoonTimer);
    stripSoonTimer = setTimeout(loadStrip, 1500);
  }

  function stopAll() {
    if (ws) { ws.onclose = null; ws.close(); ws = null; }
    clearTimeout(retryTimer);
    clearInterval(pollTimer);
    pollTimer = null;
    clearInterval(tickTimer);
    clearInterval(stripTimer);
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
        lastNews = Date.now();
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
    lastNews = Date.now();
    if (msg.kind === 'transition' || msg.kind === 'rotation') stripSoon();
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

  // describe turns an event into a timeline row in plain words, with a
  // colour: green for recovery, amber for what the watchdog is handling,
  // red only when the household is offline.
  function describe(msg) {
    var d = msg.data || {};
    switch (msg.kind) {
      case 'transition':
        var to = STATE_WORDS[d.to] || d.to || '?';
        return [to + (d.reason ? ' (' + plain(d.reason) + ')' : ''),
          /healthy/.test(d.to) ? 'ok' : /disconnected|wan_down|auth_failed|fail_open|subscription|stopped/.test(d.to) ? 'bad' : 'warn',
          (d.from || '?') + ' → ' + (d.to || '?') + (d.reason ? ': ' + d.reason : '')];
      case 'rotation':
        return ['switched node ' + (d.from || '?') + ' → ' + (d.to || '?') + (d.reason ? ' (' + plain(d.reason) + ')' : ''), 'warn', d.reason || ''];
      case 'health':
        var ok = d.outcome === 'OK' || d.outcome === 'TUNNEL_OK';
        var exit = d.exit_ip ? ' · exit ' + d.exit_ip + (d.exit_country ? ' ' + d.exit_country : '') : '';
        return [(ok ? 'check passed' : 'check failed: ' + (OUTCOME_WORDS[d.outcome] || d.outcome || '')) +
          (d.reason && !ok ? ' – ' + plain(d.reason) : '') + exit, ok ? 'ok' : 'warn', (d.outcome || '') + (d.reason ? ': ' + d.reason : '')];
      case 'signal':
        return [(d.name || 'signal') + ': ' + (d.state || '') + (d.detail ? ' – ' + plain(d.detail) : ''),
          d.state === 'ok' ? 'ok' : 'warn', ''];
      default:
        return [JSON.stringify(d), '', ''];
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
      el('span', { 'class': 'text', text: t[0], title: t[2] || '' }, [el('span', { 'class': 'count' })])
    ]);
    list.insertBefore(li, older);
    while (list.children.length > MAX_TIMELINE) list.removeChild(list.lastChild);
  }

  function addLog(msg) {
    var d = msg.data || {};
    var pre = $('log');
    var atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    var extra = '';
    if (d.fields) Object.keys(d.fields).forEach(function (k) { extra += ' ' + k + '=' + JSON.stringify(d.fields[k]); });
    pre.appendChild(document.createTextNode(clock(msg.time) + ' ' + (d.level || 'INFO') + ' ' + (d.message || '') + extra + '\n'));
    while (pre.childNodes.length > MAX_LOG) pre.removeChild(pre.firstChild);
    if (atEnd) pre.scrollTop = pre.scrollHeight;
  }

  // --- rendering -----------------------------------------------------------

  function duration(s) {
    if (typeof s !== 'number') return '–';
    var d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60);
    return d ? d + 'd ' + h + 'h' : h ? h + 'h ' + m + 'm' : m + 'm ' + Math.floor(s % 60) + 's';
  }

  // ago says how old a time is, in words a person reads at a glance:
  // "12 s ago", "4 min ago", "2 h ago"; "never" for Go's zero time.
  function ago(t, now) {
    if (t === null || t === undefined || t === '') return '';
    if (isZeroTime(t)) return 'never';
    var ms = (now || Date.now()) - Date.parse(t);
    if (isNaN(ms)) return '';
    var s = Math.max(0, Math.round(ms / 1000));
    if (s < 90) return s + ' s ago';
    if (s < 5400) return Math.round(s / 60) + ' min ago';
    if (s < 172800) return Math.round(s / 3600) + ' h ago';
    return Math.round(s / 86400) + ' days ago';
  }

  function ageS(t, now) {
    if (!t || isZeroTime(t)) return Infinity;
    var ms = (now || Date.now()) - Date.parse(t);
    return isNaN(ms) ? Infinity : ms / 1000;
  }

  // States in plain words. The codes stay in the element's data-state (and
  // the CSS keys off them); people read these.
  var STATE_WORDS = {
    healthy: 'working', degraded: 'working, with trouble', connecting: 'connecting…',
    disconnected: 'offline (kill switch on)', wan_down: 'WAN down', auth_wait: 'logging in…',
    auth_failed: 'login failed', storm_cooldown: 'waiting to retry', diag: 'diagnostics (paused)',
    starting: 'starting…', fail_open: 'unprotected (kill switch off)',
    subscription_inactive: 'subscription inactive', stopped: 'stopped',
    blocked: 'cannot connect (see above)'
  };

  // Health outcomes and engine reasons as a household reads them; the code
  // itself goes into the row's tooltip.
  var OUTCOME_WORDS = {
    OK: 'working', TUNNEL_OK: 'the VPN works', DOMESTIC_EXIT: 'traffic left through the local ISP, not the VPN',
    PROXY_BROKEN: 'the VPN program on the router is not passing LAN traffic',
    LOCAL_FAIL: 'a problem on the router itself (not the VPN server)'
  };

  function plain(text) {
    return String(text || '')
      .replace(/G2: 503 storm override/g, 'the VPN server keeps refusing requests')
      .replace(/local plumbing broken/g, 'the router\'s own VPN setup broke')
      .replace(/local plumbing up/g, 'the router\'s VPN setup is in place')
      .replace(/\bProbe 7\b/g, 'the LAN-path test')
      .replace(/\bprobe 7\b/g, 'the LAN-path test')
      .replace(/\b(LOCAL_FAIL|PROXY_BROKEN|DOMESTIC_EXIT|TUNNEL_OK)\b/g, function (c) { return OUTCOME_WORDS[c] || c; });
  }

  // A check older than this many intervals means the values shown are old.
  var STALE_INTERVALS = 2.5;

  function checkInterval(st) {
    var s = st && (st.check_interval_s || (st.daemon && st.daemon.check_interval_s));
    return typeof s === 'number' && s > 0 ? s : 60;
  }

  // why derives the one line a person reads first, and how urgent it is:
  // "ok" (green), "info" (nothing to do), "warn" (being handled) or
  // "action" (red: only this needs the person). The daemon's own line wins
  // when it sends one.
  function why(st, now) {
    var sig = st.signals || {};
    var lc0 = st.last_check;
    // The daemon's line describes its last check: when that is old, say so
    // first, whatever the line says.
    if ((st.state === 'healthy' || st.state === 'degraded') && lc0 && ageS(lc0.at, now) > STALE_INTERVALS * checkInterval(st) + 10)
      return { line: 'No health check for ' + ago(lc0.at, now).replace(' ago', '') + ' — the values below may be old.', sev: 'warn' };
    if (st.why && st.why.line) return { line: st.why.line, sev: st.why.severity || 'info', detail: st.why.detail || '' };
    var node = st.node || 'a node';
    var exit = st.exit || {};
    var lc = st.last_check;
    switch (st.state) {
      case 'healthy':
        if (ageS(lc && lc.at, now) > STALE_INTERVALS * checkInterval(st) + 10)
          return { line: 'No health check for ' + ago(lc && lc.at, now).replace(' ago', '') + ' — the values below may be old.', sev: 'warn' };
        return { line: 'Internet is working through ' + node + (exit.country ? ' (' + exit.country + ')' : '') + '.', sev: 'ok' };
      case 'degraded':
        return { line: 'Working, but ' + node + ' is having trouble; the watchdog is checking it.', sev: 'warn' };
      case 'connecting': case 'starting': case 'auth_wait':
        return { line: 'Connecting to ' + node + '… the kill switch keeps the LAN offline until it works.', sev: 'warn' };
      case 'wan_down':
        return { line: 'The router has no Internet connection (WAN down) — check the modem and the cable.', sev: 'action' };
      case 'storm_cooldown':
        return { line: 'Kill switch on: no node works right now; next try ' + until(sig.storm_cooldown_until, now) + '.', sev: 'action' };
      case 'auth_failed':
        return { line: 'Surflare login failed — check the e-mail and password in Settings.', sev: 'action',
          detail: (sig.auth && sig.auth.last_error) || '' };
      case 'subscription_inactive':
        return { line: 'Your Surflare subscription is not active — renew it, then press Check now.', sev: 'action' };
      case 'fail_open':
        return { line: 'Unprotected: the kill switch is off and traffic leaves without the VPN.', sev: 'action' };
      case 'diag':
        return { line: 'Diagnostics mode: supervision is paused (turn it off with "Diag off").', sev: 'info' };
      case 'disconnected':
        if (sig.rate_limited_until && !isZeroTime(sig.rate_limited_until) && ageS(sig.rate_limited_until, now) < 0)
          return { line: 'Kill switch on: too many reconnects; next try ' + until(sig.rate_limited_until, now) + '.', sev: 'action' };
        return { line: 'No VPN connection — the kill switch keeps the LAN offline, nothing leaks.', sev: 'action' };
      case 'stopped':
        return { line: 'The watchdog has stopped.', sev: 'action' };
    }
    return { line: 'State: ' + (st.state || 'unknown'), sev: 'info' };
  }

  function until(t, now) {
    if (!t || isZeroTime(t)) return 'soon';
    var s = Math.round((Date.parse(t) - (now || Date.now())) / 1000);
    if (isNaN(s) || s <= 0) return 'now';
    return s < 90 ? 'in ' + s + ' s' : 'in ' + Math.round(s / 60) + ' min';
  }

  function setValue(id, text, age, stale) {
    var v = $(id);
    v.textContent = text;
    v.classList.toggle('stale', !!stale);
    var a = $(id + '-age');
    if (a) a.textContent = age || '';
  }

  // renderStatus shows the daemon's status; it is called again every
  // second (tick) with the same status, so every age stays true.
  function renderStatus(st) {
    status = st || {};
    paintStatus();
    renderSignals(status.signals || {});
    if (status.last_transitions && !$('timeline').children.length) {
      status.last_transitions.forEach(function (t) { handle({ time: t.at, kind: 'transition', data: t }); });
    }
  }

  function lastTransitionAt(st) {
    var ts = st.last_transitions || [];
    return ts.length ? ts[ts.length - 1].at : null;
  }

  function paintStatus() {
    var st = status || {};
    var now = Date.now();
    var sig = st.signals || {};
    var lc = st.last_check || null;
    var checkAge = ageS(lc && lc.at, now);
    var stale = checkAge > STALE_INTERVALS * checkInterval(st) + 10;
    var up = st.state === 'healthy' || st.state === 'degraded';

    var w = why(st, now);
    $('why').dataset.severity = w.sev;
    $('why-line').textContent = w.line;
    $('why-detail').textContent = plain(w.detail || '');

    var s = $('state');
    s.dataset.state = st.state || '';
    setValue('state', STATE_WORDS[st.state] || st.state || '–', st.state ? 'since ' + ago(lastTransitionAt(st) || st.started_at, now).replace(' ago', '') : '');
    s.title = st.state || '';
    setValue('node', st.node || '–', st.transit ? 'via ' + st.transit : '');
    $('transit').textContent = st.transit || '–';

    // The exit is only known while the tunnel is up and checks are fresh.
    var exit = st.exit || {};
    var exitText = exit.ip ? exit.ip + (exit.country ? ' (' + exit.country + ')' : '') : '–';
    if (exit.ip && (!up || stale || sig.wan_down)) setValue('exit', 'unknown', 'last seen ' + exitText + ', ' + ago(lc && lc.at, now), true);
    else setValue('exit', exitText, exit.ip && lc ? 'checked ' + ago(lc.at, now) : '', stale);

    if (sig.wan_down) setValue('wan', 'down', 'check the modem', false);
    else if (stale || !lc) setValue('wan', 'unknown', lc ? 'no check for ' + ago(lc.at, now).replace(' ago', '') : 'not checked yet', true);
    else setValue('wan', 'up', 'checked ' + ago(lc.at, now), false);

    var auth = sig.auth || {};
    var loginWords = { ok: 'ok', checking: 'checking…', logging_in: 'logging in…', login_needed: 'needed',
      failed: 'failed', subscription_inactive: 'subscription inactive', fail_open: 'failed (kill switch off)' };
    setValue('login', loginWords[auth.state] || auth.state || '–', auth.failures ? auth.failures + ' failed attempts' : '', false);
    $('login').dataset.sev = auth.state === 'failed' || auth.state === 'subscription_inactive' ? 'action' : auth.state === 'ok' ? '' : 'warn';

    var c = st.counters || {};
    var lcOK = lc && (lc.outcome === 'OK' || lc.outcome === 'TUNNEL_OK');
    var lcText = lc ? (lcOK ? 'passed' : 'failed') : 'none yet';
    setValue('checks', lcText, lc ? ago(lc.at, now) + (c.checks !== undefined ? ' · ' + c.checks + ' checks, ' + (c.failed_checks || 0) + ' failed' : '') : '', stale);
    $('checks').title = lc ? (OUTCOME_WORDS[lc.outcome] || '') + ' (' + (lc.outcome || '') + (lc.reason ? ': ' + lc.reason : '') + ')' : '';
    $('checks').dataset.sev = lc && !lcOK ? 'warn' : '';
    $('uptime').textContent = duration(st.uptime_s);
    // "updated" is the age of the newest fact the daemon has: its last
    // check, never the time this page redrew.
    $('updated').textContent = lc ? 'last check ' + (isZeroTime(lc.at) ? 'never' : ago(lc.at, now)) : (st.updated_at && isZeroTime(st.updated_at) ? 'updated never' : 'no check yet');
    $('updated').classList.toggle('stale', stale);

    var diag = !!sig.diag;
    var b = $('btn-diag');
    b.dataset.diag = diag ? 'on' : 'off';
    b.textContent = diag ? 'Diag off' : 'Diag on';
  }

  // Signal rows: red only for what needs the person (WAN down, login
  // failed); amber for what the watchdog is handling; neutral otherwise.
  function renderSignals(sig) {
    var rows = [
      ['diagnostics', sig.diag ? 'on' : 'off', sig.diag ? 'warn' : ''],
      ['WAN', sig.wan_down ? 'down' : 'up', sig.wan_down ? 'bad' : 'ok'],
      ['login', sig.auth ? sig.auth.state : '–', sig.auth && /failed|subscription/.test(sig.auth.state) ? 'bad' : sig.auth && sig.auth.state !== 'ok' ? 'warn' : 'ok']
    ];
    // A zero time here ("never") is no cooldown, not an alarm.
    if (sig.storm_cooldown_until) rows.push(['storm cooldown until', clock(sig.storm_cooldown_until),
      isZeroTime(sig.storm_cooldown_until) ? 'ok' : 'warn']);
    if (sig.rate_limited_until) rows.push(['rate limited until', clock(sig.rate_limited_until),
      isZeroTime(sig.rate_limited_until) ? 'ok' : 'warn']);
    var lg = loopGuard(status);
    var lgShown = false;
    (sig.detectors || []).forEach(function (d) {
      var text = d.state + (d.detail ? ' – ' + plain(d.detail) : '');
      if (d.name === 'loopguard' && lg) { text += ' · ' + lg; lgShown = true; }
      // A detector that is on duty (keepalive active, a circuit closed) is
      // fine; one that has seen something is being handled, never red.
      var calm = /^(ok|closed|active|idle|on|watching|ready)$/.test(d.state);
      rows.push([d.name, text, calm ? '' : 'warn']);
    });
    if (lg && !lgShown) rows.push(['loopguard', lg, '']);
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

  // The node table: what a person asks of a node (is it the one in use,
  // can it be used, how fast is it), not every field the daemon has.
  // Columns the daemon adds beyond these follow, so nothing is hidden.
  var NODE_COLS = ['node', 'status', 'latency', 'log_errors'];
  var NODE_SKIP = { current: 1, failed: 1, dead: 1, latency_ms: 1, rtt_ms: 1, transit: 1 };

  function nodeStatus(r) {
    if (r.current) return ['in use', 'ok'];
    if (r.failed) return ['failed just now', 'warn'];
    if (r.dead) return ['skipped: failing in the VPN\'s own tests', 'warn'];
    return ['ready', ''];
  }

  function latency(r) {
    var ms = typeof r.latency_ms === 'number' ? r.latency_ms : r.rtt_ms;
    return typeof ms === 'number' && ms > 0 ? ms + ' ms' : '–';
  }

  // nodes may be an array of rows or {nodes: [...]}.
  function renderNodes(nodes) {
    var rows = Array.isArray(nodes) ? nodes : (nodes && (nodes.nodes || nodes.candidates)) || [];
    var cols = NODE_COLS.slice();
    rows.forEach(function (r) {
      Object.keys(r).forEach(function (k) { if (!NODE_SKIP[k] && cols.indexOf(k) < 0) cols.push(k); });
    });
    var label = { log_errors: 'errors', latency: 'latency' };
    var head = el('tr', null, cols.map(function (c) { return el('th', { text: label[c] || c.replace(/_/g, ' ') }); }));
    var body = rows.map(function (r) {
      return el('tr', { 'class': r.current ? 'current' : '', 'data-node': r.node || '' }, cols.map(function (c) {
        if (c === 'status') { var s = nodeStatus(r); return el('td', { 'class': s[1], text: s[0] }); }
        if (c === 'latency') return el('td', { 'class': 'num', text: latency(r) });
        var v = r[c];
        if (typeof v === 'boolean') return el('td', { text: v ? 'yes' : 'no' });
        if (typeof v === 'string' && TIME_RE.test(v)) return el('td', { text: isZeroTime(v) ? 'never' : ago(v) });
        return el('td', { 'class': typeof v === 'number' ? 'num' : '', text: v === undefined || v === null ? '' : String(v) });
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

  // --- health strip ----------------------------------------------------------

  var stripSpan = 3600;
  var stripTimer = null;

  // The daemon draws the strip (an inert SVG of its own making, the same
  // one LuCI shows); this page only places it.
  function loadStrip() {
    if (!token) return;
    var buckets = stripSpan > 3600 ? 96 : 60;
    request('GET', 'history?span=' + stripSpan + '&buckets=' + buckets).then(function (h) {
      $('strip').innerHTML = h.svg || '';
      $('strip-summary').textContent = h.summary || '';
    }).catch(function () {
      $('strip-summary').textContent = 'The history is not available from this watchdog.';
    });
  }

  function setSpan(span) {
    stripSpan = span;
    ['span-1h', 'span-24h'].forEach(function (id) {
      var on = Number($(id).dataset.span) === span;
      $(id).classList.toggle('seg-on', on);
      $(id).setAttribute('aria-pressed', on ? 'true' : 'false');
    });
    $('strip-title').textContent = span > 3600 ? 'Last 24 hours' : 'Last hour';
    loadStrip();
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
    $('span-1h').addEventListener('click', function () { setSpan(3600); });
    $('span-24h').addEventListener('click', function () { setSpan(86400); });
    var t = takeToken();
    if (t) start(t); else askToken('');
  }

  init();
}());
