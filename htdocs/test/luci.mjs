// Smoke test of the LuCI views (luci-app-surflare) without a router: a
// stand-in for the few LuCI APIs the views use (E, _, L, view, rpc, poll,
// uci, ui) maps each `surflare` ubus method onto the daemon's HTTP API, and
// headless Chromium renders status, nodes and log from a page on another
// origin — as LuCI on port 80 would. It checks that the status view gets a
// token through rpc, goes live over the websocket, and that rotate (status
// and nodes views) changes the node; the log view shows lines.
//
//   go run ./src/api/preview -listen 127.0.0.1:19099 -token T \
//       -allow-origin http://127.0.0.1:19098 &
//   node htdocs/test/luci.mjs --api http://127.0.0.1:19099 --token T \
//       --port 19098 --out artifacts/ [--modules DIR]
//
// It does not run the real LuCI (form.Map in settings.js is not exercised).
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
  log: (lines) => req('GET', 'events?n=' + Math.min(lines, 1000)).then((r) => ({ lines: r.events
    .filter((e) => e.kind === 'log').map((e) => e.time + ' ' + e.data.level + ' ' + e.data.message) })),
};
window.calls = [];
window.stubs = {
  view: { extend: (o) => o },
  rpc: { declare: (d) => (...args) => { window.calls.push(d.method); return ubus[d.method](...args); } },
  poll: { add: (fn, s) => setInterval(fn, s * 1000) },
  uci: { load: () => Promise.resolve(), get: (c, s, o) => ({ port: new URL(API).port, listen: new URL(API).hostname, enabled: '1' })[o] },
  ui: { createHandlerFn: (self, fn, ...a) => (ev) => (typeof fn === 'string' ? self[fn] : fn).call(self, ...a, ev),
    addNotification: (t, msg, kind) => { document.getElementById('notes').appendChild(msg); } },
};
window.loadView = async function (name) {
  const src = await (await fetch('/view/' + name + '.js')).text();
  const s = window.stubs;
  const v = new Function('view', 'rpc', 'poll', 'uci', 'ui', src)(s.view, s.rpc, s.poll, s.uci, s.ui);
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
<script>window.API=${JSON.stringify(opt.api)};window.TOKEN=${JSON.stringify(opt.token)};</script><script src="/stub.js"></script>`);
  } else if (u.pathname === '/stub.js') {
    res.setHeader('Content-Type', 'text/javascript');
    res.end(stub);
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
  const open = async (name) => {
    const p = await ctx.newPage();
    const errors = [];
    p.on('pageerror', (e) => errors.push(e.message));
    await p.goto(base);
    await p.evaluate((n) => window.loadView(n), name);
    return { p, errors };
  };

  await check('status view goes live with a token from rpc and rotates', async () => {
    const { p, errors } = await open('status');
    await p.waitForFunction(() => document.querySelector('#surflare-conn').textContent === 'live', null, { timeout: 15000 });
    const calls = await p.evaluate(() => window.calls);
    if (!calls.includes('token')) throw new Error('no token call: ' + calls);
    const before = (await p.textContent('#node')).trim();
    const target = await p.$$eval('#rotate-node option', (os, cur) => os.map((o) => o.value).find((v) => v && v !== cur), before);
    await p.selectOption('#rotate-node', target);
    await p.click('#btn-rotate');
    await p.waitForFunction((t) => document.querySelector('#node').textContent === t, target, { timeout: 15000 });
    await p.locator('#timeline tr').first().waitFor({ timeout: 15000 });
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
} finally {
  await browser.close();
  server.close();
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
