// Browser test of luci-app-surflare in the real LuCI: headless Chromium
// (Debian's, driven by playwright-core) logs in to a router's uhttpd and
// uses Services → Surflare as an owner would. Run from a client of the
// router's LAN (the Go test src/luciapp runs it in a network namespace):
//
//   node htdocs/test/luci-box.mjs --host 192.168.1.1 --password PW \
//     --viewer NAME --viewer-password PW --secret VENDORPASSWORD \
//     --out DIR [--modules DIR]
//
// Checks, in order:
//   1. status (root, http) goes live over the `surflare events` long poll
//      (never uhttpd's /ubus/subscribe stream), and a rotation's
//      transitions arrive pushed;
//   2. the nodes page rotates from a row;
//   3. the log page shows the watchdog's lines;
//   4. a settings change saves through uci and Save & Apply reloads the
//      daemon (its status shows the new value);
//   5. the password field reaches set_credentials (the daemon then has a
//      password) and never uci (neither the config nor the staged changes);
//   6. status goes live over https (the router's self-signed certificate);
//   7. with uhttpd's redirect_https on (the driver switches it when this
//      script prints "@@ redirect_https" and answers "go" on stdin), an
//      http address ends on https, live;
//   8. a read-only user (rpcd login with the read ACL) sees every page with
//      its actions disabled, and rpcd refuses every write call;
//   9. the pages render on a 390 px phone;
//  10. no page had a script error.
// Screenshots (desktop and phone) go to --out. Ends with "N passed, N
// failed"; exit 1 on failure.
import { createRequire } from 'node:module';
import { mkdirSync } from 'node:fs';
import { createInterface } from 'node:readline';
import path from 'node:path';
import process from 'node:process';

const opt = { host: '192.168.1.1', user: 'root', password: '', viewer: '', viewerPassword: '', secret: '',
  out: 'luci-box-artifacts', modules: '', chromium: '/usr/bin/chromium', timeoutMs: '20000' };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i += 2) {
  const k = argv[i].replace(/^--/, '').replace(/-([a-z])/g, (_, c) => c.toUpperCase());
  if (!(k in opt)) throw new Error(`unknown option ${argv[i]}`);
  opt[k] = argv[i + 1];
}
for (const k of ['password', 'viewer', 'viewerPassword', 'secret'])
  if (!opt[k]) throw new Error(`--${k.replace(/[A-Z]/g, (c) => '-' + c.toLowerCase())} is required`);
const T = Number(opt.timeoutMs);

function loadPlaywright(dir) {
  const here = path.dirname(new URL(import.meta.url).pathname);
  for (const base of [dir, here, process.cwd()].filter(Boolean)) {
    try {
      const req = createRequire(path.join(path.resolve(base), 'noop.js'));
      return req(req.resolve('playwright-core'));
    } catch { /* next */ }
  }
  throw new Error('playwright-core not found: pass --modules DIR');
}

// The driver's side of a step: print a marker, wait for its "go".
const stdin = createInterface({ input: process.stdin });
const lines = stdin[Symbol.asyncIterator]();
async function step(name) {
  console.log(`@@ ${name}`);
  const { value, done } = await lines.next();
  if (done || value.trim() !== 'go') throw new Error(`driver did not do ${name}: ${done ? 'stdin closed' : value}`);
}

let passed = 0, failed = 0;
async function check(name, fn) {
  try { await fn(); passed++; console.log(`ok   ${name}`); }
  catch (e) { failed++; console.log(`FAIL ${name}: ${e.message.split('\n')[0]}`); }
}
function assert(cond, msg) { if (!cond) throw new Error(msg); }

const { chromium } = loadPlaywright(opt.modules);
mkdirSync(opt.out, { recursive: true });
const shots = [];
async function shot(p, name) {
  const file = path.join(path.resolve(opt.out), name);
  await p.screenshot({ path: file, fullPage: true });
  shots.push(file);
}

const pageErrors = [];
const browser = await chromium.launch({
  executablePath: opt.chromium,
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
    '--disable-sync', '--no-first-run', '--disable-quic', '--disable-default-apps', '--disable-extensions'],
});

const surflare = (sub) => `/cgi-bin/luci/admin/services/surflare/${sub}`;

// LuCI's own requests (/cgi-bin/...) in flight, per page. Leaving a page
// while one runs (the start page's admin/menu right after the login) aborts
// it, and in the box the next page and its admin/menu then hang for more
// than 30 s, about one load in eight (seen with LuCI's own pages too, a
// fresh uhttpd and no view of ours): settle waits for them first, as a
// user reading the page does.
const inFlight = new WeakMap();
function track(p) {
  const set = new Set();
  inFlight.set(p, set);
  p.on('request', (r) => { if (new URL(r.url()).pathname.startsWith('/cgi-bin/')) set.add(r); });
  p.on('requestfinished', (r) => set.delete(r));
  p.on('requestfailed', (r) => set.delete(r));
}
async function settle(p) {
  const set = inFlight.get(p);
  for (const end = Date.now() + T; set && set.size && Date.now() < end;)
    await new Promise((r) => setTimeout(r, 100));
}

// session opens a browser context logged in to LuCI at base (http or
// https) as user; the page is left on LuCI's start page.
async function session(base, user, password, viewport = { width: 1280, height: 900 }) {
  const ctx = await browser.newContext({ viewport, ignoreHTTPSErrors: true });
  const p = await ctx.newPage();
  track(p);
  p.on('pageerror', (e) => pageErrors.push(`${user} ${p.url()}: ${e.message}`));
  await p.goto(base + '/cgi-bin/luci/');
  await p.locator('input[name=luci_password]').waitFor({ timeout: T });
  await p.fill('input[name=luci_username]', user);
  await p.fill('input[name=luci_password]', password);
  await Promise.all([p.waitForNavigation({ timeout: T }), p.press('input[name=luci_password]', 'Enter')]);
  await p.waitForFunction(() => window.L && L.env && L.env.sessionid, null, { timeout: T });
  await settle(p);
  return { ctx, p };
}

// call is a ubus call through uhttpd with the page's LuCI session, as LuCI's
// rpc makes it: [status, reply] on success, {code, message} when rpcd
// refuses it.
function call(p, object, method, args) {
  return p.evaluate(async ([o, m, a]) => {
    const r = await fetch(L.env.ubuspath || '/ubus/', { method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'call', params: [L.env.sessionid, o, m, a || {}] }) });
    const j = await r.json();
    return j.error ? { error: j.error } : { result: j.result };
  }, [object, method, args]);
}
async function status(p) {
  const r = await call(p, 'surflare', 'status');
  assert(r.result && r.result[0] === 0, 'surflare status: ' + JSON.stringify(r));
  return r.result[1];
}
// until polls fn (a promise of a value) until pred holds, or fails with what
// it saw last.
async function until(what, fn, pred, ms = T) {
  const end = Date.now() + ms;
  let v;
  for (;;) {
    try {
      v = await fn();
      if (pred(v)) return v;
    } catch (e) { v = { error: e.message }; }
    if (Date.now() > end) throw new Error(`${what}: still ${JSON.stringify(v).slice(0, 300)}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function openView(p, base, sub, ready) {
  await settle(p);
  await p.goto(base + surflare(sub));
  await p.locator(ready).first().waitFor({ timeout: T });
  await settle(p);
}

// liveRotation opens the status view, waits until it is live over the
// event stream and rotates to another node from it: the rotation's
// transitions must come pushed (the view does not poll while live).
async function liveRotation(p, base) {
  const streams = [];
  p.on('request', (r) => { if (r.url().includes('/ubus/subscribe/surflare')) streams.push(r.url()); });
  await openView(p, base, 'status', '#surflare-conn');
  await p.waitForFunction(() => document.querySelector('#surflare-conn').getAttribute('data-conn') === 'live', null, { timeout: T });
  const transport = await p.getAttribute('#surflare-conn', 'data-transport');
  assert(transport === 'events', `live over ${transport}, want the events long poll`);
  await p.waitForFunction(() => document.querySelector('#node').textContent.trim() !== '-', null, { timeout: T });
  const before = (await p.textContent('#node')).trim();
  const target = await p.$$eval('#rotate-node option', (os, cur) => os.map((o) => o.value).find((v) => v && v !== cur), before);
  assert(target, 'no other node to rotate to');
  await p.$$eval('#timeline tr', (rs) => rs.forEach((r) => r.setAttribute('data-before', '1')));
  await p.selectOption('#rotate-node', target);
  await p.click('#btn-rotate');
  const row = await p.waitForFunction(() => {
    const r = document.querySelector('#timeline tr[data-kind="transition"][data-via="push"]:not([data-before])');
    return r && r.textContent;
  }, null, { timeout: T });
  await p.waitForFunction((t) => document.querySelector('#node').textContent.trim() === t, target, { timeout: T });
  const st = await status(p);
  assert(st.node === target, `the page rotated to ${target}, the daemon is on ${st.node}`);
  const pushed = await p.$$eval('#timeline tr[data-via="push"]', (rs) => rs.map((r) => r.getAttribute('data-kind')));
  const logLines = await p.$eval('#log', (e) => e.childNodes.length);
  assert(!streams.length, `the page opened uhttpd's event stream: ${streams.join(' ')}`);
  console.log(`     ${base}: live over ${transport}; rotated ${before} -> ${target}; pushed rows: ${pushed.join(',')}; log lines pushed: ${logLines}; first: ${(await row.jsonValue()).replace(/\s+/g, ' ')}`);
  return target;
}

const http = `http://${opt.host}`, https = `https://${opt.host}`;
let root;
try {
  root = await session(http, opt.user, opt.password);
  const p = root.p;

  await check('status goes live (http) and a rotation arrives pushed', async () => {
    await liveRotation(p, http);
    await shot(p, 'status.png');
  });

  await check('the nodes page rotates', async () => {
    await openView(p, http, 'nodes', '#nodes tr[data-node]');
    const row = p.locator('#nodes tr[data-node]').filter({ has: p.locator('button:not([disabled])', { hasText: 'Rotate here' }) }).first();
    const node = await row.getAttribute('data-node');
    await row.locator('button', { hasText: 'Rotate here' }).click();
    await p.waitForFunction((n) => {
      const r = document.querySelector(`#nodes tr[data-node="${n}"]`);
      return r && r.querySelector('strong');
    }, node, { timeout: T });
    const st = await status(p);
    assert(st.node === node, `the row says ${node}, the daemon is on ${st.node}`);
    console.log(`     rotated to ${node}`);
    await shot(p, 'nodes.png');
  });

  await check('the log page shows lines', async () => {
    await openView(p, http, 'log', '#log');
    await p.waitForFunction(() => /Node rotation: .* -> .*\(requested\)/.test(document.querySelector('#log').textContent), null, { timeout: T });
    const n = (await p.textContent('#log')).split('\n').length;
    console.log(`     ${n} lines`);
    await shot(p, 'log.png');
  });

  const field = (o) => `[id="widget.cbid.surflare.main.${o}"]`;
  const settingsReady = field('mode'); // on the tab shown first
  // Save & Apply as a user clicks it: LuCI saves, applies with rollback,
  // confirms by itself and reloads the page once the changes are applied.
  const saveApply = async () => {
    const reloaded = p.waitForNavigation({ timeout: 60000 });
    await p.locator('.cbi-page-actions .cbi-button-apply').first().click();
    await reloaded;
    await settle(p);
  };

  await check('settings save through uci and Save & Apply reloads the daemon', async () => {
    const before = (await status(p)).counters.fail_threshold;
    const want = String(before - 1);
    await openView(p, http, 'settings', settingsReady);
    await p.click('.cbi-tabmenu li[data-tab="rotation"] a');
    await p.fill(field('fail_threshold'), want);
    await saveApply();
    const got = await until('uci get surflare.main.fail_threshold', () => call(p, 'uci', 'get', { config: 'surflare', section: 'main', option: 'fail_threshold' }),
      (r) => r.result && r.result[1] && r.result[1].value === want);
    const st = await until('the daemon\'s fail_threshold', () => status(p), (s) => s.counters.fail_threshold === Number(want), 30000);
    const log = await call(p, 'surflare', 'log', { lines: 50 });
    const reloaded = ((log.result || [])[1] || {}).lines.filter((l) => /Configuration reloaded/.test(l));
    assert(reloaded.length, 'no "Configuration reloaded" in the watchdog log');
    console.log(`     fail_threshold ${before} -> ${got.result[1].value} in uci, ${st.counters.fail_threshold} in the daemon; ${reloaded.slice(-1)[0]}`);
    await shot(p, 'settings.png');
  });

  await check('the password field reaches set_credentials and never uci', async () => {
    const cred = async () => ((await status(p)).daemon || {}).credentials || {};
    // The router already has an account (the daemon connects only with
    // one): the new password must replace it through set_credentials; the
    // driver then finds the new secret in /etc/surflare/credentials only.
    const was = await cred();
    assert(was.present === true, `the daemon lost its first password: ${JSON.stringify(was)}`);
    await openView(p, http, 'settings', settingsReady);
    assert((await p.getAttribute(field('_password'), 'type')) === 'password', 'the password field shows what is typed');
    await p.fill(field('username'), 'owner@surflare.test');
    await p.fill(field('_password'), opt.secret);
    await saveApply();
    const now = await until('the daemon\'s credentials', cred, (c) => c.present === true);
    // the committed config as uci reads it (the driver greps the files too)
    const conf = await call(p, 'uci', 'get', { config: 'surflare' });
    const text = JSON.stringify(conf);
    const user = (((conf.result || [])[1] || {}).values || {}).main || {};
    assert(user.username === 'owner@surflare.test', `uci main.username is ${user.username}`);
    assert(!text.includes(opt.secret), 'the password is in the surflare config');
    const changes = JSON.stringify(await call(p, 'uci', 'changes', {}));
    assert(!changes.includes(opt.secret), 'the password is in uci\'s staged changes');
    assert(!(await p.content()).includes(opt.secret), 'the password is in the page after saving');
    console.log(`     credentials: ${JSON.stringify(now)}`);
  });

  await check('status goes live over https', async () => {
    const s = await session(https, opt.user, opt.password);
    await liveRotation(s.p, https);
    await shot(s.p, 'status-https.png');
    await s.ctx.close();
  });

  await check('with redirect_https, http ends on https, live', async () => {
    await step('redirect_https');
    const s = await session(http, opt.user, opt.password);
    assert(s.p.url().startsWith(https + '/'), `logged in at ${s.p.url()}`);
    await settle(s.p);
    await s.p.goto(http + surflare('status'));
    assert(s.p.url().startsWith(https + '/'), `status opened at ${s.p.url()}`);
    await liveRotation(s.p, https);
    await s.ctx.close();
  });

  await check('a read-only user sees the pages and cannot act', async () => {
    const s = await session(https, opt.viewer, opt.viewerPassword);
    const v = s.p;
    await openView(v, https, 'status', '#surflare-conn');
    await v.waitForFunction(() => document.querySelector('#surflare-conn').getAttribute('data-conn') === 'live', null, { timeout: T });
    await v.waitForFunction(() => document.querySelector('#state').textContent.trim() !== '-', null, { timeout: T });
    for (const id of ['btn-check', 'btn-rotate', 'btn-diag', 'rotate-node'])
      assert(await v.isDisabled('#' + id), `#${id} is enabled for a read-only user`);
    await shot(v, 'status-readonly.png');
    await openView(v, https, 'nodes', '#nodes tr[data-node]');
    const enabled = await v.$$eval('#nodes button, .cbi-section button', (bs) => bs.filter((b) => !b.disabled).map((b) => b.textContent));
    assert(!enabled.length, `enabled buttons on the nodes page: ${enabled.join(', ')}`);
    await openView(v, https, 'log', '#log');
    await openView(v, https, 'settings', settingsReady);
    for (const o of ['mode', 'username', '_password'])
      assert(await v.isDisabled(field(o)), `the setting ${o} is editable`);
    // Save & Apply is LuCI's ComboButton (a div): disabled by its attribute
    const apply = await v.$$eval('.cbi-page-actions .cbi-button-apply, .cbi-page-actions button',
      (bs) => bs.map((b) => [b.textContent.trim().split('\n')[0], b.hasAttribute('disabled') || b.disabled === true]));
    assert(apply.length && apply.every((b) => b[1]), `page actions enabled: ${JSON.stringify(apply)}`);
    await shot(v, 'settings-readonly.png');

    const refused = [], allowed = [];
    for (const [m, a] of [['check'], ['rotate', { node: 'Miami' }], ['reconnect'], ['diag', { enable: true }], ['probe'], ['reload'],
      ['set_credentials', { username: 'x@y.z', password: 'nope' }]]) {
      const r = await call(v, 'surflare', m, a);
      if (r.error && r.error.code === -32002) refused.push(m); else allowed.push(`${m}: ${JSON.stringify(r).slice(0, 100)}`);
    }
    const set = await call(v, 'uci', 'set', { config: 'surflare', section: 'main', values: { mode: 'global' } });
    if (!(set.error && set.error.code === -32002)) allowed.push('uci set: ' + JSON.stringify(set));
    for (const m of ['status', 'nodes', 'log']) {
      const r = await call(v, 'surflare', m);
      assert(r.result && r.result[0] === 0, `read call ${m}: ${JSON.stringify(r).slice(0, 200)}`);
    }
    assert(!allowed.length, `rpcd let a read-only user: ${allowed.join('; ')}`);
    console.log(`     refused: ${refused.join(', ')}, uci set`);
    await s.ctx.close();
  });

  await check('the pages render on a 390 px phone', async () => {
    const s = await session(https, opt.user, opt.password, { width: 390, height: 844 });
    for (const [sub, ready] of [['status', '#state'], ['nodes', '#nodes tr[data-node]'], ['settings', settingsReady], ['log', '#log']]) {
      await openView(s.p, https, sub, ready);
      if (sub === 'status')
        await s.p.waitForFunction(() => document.querySelector('#state').textContent.trim() !== '-', null, { timeout: T });
      await shot(s.p, `phone-${sub}.png`);
    }
    await s.ctx.close();
  });

  await check('no page had a script error', async () => {
    assert(!pageErrors.length, pageErrors.join('; '));
  });
} finally {
  await browser.close();
  stdin.close();
}
for (const f of shots) console.log(`screenshot ${f}`);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
