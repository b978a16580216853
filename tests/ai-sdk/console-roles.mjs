// The console by role, in a real browser (Debian's `chromium`, CHROMIUM_BIN to override): a
// team project (acme's) with two pushes, two deployment versions, production and a canary
// started through the API. Its viewer sees the canary but no control that changes anything,
// and the read-only sentence once; its developer sees the canary's figures with Promote and
// Abort, is told in the console's words when a refusal comes (demoted meanwhile by the team
// admin from the members card), and sees Abort's result in view on a phone; a new canary from
// the canary dialog, promoted; the newest revision deployed as a canary from the deploy
// dialog; the project's Activity lists canary.start; an administrator's Activity. Each
// page at 1280 and 390 px: no sideways scroll, no serious axe-core finding; screenshots in
// screens/.
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { api, here, inspect, password, signIn, startServer } from './lib.mjs';

const executablePath = process.env.CHROMIUM_BIN || '/usr/bin/chromium';
const { base, stop } = await startServer(['--rate-limit', '10000']);
const dir = join(here, 'screens');
mkdirSync(dir, { recursive: true });
let browser;
const pages = [];
const errors = [];
const layout = [];
let failed = false;

/** A fresh browser context signed in as `username`: its own session storage. */
async function signedIn(username, pass) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  page.on('pageerror', (e) => errors.push(`${username}: ${e}`));
  page.on('dialog', (d) => d.accept());
  pages.push([username, page]);
  await signIn(page, base, username, pass);
  return page;
}

/** The page at 1280 and 390 px: no sideways scroll, then inspect's checks (nothing past the
 *  window's edge, axe-core) with screenshots. */
async function look(page, name) {
  for (const width of [1280, 390]) {
    await page.setViewportSize({ width, height: 900 });
    const [scroll, inner] = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
    if (scroll > inner) layout.push(`${name} at ${width} px: ${scroll} px wide`);
  }
  layout.push(...(await inspect(page, dir, `roles-${name}`)).map((p) => `${name}: ${p}`));
  await page.setViewportSize({ width: 1280, height: 900 });
}

/** Whether the element is wholly inside the window. */
async function inView(page, selector) {
  const box = await page.locator(selector).boundingBox();
  const size = page.viewportSize();
  return box && box.y >= -1 && box.x >= -1 && box.y + box.height <= size.height + 1 && box.x + box.width <= size.width + 1;
}

try {
  // People: a team admin who makes team acme, a developer and a viewer in it.
  const admin = (await api(base, 'POST', '/login', null, { username: 'admin', password })).id;
  const people = {};
  for (const name of ['ta', 'dev', 'viewer']) {
    const u = await api(base, 'POST', '/users', admin, { username: name, password: `${name}-password`, roleId: 'developer' });
    people[name] = { id: u.id, pass: `${name}-password`, token: (await api(base, 'POST', '/login', null, { username: name, password: `${name}-password` })).id };
  }
  const acme = (await api(base, 'POST', '/teams', people.ta.token, { name: 'acme' })).id;
  await api(base, 'POST', `/teams/${acme}/users/${people.dev.id}`, people.ta.token, { role: 'developer' });
  await api(base, 'POST', `/teams/${acme}/users/${people.viewer.id}`, people.ta.token, { role: 'viewer' });
  const shop = await api(base, 'POST', '/projects', people.ta.token, { name: 'shop', options: { bot: true }, teamId: acme });
  const P = `/projects/${shop.id}`;
  // Two pushes (the team admin's, then the developer's), a deployment of each, production on
  // the first and a canary of the second for 10 % of its users, started by the developer.
  const bot = JSON.parse(readFileSync(join(here, 'bot.json'), 'utf8'));
  const rev1 = await api(base, 'POST', `${P}/bot/revisions`, people.ta.token, bot);
  const rev2 = await api(base, 'POST', `${P}/bot/revisions`, people.dev.token, { ...bot, desc: 'the second push' });
  await api(base, 'POST', `${P}/deployment/versions`, people.ta.token, { version: '1.0.2', botRevision: rev1.revision });
  await api(base, 'POST', `${P}/deployment/versions`, people.ta.token, { version: '1.0.3', botRevision: rev2.revision });
  const prod = await api(base, 'POST', `${P}/environments`, people.ta.token, { depId: shop.id, depVersion: '1.0.2', name: 'production' });
  const started = await api(base, 'PUT', `${P}/environments/${prod.id}/canary`, people.dev.token, { depVersion: '1.0.3', share: 10 });
  assert.equal(started.canary.depVersion, '1.0.3');
  const overview = await api(base, 'GET', `${P}/overview`, people.viewer.token);
  assert.equal(overview.access.role, 'viewer', JSON.stringify(overview.access));

  browser = await chromium.launch({ executablePath, headless: true, args: ['--no-sandbox'] });

  // The viewer: the canary's split and figures, no control that changes anything, the
  // read-only sentence once.
  const viewer = await signedIn('viewer', people.viewer.pass);
  await viewer.goto(`${base}/#/p/${shop.id}`);
  await viewer.waitForSelector('#environments .canary', { timeout: 30000 });
  assert.equal((await viewer.textContent('#environments .split')).trim(), '1.0.3 for 10 % of users, 1.0.2 for the rest');
  assert.equal(await viewer.textContent('#read-only'), 'You have read access to this project (viewer): changes are made by its developers.');
  assert.equal((await viewer.textContent('main')).split('You have read access').length - 1, 1);
  const forbidden = /publish|deploy|roll ?back|promote|abort|canary|create key|save|push|train/i;
  const names = await viewer.getByRole('button').evaluateAll((bs) => bs.map((b) => (b.getAttribute('aria-label') || b.textContent || '').trim()));
  assert.deepEqual(names.filter((n) => forbidden.test(n)), [], names.join(', '));
  assert.equal(await viewer.getByRole('button', { name: forbidden }).count(), 0);
  assert.equal(await viewer.locator('main input, main textarea, main select, dialog').count(), 0);
  assert.equal(await viewer.locator('#team-members').count(), 0, 'a viewer manages no members');
  assert.equal(await viewer.locator('#activity-link').count(), 0, 'the every-tenant Activity is for administrators');
  await look(viewer, 'viewer-project');

  // The team admin: the members card (a developer sees none).
  const ta = await signedIn('ta', people.ta.pass);
  await ta.goto(`${base}/#/p/${shop.id}`);
  await ta.waitForSelector('#members tr[data-member="viewer"]', { timeout: 30000 });
  await look(ta, 'team-admin-project');

  // The developer: both versions' figures, who started it, Promote and Abort.
  const dev = await signedIn('dev', people.dev.pass);
  await dev.goto(`${base}/#/p/${shop.id}`);
  await dev.waitForSelector('#environments .canary', { timeout: 30000 });
  const figures = await dev.textContent('#environments .canary-figures');
  assert.ok(figures.includes('1.0.3') && figures.includes('1.0.2') && figures.includes('0.0 %'), figures);
  assert.ok((await dev.textContent('#environments .canary')).includes('Started by dev'));
  assert.equal(await dev.getByRole('button', { name: 'Promote' }).count(), 1);
  assert.equal(await dev.getByRole('button', { name: 'Abort' }).count(), 1);
  assert.equal(await dev.locator('#team-members').count(), 0, 'a developer manages no members');
  assert.equal(await dev.locator('#read-only').count(), 0);
  // Who pushed and who deployed.
  assert.ok((await dev.textContent('#revisions')).includes('dev') && (await dev.textContent('#revisions')).includes('ta'));
  assert.ok((await dev.textContent('#deployments')).includes('ta'));
  await look(dev, 'developer-project');

  // Meanwhile the team admin makes the developer a viewer: Promote is refused, said in the
  // console's words beside the canary, in view; the canary still runs.
  await ta.selectOption('select[aria-label="Role of dev"]', 'viewer');
  await ta.click('#members tr[data-member="dev"] button.set-role');
  await ta.waitForSelector('#team-members .result >> text=dev is viewer now.', { timeout: 30000 });
  await dev.setViewportSize({ width: 1280, height: 900 });
  await dev.getByRole('button', { name: 'Promote' }).click();
  const refused = `[data-result-for="${prod.id}"]`;
  await dev.waitForSelector(`${refused}.error >> text=Your role on this project (viewer) may not promote a canary.`, { timeout: 30000 });
  assert.ok(!(await dev.textContent(refused)).startsWith("You're not authorized"), await dev.textContent(refused));
  assert.ok(await inView(dev, refused), 'the refusal is in view');
  assert.equal((await api(base, 'GET', `${P}/overview`, admin)).environments[0].canary.depVersion, '1.0.3');

  // A developer again: Abort on a phone, the result beside the card and in view.
  await api(base, 'POST', `/teams/${acme}/users/${people.dev.id}`, people.ta.token, { role: 'developer' });
  await dev.setViewportSize({ width: 390, height: 700 });
  await dev.goto(`${base}/#/p/${shop.id}`);
  await dev.reload();
  const abort = dev.getByRole('button', { name: 'Abort' });
  await abort.waitFor({ timeout: 30000 });
  await abort.scrollIntoViewIfNeeded();
  await abort.click();
  await dev.waitForSelector(`${refused} >> text=Aborted the canary`, { timeout: 30000 });
  assert.ok(await inView(dev, refused), `the result is out of view: ${JSON.stringify(await dev.locator(refused).boundingBox())}`);
  assert.match(await dev.textContent('#environments .last-canary'), /1\.0\.3 aborted by dev/);
  assert.equal((await api(base, 'GET', `${P}/overview`, admin)).environments[0].canary, undefined);

  // A new canary from the dialog: 1.0.3 for 20 %.
  await dev.setViewportSize({ width: 1280, height: 900 });
  await dev.click('#environments button.start-canary');
  await dev.waitForSelector('#canary-dialog[open]', { timeout: 30000 });
  assert.equal(await dev.inputValue('#canary-version'), '1.0.3');
  await dev.fill('#canary-share', '20');
  await look(dev, 'canary-dialog');
  await dev.click('#canary-confirm');
  await dev.waitForSelector(`${refused} >> text=Started the canary`, { timeout: 30000 });
  assert.equal((await dev.textContent('#environments .split')).trim(), '1.0.3 for 20 % of users, 1.0.2 for the rest');

  // Promoted from the card: production runs 1.0.3 for everyone, no canary runs.
  await dev.getByRole('button', { name: 'Promote' }).click();
  await dev.waitForSelector(`${refused} >> text=Promoted 1.0.3`, { timeout: 30000 });
  assert.equal((await dev.textContent('#environments .env-version')).trim(), '1.0.3');
  assert.equal((await api(base, 'GET', `${P}/overview`, admin)).environments[0].canary, undefined);

  // The newest revision deployed as a canary from the deploy dialog: offered for production
  // (which has none running), not for a new environment; 1.0.4 for 25 % on a phone, the
  // result beside the card and in view.
  await dev.click(`#revisions button.deploy[data-version="${rev2.version}"]`);
  await dev.waitForSelector('#deploy-dialog[open]', { timeout: 30000 });
  assert.equal(await dev.inputValue('#deploy-env'), 'production');
  assert.ok(await dev.isVisible('#deploy-how'), 'the canary choice is offered for production');
  assert.ok(await dev.isChecked('#deploy-move'), 'moving the environment is the default');
  await dev.fill('#deploy-env', 'staging');
  assert.ok(await dev.isHidden('#deploy-how'), 'no canary choice for a new environment');
  await dev.fill('#deploy-env', 'production');
  await dev.check('#deploy-as-canary');
  assert.equal(await dev.inputValue('#deploy-share'), '10');
  await dev.fill('#deploy-share', '25');
  await look(dev, 'deploy-canary-dialog');
  await dev.setViewportSize({ width: 390, height: 700 });
  await dev.click('#deploy-confirm');
  await dev.waitForSelector(`${refused} >> text=Deployed 1.0.4 as a canary for 25 % of production's users.`, { timeout: 30000 });
  assert.ok((await dev.textContent('#environments .split')).includes('for 25 % of users'), await dev.textContent('#environments .split'));
  assert.equal((await dev.textContent('#environments .split')).trim(), '1.0.4 for 25 % of users, 1.0.3 for the rest');
  assert.ok(await inView(dev, refused), `the result is out of view: ${JSON.stringify(await dev.locator(refused).boundingBox())}`);
  assert.equal(await dev.locator('#deploy-dialog').count(), 0);
  const canaryNow = (await api(base, 'GET', `${P}/overview`, admin)).environments[0].canary;
  assert.equal(canaryNow.depVersion, '1.0.4');
  assert.equal(canaryNow.share, 25);
  await dev.setViewportSize({ width: 1280, height: 900 });

  // The project's Activity: the canary's start, who did it; filtered by action.
  await dev.click('#project-activity-link');
  await dev.waitForSelector('#activity tr[data-action="canary.start"]', { timeout: 30000 });
  assert.ok((await dev.textContent('#activity tr[data-action="canary.start"]')).includes('dev'));
  await dev.fill('#activity-action', 'canary.start');
  await dev.click('#activity-filter');
  await dev.waitForFunction(() => [...document.querySelectorAll('#activity tbody tr')].every((r) => r.dataset.action === 'canary.start'), null, { timeout: 30000 });
  assert.equal(await dev.locator('#activity tbody tr').count(), 3);
  await look(dev, 'project-activity');
  assert.equal(await dev.locator('#activity-link').count(), 0);

  // An administrator's Activity: every tenant's entries, linked in the top navigation.
  const root = await signedIn('admin', password);
  await root.click('#activity-link');
  await root.waitForSelector('#activity tr[data-action="canary.start"]', { timeout: 30000 });
  assert.ok(await root.locator('#activity tr[data-action="team.create"]').count() >= 1);
  await look(root, 'admin-activity');

  assert.deepEqual(errors, []);
  assert.deepEqual(layout, [], layout.join('\n'));
  console.log('ok console roles: viewer read-only, refusals in words and in view, canary promote/abort/start, deploy as a canary, activity');
} catch (e) {
  failed = true;
  console.error(e);
  if (layout.length) console.error(layout.join('\n'));
  for (const [who, page] of pages) {
    await page.screenshot({ path: join(dir, `roles-failure-${who}.png`), fullPage: true }).catch(() => {});
    console.error(`${who}'s page:`, await page.textContent('main').catch(() => '?'));
  }
} finally {
  if (browser) await browser.close();
  stop();
}
process.exit(failed ? 1 : 0);
