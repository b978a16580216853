// Learning from production in a real browser (Debian's `chromium`, CHROMIUM_BIN to override):
// alice's pizza-nl bot (examples/pizza-nl: the NLU's entities, trained on its sentences; the
// bot as pizza-nl.json) on production with a generic channel, users' messages through its
// webhook. On production's Misunderstood page she labels "sup dude" greet of pizza-nl
// (it leaves the New list), trains (the NLU then predicts greet) and dismisses "play some
// jazz music"; a second revision with another greeting, replayed against production from
// its dialog, shows the greeted users' conversations differing, before and after side by
// side. Each page at 1280 and 390 px: no sideways scroll, no serious axe-core finding;
// screenshots in screens/.
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { api, consoleFromDisk, here, inspect, password, signIn, startServer } from './lib.mjs';

const executablePath = process.env.CHROMIUM_BIN || '/usr/bin/chromium';
// The channel's replies go to a loopback URL.
const { base, stop } = await startServer(['--rate-limit', '10000', '--allow-private-egress']);
const dir = join(here, 'screens');
mkdirSync(dir, { recursive: true });
const example = join(here, '../../examples/pizza-nl');
/** examples/pizza-nl/nlu.yml's entities. */
const ENTITIES = {
  intent: { type: 'trait', profile: 'intent', labels: ['order', 'greet', 'cancel'] },
  pizza: { type: 'dict', profile: 'default', dictionary: {
    pepperoni: ['pepperoni', 'peperoni', 'salami'],
    veggie: ['veggie', 'vegetarian', 'vegetable', 'vegan'],
    margherita: ['margherita', 'margarita', 'cheese'],
  } },
  qty: { type: 'phrase', profile: 'number', belongsTo: 'pizza' },
};
/** What each channel user says: three spellings of one misunderstood text, another one,
 *  two greetings the greet flow answers and an order. */
const SAID = [['u1', 'Sup dude'], ['u2', 'Sup dude'], ['u3', 'sup dude!'], ['u4', 'Play some jazz music'],
  ['u5', 'hello'], ['u6', 'hi there'], ['u7', 'i want a pizza']];
let browser;
let page;
const errors = [];
const layout = [];
let failed = false;

/** A form-data POST (`sentence` fields, a training `file`) as `token`: the JSON answer. */
async function form(path, token, sentences, file) {
  const f = new FormData();
  for (const s of sentences) f.append('sentence', s);
  if (file) f.append('file', new Blob([readFileSync(file, 'utf8')], { type: 'text/plain' }), 'training.txt');
  const res = await fetch(base + path, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: f });
  const text = await res.text();
  if (!res.ok) throw new Error(`POST ${path}: ${res.status} ${text}`);
  return JSON.parse(text);
}

/** A channel user's text message through the channel's webhook. */
async function say(channel, userId, content) {
  const res = await fetch(`${base}/webhooks/${channel}`, { method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ userId, messages: [{ type: 'text', content }] }) });
  assert.equal(res.status, 200, await res.text());
}

/** Waits until `check()` gives something truthy (its value), at most 30 s. */
async function until(what, check) {
  for (const t0 = Date.now(); ; await new Promise((r) => setTimeout(r, 200))) {
    const v = await check();
    if (v) return v;
    if (Date.now() - t0 > 30000) throw new Error(`timed out waiting for ${what}`);
  }
}

/** The page at 1280 and 390 px: no sideways scroll, then inspect's checks (nothing past the
 *  window's edge, axe-core) with screenshots. */
async function look(name) {
  for (const width of [1280, 390]) {
    await page.setViewportSize({ width, height: 900 });
    const [scroll, inner] = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
    if (scroll > inner) layout.push(`${name} at ${width} px: ${scroll} px wide`);
  }
  layout.push(...(await inspect(page, dir, `learning-${name}`)).map((p) => `${name}: ${p}`));
  await page.setViewportSize({ width: 1280, height: 900 });
}

/** Where a difference's before and after are: side by side (true) or one under the other. */
async function sideBySide(card) {
  const before = await card.locator('.side.before').boundingBox();
  const after = await card.locator('.side.after').boundingBox();
  return Math.abs(before.y - after.y) < 2 && after.x >= before.x + before.width;
}

try {
  // Alice (the bot's nluId is alice:pizza-nl) and her project with its NLU, trained.
  const admin = (await api(base, 'POST', '/login', null, { username: 'admin', password })).id;
  await api(base, 'POST', '/users', admin, { username: 'alice', password: 'alice-password', roleId: 'developer' });
  const alice = (await api(base, 'POST', '/login', null, { username: 'alice', password: 'alice-password' })).id;
  const project = await api(base, 'POST', '/projects', alice, { name: 'pizza-nl', options: { bot: true, nlu: true, nluLang: 'en' } });
  const P = `/projects/${project.id}`;
  const N = `${P}/nlus/pizza-nl`;
  await api(base, 'PUT', N, alice, { entities: ENTITIES });
  const training = await form(`${N}/train`, alice, [], join(example, 'training.txt'));
  assert.equal(training.status, 'success', JSON.stringify(training));

  // The bot on production with a generic channel; what its users said.
  const bot = JSON.parse(readFileSync(join(here, 'pizza-nl.json'), 'utf8'));
  const rev1 = await api(base, 'POST', `${P}/bot/revisions`, alice, bot);
  await api(base, 'POST', `${P}/deployment/versions`, alice, { version: '1.0.0', botRevision: rev1.revision });
  const env = await api(base, 'POST', `${P}/environments`, alice, { depId: project.id, depVersion: '1.0.0', name: 'production' });
  const channel = await api(base, 'POST', `${P}/environments/${env.id}/channels`, alice, { name: 'web', type: 'generic', url: 'http://127.0.0.1:9/r' });
  for (const [user, text] of SAID) await say(channel.id, user, text);
  const I = `${P}/environments/${env.id}/misunderstood`;
  const inbox = await until('the inbox', async () => {
    const r = await api(base, 'GET', `${I}?status=new`, alice);
    return r.total === 2 ? r : null;
  });
  assert.deepEqual(inbox.data.map((g) => [g.text, g.count]), [['sup dude', 3], ['play some jazz music', 1]]);
  const before = await form(`${N}/predict`, alice, ['sup dude']);
  assert.notEqual(before.result.intent?.[0]?.value, 'greet', JSON.stringify(before.result));

  browser = await chromium.launch({ executablePath, headless: true, args: ['--no-sandbox'] });
  page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await consoleFromDisk(page);
  page.on('pageerror', (e) => errors.push(String(e)));
  await signIn(page, base, 'alice', 'alice-password');

  // Production's Misunderstood page: the groups, most frequent first, with their counts.
  await page.goto(`${base}/#/p/${project.id}`);
  await page.click('#environments [data-env="production"] a.misunderstood-link', { timeout: 30000 });
  const howdy = '#misunderstood tr[data-text="sup dude"]';
  const jazz = '#misunderstood tr[data-text="play some jazz music"]';
  await page.waitForSelector(howdy, { timeout: 30000 });
  assert.equal((await page.textContent(`${howdy} td.count`)).trim(), '3');
  assert.ok((await page.textContent(howdy)).includes('other in flow fallback'), await page.textContent(howdy));
  const sample = await page.getAttribute(`${howdy} a.sample-link`, 'href');
  assert.ok(['u1', 'u2', 'u3'].some((u) => sample === `#/p/${project.id}/transcripts/production/${u}`), sample);
  assert.ok(await page.isHidden('#misunderstood-train'), 'Train waits for a label');
  await look('misunderstood');

  // Labelled greet of pizza-nl: it leaves the New list, and is under Labelled.
  await page.selectOption(`${howdy} select.label-pick`, { label: 'greet' });
  await page.click(`${howdy} button.label`);
  await page.waitForSelector('#misunderstood-result >> text=Labelled “sup dude” greet in pizza-nl', { timeout: 30000 });
  assert.equal(await page.locator(howdy).count(), 0);
  assert.equal(await page.locator(jazz).count(), 1);
  const labelled = await api(base, 'GET', `${I}?status=labelled`, alice);
  assert.deepEqual(labelled.data.map((g) => [g.text, g.label, g.nluId]), [['sup dude', 'greet', 'pizza-nl']]);

  // Train: the NLU predicts greet for it now.
  await page.click('#misunderstood-train button.train[data-nlu="pizza-nl"]');
  await page.waitForSelector('#misunderstood-train-result >> text=Trained pizza-nl', { timeout: 120000 });
  const after = await form(`${N}/predict`, alice, ['sup dude']);
  assert.equal(after.result.intent[0].value, 'greet', JSON.stringify(after.result));
  await page.selectOption('#misunderstood-status', 'labelled');
  await page.waitForSelector(`${howdy} >> text=greet in pizza-nl`, { timeout: 30000 });

  // Dismissed: the New list is empty.
  await page.selectOption('#misunderstood-status', 'new');
  await page.click(`${jazz} button.dismiss`, { timeout: 30000 });
  await page.waitForSelector('#misunderstood-result >> text=Dismissed “play some jazz music”.', { timeout: 30000 });
  await page.waitForSelector('#misunderstood-empty >> text=Nothing misunderstood: every message was understood.', { timeout: 30000 });
  const dismissed = await api(base, 'GET', `${I}?status=dismissed`, alice);
  assert.deepEqual(dismissed.data.map((g) => g.text), ['play some jazz music']);

  // A second revision with another greeting, replayed against production from its dialog.
  const changed = structuredClone(bot);
  changed.flows.greet.states.hi.action.options.text = 'Hello there! Want a pizza?';
  const rev2 = await api(base, 'POST', `${P}/bot/revisions`, alice, changed);
  await page.goto(`${base}/#/p/${project.id}`);
  const replay = `#revisions button.replay[data-version="${rev2.version}"]`;
  await page.waitForSelector(replay, { timeout: 30000 });
  assert.equal((await page.textContent(replay)).trim(), 'Replay against production…');
  await page.click(replay);
  await page.waitForSelector('#replay-dialog[open]', { timeout: 30000 });
  assert.equal(await page.inputValue('#replay-env'), env.id);
  assert.equal(await page.inputValue('#replay-last'), '100');
  await look('replay-dialog');
  await page.click('#replay-confirm');

  // The results: the counts as the API says them; the greeted users' conversations differ,
  // the old and the new greeting side by side (one under the other on a phone).
  await page.waitForSelector('#replay-counts', { timeout: 120000 });
  const id = decodeURIComponent(new URL(page.url()).hash.split('/').pop());
  const r = await api(base, 'GET', `${P}/replays/${id}`, alice);
  assert.equal(r.status, 'done', JSON.stringify(r));
  assert.equal(r.conversations, SAID.length, JSON.stringify(r));
  for (const k of ['conversations', 'identical', 'differing', 'failed']) {
    assert.equal((await page.textContent(`#replay-counts [data-count="${k}"] .n`)).trim(), String(r[k]), k);
  }
  assert.ok(r.differing >= 2, JSON.stringify(r));
  assert.equal(await page.locator('#replay .replay-result').count(), r.differing + r.failed);
  const greeted = page.locator('#replay .replay-result.differing[data-user="u5"]');
  assert.equal((await greeted.locator('q.input').textContent()).trim(), 'hello');
  assert.equal((await greeted.locator('.side.before .bubble').textContent()).trim(), 'Hello! Want a pizza?');
  assert.equal((await greeted.locator('.side.after .bubble').textContent()).trim(), 'Hello there! Want a pizza?');
  assert.equal(await page.locator('#replay .replay-result.differing[data-user="u6"]').count(), 1);
  assert.equal(await page.locator('#replay .replay-result[data-user="u7"]').count(), 0, 'the order was answered as before');
  assert.ok(await sideBySide(greeted), 'before and after side by side at 1280 px');
  await page.setViewportSize({ width: 390, height: 900 });
  assert.ok(!(await sideBySide(greeted)), 'before and after one under the other at 390 px');
  await page.setViewportSize({ width: 1280, height: 900 });
  await look('replay');

  assert.deepEqual(errors, []);
  assert.deepEqual(layout, [], layout.join('\n'));
  console.log('ok learning: misunderstood labelled, trained and dismissed; a replay\'s differences side by side');
} catch (e) {
  failed = true;
  console.error(e);
  if (layout.length) console.error(layout.join('\n'));
  if (page) {
    await page.screenshot({ path: join(dir, 'learning-failure.png'), fullPage: true }).catch(() => {});
    console.error('the page:', await page.textContent('main').catch(() => '?'));
  }
} finally {
  if (browser) await browser.close();
  stop();
}
process.exit(failed ? 1 : 0);
