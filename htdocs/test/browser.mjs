// Browser test of the live view: headless Chromium (Debian's `chromium`)
// driven by playwright-core against a running daemon (the lab) or the
// preview server (`go run ./src/api/preview`).
//
//   node htdocs/test/browser.mjs --url http://127.0.0.1:9099/ --token TOKEN \
//     --out artifacts/ [--modules DIR] [--fault 'shell command' | --fault-url URL] \
//     [--fault-pattern REGEX] [--timeout-ms 15000]
//
// --modules is a directory whose node_modules has playwright-core (default:
// resolved from this file or the current directory). --fault runs a shell
// command after the page is live (and rotated); --fault-url instead POSTs to
// URL (a test's injection hook; a non-2xx answer fails the check). The
// timeline must then show a new entry matching --fault-pattern. Checks:
//   1. without a token the page asks for one and requests nothing from /api;
//   2. with #token= it shows the live state over the websocket;
//   3. clicking rotate (to another node) changes the node;
//   4. (with --fault) the fault appears in the timeline;
//   5. with the websocket blocked it keeps updating by polling;
//   6. a time the daemon never set (Go's zero time) reads "never", and
//      the loop guard's row shows its mode and checks;
//   7. the page fits a phone screen (no horizontal scroll).
// Screenshots go to --out. Ends with "N passed, N failed"; exit 1 on failure.
import { createRequire } from 'node:module';
import { execSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import process from 'node:process';

function args() {
  const a = { url: '', token: '', out: 'browser-artifacts', modules: '', fault: '', faultUrl: '',
    faultPattern: 'PROXY_BROKEN|degraded|rotation|suspect', timeoutMs: 15000,
    chromium: process.env.CHROMIUM || '/usr/bin/chromium' };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i].replace(/^--/, '').replace(/-([a-z])/g, (_, c) => c.toUpperCase());
    if (!(k in a)) throw new Error(`unknown option ${argv[i]}`);
    a[k] = k === 'timeoutMs' ? Number(argv[++i]) : argv[++i];
  }
  if (!a.url || !a.token) throw new Error('--url and --token are required');
  if (!a.url.endsWith('/')) a.url += '/';
  return a;
}

async function loadPlaywright(dir) {
  for (const base of [dir, path.dirname(new URL(import.meta.url).pathname), process.cwd()].filter(Boolean)) {
    try {
      const req = createRequire(path.join(path.resolve(base), 'noop.js'));
      return req(req.resolve('playwright-core'));
    } catch { /* try the next place */ }
  }
  throw new Error('playwright-core not found: npm i playwright-core in a directory and pass --modules DIR');
}

const opt = args();
const { chromium } = await loadPlaywright(opt.modules);
mkdirSync(opt.out, { recursive: true });
const shot = (page, name) => page.screenshot({ path: path.join(opt.out, name), fullPage: true });

let passed = 0, failed = 0;
async function check(name, fn) {
  try {
    await fn();
    passed++;
    console.log(`ok   ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e.message.split('\n')[0]}`);
  }
}
function assert(cond, msg) { if (!cond) throw new Error(msg); }

const browser = await chromium.launch({
  executablePath: opt.chromium,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
});
try {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });

  await check('a page without a token gets nothing', async () => {
    const page = await ctx.newPage();
    const apiRequests = [];
    page.on('request', (r) => { if (new URL(r.url()).pathname.includes('/api/')) apiRequests.push(r.url()); });
    page.on('websocket', (w) => apiRequests.push(w.url()));
    await page.goto(opt.url);
    await page.locator('#token-input').waitFor({ state: 'visible', timeout: opt.timeoutMs });
    await page.waitForTimeout(1000);
    assert(await page.locator('#main').isHidden(), 'the status area is visible without a token');
    assert(apiRequests.length === 0, `requests without a token: ${apiRequests.join(', ')}`);
    await shot(page, '01-no-token.png');
    await page.close();
  });

  const page = await ctx.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));

  await check('the page shows the live state', async () => {
    await page.goto(`${opt.url}#token=${encodeURIComponent(opt.token)}`);
    await page.waitForFunction(() => {
      const s = document.querySelector('#state');
      return s && s.textContent.trim() !== '' && s.textContent !== '–';
    }, null, { timeout: opt.timeoutMs });
    await page.waitForFunction(() => document.querySelector('#conn').dataset.conn === 'live', null, { timeout: opt.timeoutMs });
    const node = (await page.textContent('#node')).trim();
    assert(node && node !== '–', 'no node shown');
    assert(!page.url().includes('token='), 'the token stayed in the address bar');
    assert((await page.locator('#nodes tbody tr').count()) > 0, 'the node table is empty');
    await shot(page, '02-live.png');
  });

  await check('clicking rotate changes the node', async () => {
    const before = (await page.textContent('#node')).trim();
    const target = await page.$$eval('#rotate-node option', (os, cur) =>
      os.map((o) => o.value).find((v) => v && v !== cur), before);
    assert(target, 'no other node to rotate to');
    await page.selectOption('#rotate-node', target);
    await page.click('#btn-rotate');
    await page.waitForFunction((t) => document.querySelector('#node').textContent.trim() === t,
      target, { timeout: opt.timeoutMs });
    await page.locator('#timeline li').first().waitFor({ timeout: opt.timeoutMs });
    console.log(`     rotated ${before} -> ${target}`);
    await shot(page, '03-rotated.png');
  });

  if (opt.fault || opt.faultUrl) {
    await check('an injected fault appears in the timeline', async () => {
      const re = new RegExp(opt.faultPattern);
      // Rows already there are marked: only a row added after the fault
      // counts (a matching row from the rotation must not pass the check).
      await page.$$eval('#timeline li', (ls) => ls.forEach((li) => { li.dataset.before = '1'; }));
      const t0 = Date.now();
      if (opt.faultUrl) {
        const r = await fetch(opt.faultUrl, { method: 'POST', signal: AbortSignal.timeout(opt.timeoutMs) });
        const body = (await r.text()).trim();
        assert(r.ok, `fault hook ${opt.faultUrl}: HTTP ${r.status} ${body}`);
        console.log(`     fault injected: ${body}`);
      } else {
        execSync(opt.fault, { stdio: 'inherit', timeout: opt.timeoutMs });
      }
      const row = await page.waitForFunction((src) => {
        const li = [...document.querySelectorAll('#timeline li:not([data-before])')]
          .find((l) => new RegExp(src).test(l.textContent));
        return li && li.textContent;
      }, re.source, { timeout: opt.timeoutMs });
      console.log(`     fault visible after ${Date.now() - t0} ms: ${(await row.jsonValue()).replace(/\s+/g, ' ')}`);
      await shot(page, '04-fault.png');
    });
  }

  await check('without the websocket it falls back to polling', async () => {
    const p = await ctx.newPage();
    await p.routeWebSocket(/\/api\/v1\/ws/, (ws) => ws.close());
    await p.goto(`${opt.url}#token=${encodeURIComponent(opt.token)}`);
    await p.waitForFunction(() => ['polling', 'reconnecting'].includes(document.querySelector('#conn').dataset.conn) &&
      document.querySelector('#state').textContent !== '–', null, { timeout: opt.timeoutMs });
    const before = await p.textContent('#updated');
    await p.waitForFunction((b) => document.querySelector('#updated').textContent !== b, before, { timeout: opt.timeoutMs });
    await shot(p, '05-polling.png');
    await p.close();
  });

  await check('a time that never happened reads "never"; the loop guard shows its mode and checks', async () => {
    // The daemon's own status and nodes, with Go's zero time where a time
    // was never set (updated_at, rate_limited_until, a node column), over
    // polling (websocket blocked). The loop guard is the daemon's when it
    // reports one, else a stand-in.
    const zero = '0001-01-01T00:00:00Z';
    const p = await ctx.newPage();
    const perr = [];
    p.on('pageerror', (e) => perr.push(e.message));
    await p.routeWebSocket(/\/api\/v1\/ws/, (ws) => ws.close());
    let lg = null, lgOwn = false;
    await p.route(/\/api\/v1\/status$/, async (route) => {
      const r = await route.fetch();
      const st = await r.json();
      st.updated_at = zero;
      if (st.last_check) st.last_check.at = zero;
      st.signals = Object.assign({}, st.signals, { rate_limited_until: zero });
      st.daemon = st.daemon || {};
      lgOwn = !!(st.daemon.loopguard && st.daemon.loopguard.mode);
      if (!lgOwn) st.daemon.loopguard = { enabled: true, open: false, in_flight: 0, mode: 'poll', checks: 42 };
      lg = st.daemon.loopguard;
      await route.fulfill({ response: r, json: st });
    });
    await p.route(/\/api\/v1\/nodes$/, async (route) => {
      const r = await route.fetch();
      const body = await r.json();
      const rows = Array.isArray(body) ? body : body.nodes || [];
      rows.forEach((n) => { n.last_ok = zero; });
      await route.fulfill({ response: r, json: body });
    });
    await p.goto(`${opt.url}#token=${encodeURIComponent(opt.token)}`);
    await p.locator('#signals li[data-signal="loopguard"]').waitFor({ timeout: opt.timeoutMs });
    const updated = (await p.textContent('#updated')).trim();
    assert(updated === 'last check never' || updated === 'updated never', `a zero check time reads ${JSON.stringify(updated)}`);
    const rl = (await p.textContent('#signals li[data-signal="rate limited until"] .v')).trim();
    assert(rl === 'never', `a zero rate_limited_until reads ${JSON.stringify(rl)}`);
    const col = await p.$$eval('#nodes th', (ths) => ths.findIndex((th) => th.textContent === 'last ok'));
    assert(col >= 0, 'the node table has no "last ok" column');
    const cells = await p.$$eval('#nodes tbody tr', (trs, i) => trs.map((tr) => tr.children[i].textContent), col);
    assert(cells.length && cells.every((c) => c === 'never'), `zero node times read ${JSON.stringify(cells)}`);
    const lgText = (await p.textContent('#signals li[data-signal="loopguard"]')).replace(/\s+/g, ' ').trim();
    assert(lgText.includes('mode ' + lg.mode), `the loop guard row does not name its mode (${lg.mode}): ${lgText}`);
    assert(/\d+ checks/.test(lgText), `the loop guard row does not count its checks: ${lgText}`);
    const body = await p.evaluate(() => document.body.innerText);
    // "0001" as a number of its own (the year of Go's zero time), not four
    // digits of a live figure on the page (a port, a pid, a counter: 10001).
    const zeroYear = body.match(/(?:^|\D)0001(?:\D|$)/);
    assert(!zeroYear, `the page shows a zero time as a date: ${zeroYear && zeroYear[0]}`);
    console.log(`     loop guard (${lgOwn ? "the daemon's" : 'stand-in'}): ${lgText.replace(/^loopguard ?/, '')}`);
    await shot(p, '07-never.png');
    assert(perr.length === 0, perr.join('; '));
    await p.close();
  });


  // The live page as a household reads it: every value with its age, the
  // health strip the daemon drew, the why line in plain words.
  await check('every value shows its age; the health strip is drawn; the why line is plain', async () => {
    await page.goto(`${opt.url}#token=${encodeURIComponent(opt.token)}`);
    await page.waitForFunction(() => document.querySelector('#state').dataset.state === 'healthy', null, { timeout: opt.timeoutMs });
    await page.waitForFunction(() => /ago/.test(document.querySelector('#exit-age').textContent), null, { timeout: opt.timeoutMs });
    await page.locator('#strip > svg').waitFor({ timeout: opt.timeoutMs });
    const label = await page.getAttribute('#strip > svg', 'aria-label');
    assert(/^Last hour: /.test(label || ''), `the strip has no summary: ${label}`);
    const why = (await page.textContent('#why-line')).trim();
    assert(/working through/.test(why), `the why line for a healthy tunnel reads ${JSON.stringify(why)}`);
    assert((await page.getAttribute('#why', 'data-severity')) === 'ok', 'a healthy tunnel is not green');
    const upd = (await page.textContent('#updated')).trim();
    assert(/^last check \d+ s ago$/.test(upd), `the header reads ${JSON.stringify(upd)}`);
    // The log keeps the daemon's own lines (what logread shows, what people
    // grep for); everything else on the page is in plain words.
    const body = await page.evaluate(() => [...document.querySelectorAll('main > *')]
      .filter((e) => !e.querySelector('#log')).map((e) => e.innerText).join('\n'));
    for (const code of ['PROXY_BROKEN', 'LOCAL_FAIL', 'Probe 7', 'G2:']) assert(!body.includes(code), `jargon on the page: ${code}`);
    console.log(`     why: ${why}; exit ${(await page.textContent('#exit-age')).trim()}; strip: ${label}`);
    await shot(page, '08-ages.png');
  });

  // statusPage opens a page whose status answers are changed by edit (the
  // websocket blocked, so every value comes from the edited polls).
  const statusPage = async (context, edit) => {
    const p = await context.newPage();
    await p.routeWebSocket(/\/api\/v1\/ws/, (ws) => ws.close());
    await p.route(/\/api\/v1\/status$/, async (route) => {
      try {
        const r = await route.fetch();
        const st = await r.json();
        edit(st);
        await route.fulfill({ response: r, json: st });
      } catch (e) {
        // A poll in flight when the check closes the page: its answer is
        // disposed with it (CI once crashed here, "Response has been
        // disposed"). Anything else is a real failure.
        if (p.isClosed() || /disposed|closed/i.test(String(e && e.message))) return;
        throw e;
      }
    });
    await p.goto(`${opt.url}#token=${encodeURIComponent(opt.token)}`);
    return p;
  };

  await check('a WAN outage reads as one: WAN down, exit unknown, a red why line', async () => {
    const p = await statusPage(ctx, (st) => {
      delete st.why; // the page's own words for the state
      st.state = 'wan_down';
      st.signals = Object.assign({}, st.signals, { wan_down: true });
    });
    await p.waitForFunction(() => document.querySelector('#wan').textContent === 'down', null, { timeout: opt.timeoutMs });
    const why = (await p.textContent('#why-line')).trim();
    assert(/WAN down/.test(why) && /modem/.test(why), `the why line in a WAN outage reads ${JSON.stringify(why)}`);
    assert((await p.getAttribute('#why', 'data-severity')) === 'action', 'a WAN outage is not red');
    const exit = (await p.textContent('#exit')).trim();
    assert(exit === 'unknown' || exit === '–', `the exit during a WAN outage reads ${JSON.stringify(exit)} (the old one shown as live)`);
    await shot(p, '09-wan-down.png');
    await p.close();
  });

  await check('a missing Surflare client is named, on a phone too', async () => {
    const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true });
    const line = 'Surflare client not found at /usr/bin/surflare — install the Surflare client first (see docs/install.md), or set paths.surflare_bin';
    const p = await statusPage(phone, (st) => {
      st.state = 'blocked';
      st.why = { line, severity: 'action', detail: 'stat /usr/bin/surflare: no such file or directory' };
    });
    await p.waitForFunction((l) => document.querySelector('#why-line').textContent === l, line, { timeout: opt.timeoutMs });
    assert((await p.getAttribute('#why', 'data-severity')) === 'action', 'a missing client is not red');
    const detail = (await p.textContent('#why-detail')).trim();
    assert(/no such file/.test(detail), `the detail (the code) is not under the line: ${JSON.stringify(detail)}`);
    await shot(p, '10-no-client-phone.png');
    await phone.close();
  });

  await check('values from an old check are shown as stale, not as live', async () => {
    const p = await statusPage(ctx, (st) => {
      if (st.last_check) st.last_check.at = new Date(Date.now() - 10 * 60 * 1000).toISOString();
      st.check_interval_s = 30;
    });
    await p.waitForFunction(() => document.querySelector('#wan').textContent === 'unknown', null, { timeout: opt.timeoutMs });
    assert(await p.$eval('#updated', (e) => e.classList.contains('stale')), 'the header does not say the data is stale');
    const exit = (await p.textContent('#exit')).trim();
    assert(exit === 'unknown', `the exit from a 10 min old check reads ${JSON.stringify(exit)}`);
    const why = (await p.textContent('#why-line')).trim();
    assert(/No health check for 10 min/.test(why) || (await p.getAttribute('#why', 'data-severity')) !== 'ok',
      `a 10 min old check still reads as fine: ${JSON.stringify(why)}`);
    await shot(p, '11-stale.png');
    await p.close();
  });

  await check('the page is usable on a phone', async () => {
    const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true });
    const p = await phone.newPage();
    await p.goto(`${opt.url}#token=${encodeURIComponent(opt.token)}`);
    await p.waitForFunction(() => document.querySelector('#state').textContent !== '–', null, { timeout: opt.timeoutMs });
    await shot(p, '06-phone.png');
    const overflow = await p.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    if (overflow > 0) {
      // Name the culprits: the innermost elements that reach past the
      // screen, leaving out those inside a box that scrolls or clips them.
      const wide = await p.evaluate(() => {
        const w = document.documentElement.clientWidth;
        const clipped = (e) => {
          for (let a = e.parentElement; a && a !== document.body; a = a.parentElement)
            if (getComputedStyle(a).overflowX !== 'visible') return true;
          return false;
        };
        const past = (e) => e.getBoundingClientRect().right > w + 0.5 && !clipped(e);
        return [...document.querySelectorAll('body *')]
          .filter((e) => past(e) && ![...e.children].some(past))
          .slice(0, 5)
          .map((e) => `${e.tagName.toLowerCase()}${e.id ? '#' + e.id : ''}${e.className ? '.' + String(e.className).split(' ').join('.') : ''}` +
            ` (right ${Math.round(e.getBoundingClientRect().right)}px: "${e.textContent.trim().slice(0, 40)}")`);
      });
      assert(false, `the page scrolls sideways by ${overflow}px; too wide: ${wide.join(', ')}`);
    }
    const box = await p.locator('#btn-rotate').boundingBox();
    assert(box && box.height >= 36, 'the rotate button is too small to tap');
    await phone.close();
  });

  await check('no script errors', async () => {
    assert(errors.length === 0, errors.join('; '));
  });
} finally {
  await browser.close();
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
