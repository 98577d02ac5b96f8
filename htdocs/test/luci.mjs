// Smoke test of the LuCI views (luci-app-surflare) without a router: a
// stand-in for the few LuCI APIs the views use (E, _, L, view, rpc, poll,
// uci, ui) maps each `surflare` ubus method onto the daemon's HTTP API, and
// headless Chromium renders status, nodes and log. The long poll `surflare
// events {since, wait}` is stood in for by the daemon's event history
// (/api/v1/events, numbered as the page sees it). It checks that the status
// view goes live over it and that rotate (status and nodes views) changes
// the node; the log view shows lines. The real LuCI is luci-box.mjs's.
//
//   go run ./src/api/preview -listen 127.0.0.1:19099 -token T \
//       -allow-origin http://127.0.0.1:19098 &
//   node htdocs/test/luci.mjs --api http://127.0.0.1:19099 --token T \
//       --port 19098 --out artifacts/ [--modules DIR]
//
// settings.js runs on a stand-in of LuCI's form.js with the same load /
// parse / write / remove rules: its Credentials section must show the
// daemon's password state and hand a new password to set_credentials (which
// the stand-in records; there is no ubusd here) and never to UCI; the fast
// signal and 503 monitor switches save to UCI, switching fast signals off
// hides the three signals and keeps their values, and a config without a
// fastsignal section still shows them. The status view, fed
// a status with Go's zero times, shows "never" and the loop guard's mode
// and checks. It does not run the real LuCI.
import { createRequire } from 'node:module';
import { createServer } from 'node:http';
import { mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import process from 'node:process';

const here = path.dirname(new URL(import.meta.url).pathname);
const viewsDir = path.join(here, '..', '..', 'luci-app-surflare', 'htdocs', 'luci-static', 'resources', 'view', 'surflare');

const opt = { api: '', token: '', port: '19098', out: 'luci-artifacts', modules: '', chromium: '/usr/bin/chromium' };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i += 2) {
  const k = argv[i].replace(/^--/, '');
  if (!(k in opt)) throw new Error(`unknown option ${argv[i]}`);
  opt[k] = argv[i + 1];
}
if (!opt.api || !opt.token) throw new Error('--api and --token are required');

function loadPlaywright(dir) {
  for (const base of [dir, here, process.cwd()].filter(Boolean)) {
    try {
      const req = createRequire(path.join(path.resolve(base), 'noop.js'));
      return req(req.resolve('playwright-core'));
    } catch { /* next */ }
  }
  throw new Error('playwright-core not found: pass --modules DIR');
}

// A stand-in for LuCI's form.js (modules/luci-base/htdocs/luci-static/
// resources/form.js): the same rules for what is loaded, what a save
// writes (a changed non-empty value), removes (an empty one with rmempty)
// or leaves alone, and for depends(): an option whose dependencies do not
// hold is hidden and, on save, removed unless it has retain set. Plain
// inputs instead of LuCI's widgets. Enough to render settings.js and save
// it; tabs shown flat.
const formStub = String.raw`
window.maps = [];
window.formStub = function (uci) {
  class Node {
    constructor(title, descr) { this.title = title || ''; this.description = descr || ''; this.children = []; }
  }
  class Map extends Node {
    constructor(config, title, descr) { super(title, descr); this.config = config; this.data = uci; window.maps.push(this); }
    section(cls, ...a) { const s = new cls(this, ...a); this.children.push(s); return s; }
    load() { return Promise.all(this.children.map((s) => s.load())); }
    parse() { return Promise.all(this.children.map((s) => s.parse())); }
    render() { return this.load().then(() => this.renderContents()); }
    renderContents() {
      if (!this.root) {
        this.root = E('div', { id: 'cbi-' + this.config });
        this.root.addEventListener('change', () => this.checkDepends());
      }
      this.root.textContent = '';
      this.root.appendChild(E('h2', {}, this.title));
      this.children.forEach((s) => this.root.appendChild(s.render()));
      this.checkDepends();
      return this.root;
    }
    // As LuCI does on every change: hide the options whose dependencies
    // do not hold.
    checkDepends() {
      for (const s of this.children)
        for (const sid of s.cfgsections())
          for (const o of s.children) {
            const n = this.findElement('data-field', o.cbid(sid));
            if (n) n.hidden = !o.isActive(sid);
          }
    }
    save() {
      return this.parse().then(() => this.data.save()).then(() => this.load())
        .catch((e) => { window.saveErrors = (window.saveErrors || []).concat(String(e)); return Promise.reject(e); })
        .finally(() => this.renderContents());
    }
    findElement(attr, v) { return this.root ? this.root.querySelector('[' + attr + '="' + v + '"]') : null; }
    lookupOption(name, sid) {
      for (const s of this.children)
        for (const o of s.children)
          if (o.option === name && s.cfgsections().includes(sid)) return [o, sid];
      return null;
    }
  }
  class TypedSection extends Node {
    constructor(map, type, title, descr) { super(title, descr); this.map = map; this.sectiontype = type; }
    cfgsections() { return this.map.data.sections(this.map.config, this.sectiontype).map((s) => s['.name']); }
    tab(name, title) { this.tabs = this.tabs || {}; this.tabs[name] = title; }
    option(cls, ...a) { const o = new cls(this.map, this, ...a); this.children.push(o); return o; }
    taboption(tab, cls, ...a) {
      if (!this.tabs || !this.tabs[tab]) throw new Error('Associated tab not declared: ' + tab);
      const o = this.option(cls, ...a); o.tab = tab; return o;
    }
    load() {
      return Promise.all(this.cfgsections().flatMap((sid) => this.children.map((o) =>
        Promise.resolve(o.load(sid)).then((v) => o.cfgvalue(sid, v)))));
    }
    parse() { return Promise.all(this.cfgsections().flatMap((sid) => this.children.map((o) => o.parse(sid)))); }
    render() {
      const el = E('fieldset', { 'class': 'cbi-section', 'data-title': this.title }, [E('legend', {}, this.title)]);
      for (const sid of this.cfgsections()) for (const o of this.children) el.appendChild(o.render(sid));
      return el;
    }
  }
  class NamedSection extends TypedSection {
    constructor(map, name, type, title, descr) { super(map, type, title, descr); this.name = name; }
    cfgsections() { return this.map.data.get(this.map.config, this.name) ? [this.name] : []; }
  }
  class Value extends Node {
    constructor(map, section, option, title, descr) {
      super(title, descr);
      Object.assign(this, { map, section, option, config: map.config, rmempty: true, default: null, optional: false });
    }
    value(k, v) { (this.keylist = this.keylist || []).push(String(k)); (this.vallist = this.vallist || []).push(String(v != null ? v : k)); }
    depends(k, v) { (this.deps = this.deps || []).push(typeof k === 'object' ? k : { [k]: v }); }
    // Active when any one depends() set holds: each named option of the
    // same section shows the wanted value.
    isActive(sid) {
      if (!this.deps || !this.deps.length) return true;
      return this.deps.some((d) => Object.entries(d).every(([name, want]) => {
        const dep = this.section.children.find((c) => c.option === name);
        return dep != null && dep.isActive(sid) && String(dep.formvalue(sid) ?? '') === String(want);
      }));
    }
    cbid(sid) { return 'cbid.' + this.config + '.' + sid + '.' + this.option; }
    load(sid) { return this.map.data.get(this.config, sid, this.option); }
    cfgvalue(sid, v) {
      if (arguments.length === 2) { this.data = this.data || {}; this.data[sid] = v; }
      return this.data ? this.data[sid] : null;
    }
    formvalue(sid) { const n = this.map.findElement('id', this.cbid(sid)); return n ? n.value : null; }
    validate() { return true; }
    isValid(sid) { return this.validate(sid, this.formvalue(sid)) === true; }
    parse(sid) {
      if (!this.isActive(sid)) return Promise.resolve(this.retain ? undefined : this.remove(sid));
      const cval = this.cfgvalue(sid), fval = this.formvalue(sid);
      if (!this.isValid(sid)) return Promise.reject(new Error('invalid value in ' + this.cbid(sid)));
      if (fval != '' && fval != null) {
        if (this.forcewrite || JSON.stringify(cval) !== JSON.stringify(fval)) return Promise.resolve(this.write(sid, fval));
      } else if (this.rmempty || this.optional) {
        return Promise.resolve(this.remove(sid));
      }
      return Promise.resolve();
    }
    write(sid, v) { return this.map.data.set(this.config, sid, this.option, v); }
    remove(sid) { return this.map.data.unset(this.config, sid, this.option); }
    widget(sid, v) {
      return E('input', { id: this.cbid(sid), type: this.password ? 'password' : 'text',
        value: v != null ? (Array.isArray(v) ? v.join(' ') : v) : null, placeholder: this.placeholder });
    }
    render(sid) {
      const cv = this.cfgvalue(sid);
      return E('div', { 'class': 'cbi-value', 'data-field': this.cbid(sid), 'data-name': this.option }, [
        E('label', { 'for': this.cbid(sid) }, this.title || this.option),
        this.widget(sid, cv != null ? cv : this.default),
        this.description ? E('div', { 'class': 'cbi-value-description' }, this.description) : '']);
    }
  }
  class ListValue extends Value {
    widget(sid, v) {
      const sel = E('select', { id: this.cbid(sid) }, (this.keylist || []).map((k, i) => E('option', { value: k }, this.vallist[i])));
      if (v != null) sel.value = v;
      return sel;
    }
  }
  class Flag extends Value {
    constructor(...a) { super(...a); this.enabled = '1'; this.disabled = '0'; this.default = '0'; }
    widget(sid, v) { const c = E('input', { id: this.cbid(sid), type: 'checkbox' }); c.checked = v === this.enabled; return c; }
    formvalue(sid) { const n = this.map.findElement('id', this.cbid(sid)); return n && n.checked ? this.enabled : this.disabled; }
    parse(sid) {
      if (!this.isActive(sid)) return Promise.resolve(this.retain ? undefined : this.remove(sid));
      const fval = this.formvalue(sid);
      return Promise.resolve(fval == this.default && (this.optional || this.rmempty) ? this.remove(sid) : this.write(sid, fval));
    }
  }
  // Lists are shown, not edited: the stand-in gives back what was loaded.
  class DynamicList extends Value {
    formvalue(sid) { return this.cfgvalue(sid); }
  }
  class DummyValue extends Value {
    widget(sid, v) { return E('div', { id: this.cbid(sid), 'class': 'dummy' }, v != null ? String(v) : ''); }
    formvalue(sid) { return this.cfgvalue(sid); }
    write() {}
    remove() {}
  }
  return { Map, TypedSection, GridSection: TypedSection, TableSection: TypedSection, NamedSection,
    Value, ListValue, Flag, DynamicList, DummyValue };
};
`;

// The stand-in LuCI runtime, run in the page.
const stub = String.raw`
window._ = (s) => s;
String.prototype.format = function () {
  let i = 0; const a = arguments;
  return this.replace(/%[sd]/g, () => String(a[i++]));
};
window.E = function (tag, attrs, children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null) continue;
    if (typeof v === 'function') e.addEventListener(k, v); else e.setAttribute(k, v);
  }
  if (children != null) (Array.isArray(children) ? children : [children]).forEach((c) =>
    e.appendChild(c instanceof Node ? c : document.createTextNode(String(c))));
  return e;
};
window.L = {
  bind: (fn, self, ...a) => fn.bind(self, ...a),
  resolveDefault: (p, d) => Promise.resolve(p).catch(() => d),
  env: { ubuspath: '/ubus/' },
  hasViewPermission: () => true,
};
const API = window.API, TOKEN = window.TOKEN;
// rpc goes to the harness's own origin (as LuCI's /ubus does), which
// forwards it to the daemon's API.
const req = (method, p, body) => fetch('/api/v1/' + p, { method, headers: { 'Content-Type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) })
  .then((r) => r.json().then((j) => { if (!r.ok) throw new Error(j.error); return j; }));
const ubus = {
  token: () => Promise.resolve({ token: TOKEN }),
  status: () => req('GET', 'status'),
  nodes: () => req('GET', 'nodes').then((rows) => ({ nodes: rows })),
  check: () => req('POST', 'check'),
  rotate: (node) => req('POST', 'rotate', { node: node || '' }),
  reconnect: () => req('POST', 'reconnect'),
  diag: (enable) => req('POST', 'diag', { enable }),
  probe: () => Promise.resolve({}),
  // ubus history {span, buckets} is the API's /history: the same view.
  history: (span, buckets) => req('GET', 'history?span=' + (span || 3600) + '&buckets=' + (buckets || 60)),
  log: (lines) => req('GET', 'events?n=' + Math.min(lines, 1000)).then((r) => ({ lines: r.events
    .filter((e) => e.kind === 'log').map((e) => e.time + ' ' + e.data.level + ' ' + e.data.message) })),
};
// set_credentials has no HTTP twin: the stand-in records the call and
// answers as the daemon does (credentials status, never the password).
ubus.set_credentials = (username, password) => {
  window.credCalls.push([username, password]);
  return Promise.resolve({ present: true, source: 'file', username });
};
// events: the daemon's history numbered in the order this page first saw
// each event; a call waits (polling the history) until there is one after
// since, or for wait seconds.
const seen = [], seenKeys = new Set();
const history = () => req('GET', 'events?n=200').then((r) => {
  for (const e of r.events || []) {
    const k = JSON.stringify(e);
    if (!seenKeys.has(k)) { seenKeys.add(k); seen.push(e); }
  }
});
ubus.events = async (since, wait) => {
  await history();
  if (!since || since > seen.length) return { last: seen.length, events: [], reset: true };
  for (const end = Date.now() + (wait || 0) * 1000; seen.length <= since && Date.now() < end;) {
    await new Promise((r) => setTimeout(r, 300));
    await history();
  }
  return { last: seen.length, events: seen.slice(since).map((e, i) => Object.assign({ seq: since + i + 1 }, e)) };
};
window.calls = [];
window.credCalls = [];
// A test may replace a method's answer (window.ubusOverride.status = …).
window.ubusOverride = {};
// UCI: /etc/config/surflare as the views see it; every set/unset is logged.
window.uciChanges = [];
const uciData = { surflare: {
  main: { '.name': 'main', '.type': 'surflare', enabled: '1', mode: 'rule', username: 'household@surflare.lab' },
  web: { '.name': 'web', '.type': 'web', enabled: '1', port: new URL(API).port, listen: new URL(API).hostname },
  storm503: { '.name': 'storm503', '.type': 'storm503', count: '10' },
  fastsignal: { '.name': 'fastsignal', '.type': 'fastsignal', enabled: '1', node_log: '0' },
} };
const uci = {
  load: () => Promise.resolve(),
  get: (c, s, o) => { const sec = (uciData[c] || {})[s]; return sec ? (o == null ? sec : sec[o] ?? null) : null; },
  set: (c, s, o, v) => { window.uciChanges.push(['set', c, s, o, v]); uciData[c][s][o] = v; },
  unset: (c, s, o) => { window.uciChanges.push(['unset', c, s, o]); delete uciData[c][s][o]; },
  add: (c, type, name) => { window.uciChanges.push(['add', c, type, name]); uciData[c][name] = { '.name': name, '.type': type }; return name; },
  sections: (c, type) => Object.values(uciData[c] || {}).filter((s) => type == null || s['.type'] === type),
  save: () => Promise.resolve(),
};
window.uciData = uciData;
window.stubs = {
  view: { extend: (o) => o },
  rpc: { declare: (d) => (...args) => { window.calls.push(d.method); return (window.ubusOverride[d.method] || ubus[d.method])(...args); },
    getSessionID: () => 'stand-in-session' },
  poll: { add: (fn, s) => setInterval(fn, s * 1000) },
  uci,
  ui: { createHandlerFn: (self, fn, ...a) => (ev) => (typeof fn === 'string' ? self[fn] : fn).call(self, ...a, ev),
    addNotification: (t, msg, kind) => { document.getElementById('notes').appendChild(msg); } },
  network: { getHostHints: () => Promise.resolve({ getMACHints: () => [] }) },
  form: window.formStub(uci),
};
window.loadView = async function (name) {
  const src = await (await fetch('/view/' + name + '.js')).text();
  const s = window.stubs;
  const v = new Function('view', 'rpc', 'poll', 'uci', 'ui', 'form', 'network', src)(
    s.view, s.rpc, s.poll, s.uci, s.ui, s.form, s.network);
  const data = await v.load();
  document.getElementById('view').appendChild(await v.render(data));
  window.currentView = v;
};
`;

const server = createServer((req, res) => {
  const u = new URL(req.url, 'http://x');
  if (u.pathname === '/') {
    res.setHeader('Content-Type', 'text/html');
    res.end(`<!doctype html><meta charset=utf-8><div id=notes></div><div id=view></div>
<script>window.API=${JSON.stringify(opt.api)};window.TOKEN=${JSON.stringify(opt.token)};</script><script src="/form.js"></script><script src="/stub.js"></script>`);
  } else if (u.pathname === '/stub.js' || u.pathname === '/form.js') {
    res.setHeader('Content-Type', 'text/javascript');
    res.end(u.pathname === '/stub.js' ? stub : formStub);
  } else if (u.pathname.startsWith('/api/v1/')) {
    // The rpcd stand-in: forwards with the token, as the daemon's ubus
    // handlers act on the daemon directly.
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', async () => {
      try {
        const r = await fetch(opt.api + u.pathname + u.search, { method: req.method,
          headers: { Authorization: 'Bearer ' + opt.token, 'Content-Type': 'application/json' },
          body: req.method === 'POST' ? Buffer.concat(chunks) : undefined });
        res.statusCode = r.status;
        res.setHeader('Content-Type', 'application/json');
        res.end(Buffer.from(await r.arrayBuffer()));
      } catch (e) {
        res.statusCode = 502;
        res.end(JSON.stringify({ error: e.message }));
      }
    });
  } else if (/^\/view\/(status|nodes|log|settings)\.js$/.test(u.pathname)) {
    res.setHeader('Content-Type', 'text/javascript');
    res.end(readFileSync(path.join(viewsDir, path.basename(u.pathname))));
  } else {
    res.statusCode = 404;
    res.end();
  }
});
await new Promise((r) => server.listen(Number(opt.port), '127.0.0.1', r));

const { chromium } = loadPlaywright(opt.modules);
mkdirSync(opt.out, { recursive: true });
let passed = 0, failed = 0;
async function check(name, fn) {
  try { await fn(); passed++; console.log(`ok   ${name}`); }
  catch (e) { failed++; console.log(`FAIL ${name}: ${e.message.split('\n')[0]}`); }
}
const browser = await chromium.launch({ executablePath: opt.chromium,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
const base = `http://127.0.0.1:${opt.port}/`;
try {
  const ctx = await browser.newContext({ viewport: { width: 1100, height: 900 } });
  const open = async (name, setup, setupArg) => {
    const p = await ctx.newPage();
    const errors = [];
    p.on('pageerror', (e) => errors.push(e.message));
    await p.goto(base);
    if (setup) await p.evaluate(setup, setupArg);
    await p.evaluate((n) => window.loadView(n), name);
    return { p, errors };
  };

  await check('status view goes live over the events long poll and rotates', async () => {
    const { p, errors } = await open('status');
    await p.waitForFunction(() => document.querySelector('#surflare-conn').getAttribute('data-transport') === 'events', null, { timeout: 15000 });
    const calls = await p.evaluate(() => window.calls);
    if (calls.includes('token')) throw new Error('the view asked for a token: ' + calls);
    const before = (await p.textContent('#node')).trim();
    const target = await p.$$eval('#rotate-node option', (os, cur) => os.map((o) => o.value).find((v) => v && v !== cur), before);
    await p.selectOption('#rotate-node', target);
    await p.click('#btn-rotate');
    await p.waitForFunction((t) => document.querySelector('#node').textContent === t, target, { timeout: 15000 });
    // the rotation's transitions came over the long poll, not from a status poll
    await p.locator('#timeline tr[data-kind="transition"][data-via="push"]').first().waitFor({ timeout: 15000 });
    await p.screenshot({ path: path.join(opt.out, 'luci-status.png'), fullPage: true });
    if (errors.length) throw new Error(errors.join('; '));
  });

  await check('nodes view lists nodes and rotates from a row', async () => {
    const { p, errors } = await open('nodes');
    await p.locator('#nodes tr[data-node]').first().waitFor({ timeout: 15000 });
    const row = p.locator('#nodes tr[data-node]').filter({ has: p.locator('button:not([disabled])', { hasText: 'Rotate here' }) }).first();
    const node = await row.getAttribute('data-node');
    await row.locator('button', { hasText: 'Rotate here' }).click();
    await p.waitForFunction((n) => {
      const r = document.querySelector('#nodes tr[data-node="' + n + '"]');
      return r && r.querySelector('strong');
    }, node, { timeout: 20000 });
    await p.screenshot({ path: path.join(opt.out, 'luci-nodes.png'), fullPage: true });
    if (errors.length) throw new Error(errors.join('; '));
  });

  await check('log view shows lines', async () => {
    const { p, errors } = await open('log');
    await p.waitForFunction(() => /VPN healthy|Node rotation/.test(document.querySelector('#log').textContent), null, { timeout: 15000 });
    await p.screenshot({ path: path.join(opt.out, 'luci-log.png'), fullPage: true });
    if (errors.length) throw new Error(errors.join('; '));
  });
  const secret = 'Correct-Horse 7 "battery"';
  const field = (o) => '[data-field="cbid.surflare.main.' + o + '"]';
  await check('settings: no daemon, no password state; the password field is empty and write-only', async () => {
    const { p, errors } = await open('settings', () => { window.ubusOverride.status = () => Promise.reject(new Error('Object not found')); });
    await p.locator(field('_password') + ' input').waitFor({ timeout: 15000 });
    const pw = p.locator(field('_password') + ' input');
    if ((await pw.getAttribute('type')) !== 'password') throw new Error('the password field shows what is typed');
    if ((await pw.inputValue()) !== '') throw new Error('the password field is pre-filled');
    if (await p.locator(field('_password_state')).count()) throw new Error('a password state is shown though the daemon said nothing');
    const user = await p.inputValue(field('username') + ' input');
    if (user !== 'household@surflare.lab') throw new Error('username field shows ' + JSON.stringify(user));
    if (errors.length) throw new Error(errors.join('; '));
  });

  await check('settings: a new password goes to set_credentials only, never to UCI', async () => {
    const { p, errors } = await open('settings', () => {
      window.ubusOverride.status = () => Promise.resolve({ state: 'healthy', daemon: { credentials: { present: false, problem: 'no password file' } } });
    });
    const state = p.locator(field('_password_state'));
    await state.waitFor({ timeout: 15000 });
    if (!/^not set/.test((await state.textContent()).replace(/^Stored password/, '').trim()))
      throw new Error('password state: ' + (await state.textContent()));
    // Saving with the field empty keeps the stored password: no call, no UCI change for it.
    await p.evaluate(() => window.maps[0].save());
    let r = await p.evaluate(() => ({ cred: window.credCalls, uci: window.uciChanges }));
    if (r.cred.length) throw new Error('set_credentials called with an empty password field');
    if (r.uci.some((c) => /password/.test(c[3]))) throw new Error('UCI change for the password: ' + JSON.stringify(r.uci));

    await p.fill(field('username') + ' input', 'new.owner@surflare.lab');
    await p.fill(field('_password') + ' input', secret);
    await p.evaluate(() => window.maps[0].save());
    r = await p.evaluate(() => ({ cred: window.credCalls, uci: window.uciChanges, data: JSON.stringify(window.uciData), html: document.body.innerHTML }));
    // the username goes through uci with the rest of the form, not with the password
    if (JSON.stringify(r.cred) !== JSON.stringify([['', secret]]))
      throw new Error('set_credentials calls: ' + JSON.stringify(r.cred));
    if (!r.uci.some((c) => c[0] === 'set' && c[2] === 'main' && c[3] === 'username' && c[4] === 'new.owner@surflare.lab'))
      throw new Error('the username did not go to UCI main.username: ' + JSON.stringify(r.uci));
    if (JSON.stringify(r.uci).includes('Horse') || r.data.includes('Horse') || r.uci.some((c) => /password/.test(c[3])))
      throw new Error('the password reached UCI: ' + JSON.stringify(r.uci));
    if (r.html.includes('Horse')) throw new Error('the password is in the page after saving');
    if ((await p.inputValue(field('_password') + ' input')) !== '') throw new Error('the password field is filled after saving');
    await p.waitForFunction((sel) => /stored/.test(document.querySelector(sel).textContent), field('_password_state'), { timeout: 5000 });
    await p.screenshot({ path: path.join(opt.out, 'luci-settings.png'), fullPage: true });
    if (errors.length) throw new Error(errors.join('; '));
  });
  await check("settings: the password state is the daemon's own", async () => {
    const { p, errors } = await open('settings');
    await p.locator(field('_password') + ' input').waitFor({ timeout: 15000 });
    const cred = await p.evaluate(() => fetch('/api/v1/status').then((r) => r.json()).then((s) => (s.daemon || {}).credentials || null));
    const shown = p.locator(field('_password_state'));
    if (!cred || typeof cred.present !== 'boolean') {
      if (await shown.count()) throw new Error('a password state is shown though the daemon said nothing');
      console.log('     the daemon does not report credentials: no state shown');
    } else {
      const text = (await shown.textContent()).replace(/^Stored password/, '').trim();
      const want = cred.present ? 'stored' : 'not set';
      if (!text.startsWith(want)) throw new Error(`shows "${text}", the daemon says ${want}`);
      console.log(`     password state: ${text}`);
    }
    if (errors.length) throw new Error(errors.join('; '));
  });

  await check('settings: fast signals and the 503 monitor have their switches; the three signals follow theirs and keep their values', async () => {
    const { p, errors } = await open('settings');
    const fs = (o) => '[data-field="cbid.surflare.fastsignal.' + o + '"]';
    const storm = '[data-field="cbid.surflare.storm503.enabled"] input';
    await p.locator(fs('enabled') + ' input').waitFor({ timeout: 15000 });
    const shown = async () => {
      const out = {};
      for (const o of ['enabled', 'proxy_exit', 'node_log', 'counters'])
        out[o] = (await p.locator(fs(o)).isHidden()) ? 'hidden' : (await p.isChecked(fs(o) + ' input')) ? 'on' : 'off';
      return JSON.stringify(out);
    };
    // UCI: enabled 1, node_log 0, the others unset (the daemon's default, on).
    let want = JSON.stringify({ enabled: 'on', proxy_exit: 'on', node_log: 'off', counters: 'on' });
    if ((await shown()) !== want) throw new Error('fast signals as loaded: ' + (await shown()) + ', want ' + want);
    if (!(await p.isChecked(storm))) throw new Error('the 503 monitor shows off though UCI leaves it at its default (on)');

    await p.uncheck(fs('enabled') + ' input');
    want = JSON.stringify({ enabled: 'off', proxy_exit: 'hidden', node_log: 'hidden', counters: 'hidden' });
    if ((await shown()) !== want) throw new Error('fast signals switched off: ' + (await shown()) + ', want ' + want);
    await p.uncheck(storm);
    await p.evaluate(() => window.maps[0].save());
    const r = await p.evaluate(() => ({ uci: window.uciChanges, data: window.uciData.surflare }));
    const set = (sec, o, v) => r.uci.some((c) => c[0] === 'set' && c[2] === sec && c[3] === o && c[4] === v);
    if (!set('fastsignal', 'enabled', '0')) throw new Error('fastsignal.enabled=0 not written: ' + JSON.stringify(r.uci));
    if (!set('storm503', 'enabled', '0')) throw new Error('storm503.enabled=0 not written: ' + JSON.stringify(r.uci));
    const touched = r.uci.filter((c) => c[2] === 'fastsignal' && c[3] !== 'enabled');
    if (touched.length) throw new Error('saving with fast signals off changed the signals themselves: ' + JSON.stringify(touched));
    if (r.data.fastsignal.node_log !== '0') throw new Error('node_log lost its 0: ' + JSON.stringify(r.data.fastsignal));
    if (r.data.storm503.count !== '10') throw new Error('storm503.count changed: ' + JSON.stringify(r.data.storm503));

    // Back on: each signal as it was.
    await p.check(fs('enabled') + ' input');
    want = JSON.stringify({ enabled: 'on', proxy_exit: 'on', node_log: 'off', counters: 'on' });
    if ((await shown()) !== want) throw new Error('fast signals switched back on: ' + (await shown()) + ', want ' + want);
    await p.locator('fieldset[data-title="Fast signals"]').screenshot({ path: path.join(opt.out, 'luci-settings-fastsignal.png') });
    if (errors.length) throw new Error(errors.join('; '));
  });

  await check('settings: a config from before fast signals still shows their switches, on', async () => {
    const { p, errors } = await open('settings', () => { delete window.uciData.surflare.fastsignal; });
    const fs = (o) => '[data-field="cbid.surflare.fastsignal.' + o + '"] input';
    await p.locator(fs('enabled')).waitFor({ timeout: 15000 });
    for (const o of ['enabled', 'proxy_exit', 'node_log', 'counters'])
      if (!(await p.isChecked(fs(o)))) throw new Error(o + ' shows off; the daemon\'s default is on');
    const r = await p.evaluate(() => window.uciChanges);
    if (!r.some((c) => c[0] === 'add' && c[2] === 'fastsignal' && c[3] === 'fastsignal'))
      throw new Error('no fastsignal section staged: ' + JSON.stringify(r));
    if (r.some((c) => c[0] === 'add' && c[2] !== 'fastsignal' && ['web', 'storm503', 'surflare'].includes(c[2])))
      throw new Error('a section that exists was added again: ' + JSON.stringify(r));
    if (errors.length) throw new Error(errors.join('; '));
  });

  await check('status view: a time that never happened reads "never"; the loop guard shows its mode and checks', async () => {
    const zero = '0001-01-01T00:00:00Z';
    const { p, errors } = await open('status', (z) => {
      // Polling only (no events), on a status with Go's zero times.
      window.ubusOverride.events = () => Promise.reject(new Error('Not supported'));
      window.ubusOverride.status = () => Promise.resolve({
        state: 'healthy', node: 'Dallas', transit: 'Tokyo', counters: { checks: 3, failed_checks: 0 }, uptime_s: 90,
        last_check: { at: z, outcome: 'OK' }, started_at: z, updated_at: z,
        signals: { diag: false, wan_down: false, auth: { state: 'ok' }, rate_limited_until: z,
          detectors: [{ name: 'loopguard', state: 'closed', detail: 'in-flight 3', since: z }] },
        daemon: { loopguard: { enabled: true, open: false, in_flight: 3, mode: 'events', checks: 1234 } },
      });
    }, zero);
    const lg = p.locator('#signals tr[data-signal="loopguard"]');
    await lg.waitFor({ timeout: 15000 });
    const lgText = (await lg.textContent()).replace(/\s+/g, ' ');
    if (!/mode events/.test(lgText) || !/1234 checks/.test(lgText)) throw new Error('loop guard row: ' + lgText);
    const rl = (await p.textContent('#signals tr[data-signal="Rate limited until"] strong')).trim();
    if (rl !== 'never') throw new Error('a zero "rate limited until" reads ' + JSON.stringify(rl));
    await p.locator('#timeline tr').first().waitFor({ timeout: 15000 });
    const at = (await p.textContent('#timeline tr td')).trim();
    if (at !== 'never') throw new Error('a check at the zero time is listed at ' + JSON.stringify(at));
    const body = await p.evaluate(() => document.body.innerText);
    if (/0001|\b00:00:00\b|\b\d\d:\d\d:\d\d\b/.test(body)) throw new Error('a zero time shows as a clock: ' + body.match(/.*(0001|\d\d:\d\d:\d\d).*/)[0]);
    console.log('     loop guard: ' + lgText.replace(/^loopguard ?/, ''));
    await p.screenshot({ path: path.join(opt.out, 'luci-status-never.png'), fullPage: true });
    if (errors.length) throw new Error(errors.join('; '));
  });
} finally {
  await browser.close();
  server.close();
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
