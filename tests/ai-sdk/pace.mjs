// A person clicking through the console at a person's pace (a page every two seconds for two
// minutes) on a server with the default project-API rate limit (100 a minute) never meets a
// 429; a script that does not stop meets it, with the exact body.
// BOTBOX_PACE_SECS shortens the walk while working on it (CI runs the full two minutes).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { api, here, password, signIn, startServer } from './lib.mjs';

const executablePath = process.env.CHROMIUM_BIN || '/usr/bin/chromium';
const walkMs = Number(process.env.BOTBOX_PACE_SECS || 120) * 1000;
const { base, stop } = await startServer(); // the default rate limit
let browser;
let failed = false;
try {
  // The administrator sets up (its requests count against its own budget): a team with the
  // developer who clicks, and a deployed project of the team's.
  const admin = (await api(base, 'POST', '/login', null, { username: 'admin', password })).id;
  const dev = await api(base, 'POST', '/users', admin, { username: 'dev', password: 'dev-password', roleId: 'developer' });
  const team = (await api(base, 'POST', '/teams', admin, { name: 'acme' })).id;
  await api(base, 'POST', `/teams/${team}/users/${dev.id}`, admin, { role: 'developer' });
  const shop = await api(base, 'POST', '/projects', admin, { name: 'shop', teamId: team });
  const P = `/projects/${shop.id}`;
  const rev = await api(base, 'POST', `${P}/bot/revisions`, admin, JSON.parse(readFileSync(join(here, 'bot.json'), 'utf8')));
  await api(base, 'POST', `${P}/deployment/versions`, admin, { version: '1.0.0', botRevision: rev.revision });
  await api(base, 'POST', `${P}/environments`, admin, { depId: shop.id, depVersion: '1.0.0', name: 'production' });

  browser = await chromium.launch({ executablePath, args: ['--no-sandbox'] });
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  // Every API answer the console got, by status; the console's own files aside.
  const refused = [];
  let requests = 0;
  page.on('response', (r) => {
    const u = new URL(r.url());
    if (u.origin !== new URL(base).origin || u.pathname.startsWith('/console/') || u.pathname === '/') return;
    requests += 1;
    if (r.status() === 429) refused.push(`${r.request().method()} ${u.pathname}`);
  });
  await signIn(page, base, 'dev', 'dev-password');

  // The walk: the project list, the project, then each of its pages and back, by its links.
  const pages = [['#errors-link', '#error-filter'], ['#cases-link', '#queue'], ['#bot-link', 'details.flow'],
    ['#nl-link', '#training'], ['#cms-link', '#cms-pages'], ['#project-activity-link', '#activity-filter'],
    ['.transcripts-link', '#conversations'], ['.misunderstood-link', '#misunderstood-status'], ['.analytics-link', '#total-messages'],
    ['.keys-link', '#create-key'], ['.chat-link', '#send']];
  let views = 0;
  let next = Date.now();
  const visit = async (click, ready) => {
    // The pace is what is tested: a person reads each page for two seconds (the only wait
    // these tests make on purpose).
    await page.waitForTimeout(Math.max(0, next - Date.now()));
    next = Date.now() + 2000;
    await page.click(click);
    await page.waitForSelector(ready, { timeout: 30000 });
    views += 1;
  };
  const t0 = Date.now();
  for (let i = 0; Date.now() - t0 < walkMs; i = (i + 1) % pages.length) {
    if (i === 0) {
      await visit('header a[href="#/"]', 'main table');
      await visit(`main a[href="#/p/${shop.id}"]`, '#environments');
    }
    await visit(...pages[i]);
    await visit(`a[href="#/p/${shop.id}"]`, '#environments');
  }
  const minutes = (Date.now() - t0) / 60000;
  console.log(`pace: ${views} page views in ${minutes.toFixed(1)} min, ${requests} API requests, ${refused.length} refused`);
  assert.ok(views >= Math.floor(walkMs / 2000) - 1, `only ${views} page views`);
  assert.deepEqual(refused, [], 'a person clicking met the rate limit');
  assert.deepEqual(errors, []);

  // A script that does not stop meets the limit, with the exact body and headers.
  const token = (await api(base, 'POST', '/login', null, { username: 'dev', password: 'dev-password' })).id;
  let last;
  for (let n = 0; n < 202; n++) {
    last = await fetch(`${base}/projects`, { headers: { authorization: `Bearer ${token}` } });
    if (last.status === 429) break;
    await last.arrayBuffer();
  }
  assert.equal(last.status, 429);
  assert.equal(await last.text(), 'Ratelimit exceeded! 100 per minute');
  assert.equal(last.headers.get('ratelimit-limit'), '100');
  console.log('pace.mjs: all passed');
} catch (e) {
  failed = true;
  console.error(e);
} finally {
  await browser?.close();
  stop();
}
process.exit(failed ? 1 : 0);
