// Shared by the AI SDK and browser tests: a fresh `botbox serve` with the buttons example
// deployed on "production" and an agent key for it.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

export const here = dirname(fileURLToPath(import.meta.url));
const bin = process.env.BOTBOX_BIN || join(here, '../../target/debug/botbox');
export const password = 'ai-sdk-test-password';

export async function startServer(extra = []) {
  const data = mkdtempSync(join(tmpdir(), 'botbox-ai-sdk-'));
  // One compiled sandbox guest for every run of these tests.
  const env = { BOTBOX_CACHE: join(tmpdir(), 'botbox-ai-sdk-cache'), ...process.env, BOTBOX_ADMIN_PASSWORD: password, BOTBOX_LOG: 'warn' };
  delete env.DATABASE_URL;
  delete env.BOTBOX_RATE_LIMIT;
  const child = spawn(bin, ['serve', '--addr', '127.0.0.1:0', '--data', data, ...extra], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  const base = await new Promise((resolve, reject) => {
    let buf = '';
    child.stdout.on('data', (d) => {
      buf += d;
      const m = buf.match(/botbox listening on (\S+)/);
      if (m) resolve(m[1]);
    });
    child.on('exit', (code) => reject(new Error(`botbox serve exited (${code})`)));
  });
  // Ready once its sandbox is up (a cold cache compiles the guest first): no test times that.
  for (const t0 = Date.now(); ; await new Promise((r) => setTimeout(r, 20))) {
    const res = await fetch(`${base}/ready`).catch(() => null);
    if (res?.status === 200) break;
    if (Date.now() - t0 > 240_000) { child.kill('SIGKILL'); throw new Error('botbox serve not ready within 240 s'); }
  }
  return { base, pid: child.pid, stop: () => { child.kill('SIGKILL'); rmSync(data, { recursive: true, force: true }); } };
}

export async function api(base, method, path, token, body) {
  const res = await fetch(base + path, {
    method,
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}


/** With BOTBOX_CONSOLE_FROM_DISK=1, `page` (or a context) takes the console's files from
 *  host/api/src/console on disk instead of the binary's compiled-in copies (the vendored
 *  ones under vendor/ too): console changes tried without a build. A console file with no
 *  source file (one the server makes, as nlu-profiles.json) comes from the server. */
export async function consoleFromDisk(page) {
  if (process.env.BOTBOX_CONSOLE_FROM_DISK !== '1') return;
  const types = { js: 'text/javascript; charset=utf-8', css: 'text/css; charset=utf-8', svg: 'image/svg+xml', json: 'application/json' };
  const root = join(here, '../../host/api/src/console');
  await page.route('**/console/**', (r) => {
    const file = decodeURIComponent(new URL(r.request().url()).pathname.replace(/^\/console\//, ''));
    const path = join(root, file);
    if (!path.startsWith(root + sep) || !existsSync(path) || !statSync(path).isFile()) return r.continue();
    r.fulfill({ path, contentType: types[file.split('.').pop()] || 'text/plain; charset=utf-8' });
  });
}

/** The API requests (`METHOD /path`: the console's own files, the page and its icon aside)
 *  `page` makes from `act` on, until `ready` shows and then the network is quiet: nothing
 *  in flight and nothing started for `quiet` ms. A request the page makes after it is drawn
 *  counts too (a hash navigation leaves the load state as it was, so `networkidle` would
 *  not wait for it). */
export async function requestsOf(page, base, act, ready, quiet = 500) {
  const origin = new URL(base).origin;
  const seen = [];
  const open = new Set();
  let last = Date.now();
  const start = (r) => {
    open.add(r);
    last = Date.now();
    const u = new URL(r.url());
    if (u.origin === origin && !u.pathname.startsWith('/console/') && u.pathname !== '/' && u.pathname !== '/favicon.ico') seen.push(`${r.method()} ${u.pathname}`);
  };
  const end = (r) => { open.delete(r); last = Date.now(); };
  page.on('request', start);
  page.on('requestfinished', end);
  page.on('requestfailed', end);
  try {
    await act();
    await page.waitForSelector(ready, { timeout: 30000 });
    for (const t0 = Date.now(); open.size || Date.now() - last < quiet; await new Promise((r) => setTimeout(r, 25))) {
      if (Date.now() - t0 > 30000) throw new Error(`requests still open 30 s after ${ready} showed: ${[...open].map((r) => r.url()).join(', ')}`);
    }
  } finally {
    page.off('request', start);
    page.off('requestfinished', end);
    page.off('requestfailed', end);
  }
  return seen;
}

/** Signs `page` in through the console's own form as `username` and waits for the header. */
export async function signIn(page, base, username, pass) {
  await page.goto(base + '/');
  await page.fill('#username', username);
  await page.fill('#password', pass);
  await page.click('#signin');
  await page.waitForSelector('#signout', { timeout: 30000 });
}

/** A server with the buttons bot deployed and an agent key: {base, key, stop}. */
export async function agent() {
  const { base, stop } = await startServer();
  try {
    const admin = (await api(base, 'POST', '/login', null, { username: 'admin', password })).id;
    const project = await api(base, 'POST', '/projects', admin, { name: 'ai-sdk' });
    const bot = JSON.parse(readFileSync(join(here, 'bot.json'), 'utf8'));
    const rev = await api(base, 'POST', `/projects/${project.id}/bot/revisions`, admin, bot);
    await api(base, 'POST', `/projects/${project.id}/deployment/versions`, admin, { version: '1.0.0', botRevision: rev.revision });
    const env = await api(base, 'POST', `/projects/${project.id}/environments`, admin, { depId: project.id, depVersion: '1.0.0', name: 'production' });
    const { key } = await api(base, 'POST', `/projects/${project.id}/environments/${env.id}/keys`, admin, { name: 'ai-sdk' });
    return { base, key, stop };
  } catch (e) {
    stop();
    throw e;
  }
}

/** Checks the page as a person on a desktop (1280 px) and a phone (390 px) would see it:
 *  nothing wider than the window (no sideways scroll, no element sticking out of it) and
 *  no serious or critical axe-core finding; a screenshot of each in `dir` as `name-*.png`.
 *  The page must already show what is checked. */
export async function inspect(page, dir, name) {
  const axe = readFileSync(join(here, 'node_modules/axe-core/axe.min.js'), 'utf8');
  const problems = [];
  const size = page.viewportSize();
  for (const [label, width] of [['desktop', 1280], ['phone', 390]]) {
    await page.setViewportSize({ width, height: 900 });
    await page.screenshot({ path: join(dir, `${name}-${label}.png`), fullPage: true });
    // BOTBOX_DOCS_SHOTS=1: the top of each page, small, for docs/console/.
    if (process.env.BOTBOX_DOCS_SHOTS) {
      await page.screenshot({ path: join(here, '../../docs/console', `${name}-${label}.jpg`), type: 'jpeg', quality: 60 });
    }
    const out = await page.evaluate(() => {
      const w = document.documentElement.clientWidth;
      const found = [];
      if (document.documentElement.scrollWidth > w) found.push(`the page is ${document.documentElement.scrollWidth} px wide`);
      // An element past the window's edge, unless a scrolling ancestor holds it.
      const scrolls = (e) => { for (let a = e.parentElement; a; a = a.parentElement) { const o = getComputedStyle(a).overflowX; if (o === 'auto' || o === 'scroll' || o === 'hidden') return true; } return false; };
      for (const e of document.querySelectorAll('body *')) {
        const r = e.getBoundingClientRect();
        if (r.width === 0 || r.height === 0) continue;
        if ((r.right > w + 1 || r.left < -1) && !scrolls(e)) found.push(`<${e.tagName.toLowerCase()}${e.id ? '#' + e.id : ''}${e.className ? '.' + String(e.className).split(' ')[0] : ''}> spans ${Math.round(r.left)}-${Math.round(r.right)} px`);
      }
      return found.slice(0, 10);
    });
    problems.push(...out.map((p) => `${label}: ${p}`));
    if (!(await page.evaluate(() => typeof window.axe === 'object'))) await page.evaluate(axe);
    const result = await page.evaluate(() => window.axe.run(document, { resultTypes: ['violations'] }));
    for (const v of result.violations.filter((x) => x.impact === 'serious' || x.impact === 'critical')) {
      problems.push(`${label}: axe ${v.id} (${v.impact}): ${v.help} at ${v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(', ')}`);
    }
  }
  if (size) await page.setViewportSize(size);
  return problems;
}
