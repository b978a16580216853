// The console's CMS page in a real browser (Debian's `chromium`, CHROMIUM_BIN to override):
// a project's content shown as a form (each element type with its control), a bad name and a
// server-side problem said where they are, an element edited and an FAQ added, publish with a
// changelog, the revision deployed from the deploy dialog with that CMS revision, and the chat
// answering with the new text. Each page is checked at 1280 and 390 px (nothing sticks out,
// axe-core finds nothing serious); screenshots in artifacts/.
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { api, consoleFromDisk, here, inspect, password, signIn, startServer } from './lib.mjs';

const executablePath = process.env.CHROMIUM_BIN || '/usr/bin/chromium';
// The people's pace against the default rate limit is pace.mjs's; this test makes many requests.
const { base, stop } = await startServer(['--rate-limit', '10000']);
const dir = join(here, 'artifacts');
mkdirSync(dir, { recursive: true });
let browser;
let page;
let failed = false;
try {
  const admin = (await api(base, 'POST', '/login', null, { username: 'admin', password })).id;
  const shop = await api(base, 'POST', '/projects', admin, { name: 'shop', options: { bot: true, cms: true } });
  const P = `/projects/${shop.id}`;
  await api(base, 'POST', `${P}/bot/revisions`, admin, { name: 'shop', flows: { main: {
    intents: { any: { initial: true, type: 'text' } },
    states: { init: { initial: true, transitions: { greet: "intent == 'any'" } },
      greet: { end: true, action: [{ name: 'text', options: { text: '$(cms.home.greeting.text.value)' } }] } },
    actions: {} } } });
  await api(base, 'POST', `${P}/cms/revisions`, admin, { changelog: 'first content', pages: { home: { greeting: {
    text: { type: 'text', value: 'Hello from v1', label: 'Greeting' },
    tags: { type: 'textlist', value: ['new', 'sale'] },
    size: { type: 'slider', value: 3, min: 1, max: 5 },
    color: { type: 'dropdown', value: 'red', options: ['red', 'blue'] },
    open: { type: 'toggle', value: true },
  } } }, faqs: { hours: { questions: ['when are you open'], answers: ['9 to 5'] } } });

  browser = await chromium.launch({ executablePath, headless: true, args: ['--no-sandbox'] });
  page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await consoleFromDisk(page);
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await signIn(page, base, 'admin', password);
  await page.click('a >> text=shop', { timeout: 30000 });
  await page.click('#cms-link', { timeout: 30000 });

  // Each element type with its own control, holding the published value.
  await page.waitForSelector('#cms-home-greeting-text', { timeout: 30000 });
  assert.equal(await page.inputValue('#cms-home-greeting-text'), 'Hello from v1');
  assert.equal(await page.inputValue('#cms-home-greeting-tags'), 'new\nsale');
  assert.equal(await page.getAttribute('#cms-home-greeting-size', 'type'), 'range');
  assert.equal(await page.inputValue('#cms-home-greeting-color'), 'red');
  assert.equal(await page.isChecked('#cms-home-greeting-open'), true);
  assert.equal(await page.inputValue('#cms-faq-hours-a'), '9 to 5');
  const problems = await inspect(page, dir, 'cms');
  assert.deepEqual(problems, []);

  // A bad element name is said before anything is sent; an FAQ without questions is the
  // server's problem, listed at its place; nothing is published.
  await page.fill('#cms-new-name', 'two words');
  await page.click('#cms-add');
  await page.waitForSelector('.cms-add [role=alert] >> text=a letter or _', { timeout: 30000 });
  await page.fill('#cms-new-faq', 'delivery');
  await page.click('#cms-add-faq');
  await page.click('#cms-publish');
  await page.waitForSelector('#cms-problems >> text=faqs.delivery: questions', { timeout: 30000 });
  assert.equal((await api(base, 'GET', `${P}/cms/revisions`, admin)).data.length, 2);

  // Edit: the greeting, the FAQ's questions and answers, a new textarea element; publish.
  await page.fill('#cms-home-greeting-text', 'Hello from the console');
  await page.fill('#cms-faq-delivery-q', 'do you deliver\nhow long does shipping take');
  await page.fill('#cms-faq-delivery-a', 'In two days.');
  await page.fill('#cms-new-name', 'note');
  await page.selectOption('#cms-new-type', 'textarea');
  await page.click('#cms-add');
  await page.fill('#cms-home-greeting-note', 'Two lines\nof text');
  await page.fill('#cms-changelog', 'a warmer greeting');
  await page.click('#cms-publish');
  await page.waitForSelector('#status >> text=Published CMS revision', { timeout: 30000 });
  const latest = await api(base, 'GET', `${P}/cms`, admin);
  assert.equal(latest.changelog, 'a warmer greeting');
  assert.equal(latest.pages.home.greeting.text.value, 'Hello from the console');
  assert.equal(latest.pages.home.greeting.note.value, 'Two lines\nof text');
  assert.deepEqual(latest.faqs.delivery, { questions: ['do you deliver', 'how long does shipping take'], answers: ['In two days.'] });
  await page.waitForSelector('#cms-revisions >> text=a warmer greeting', { timeout: 30000 });

  // Deploy from the project page: the dialog offers the CMS revisions, the latest first.
  await page.click('a >> text=← Project');
  await page.click('#revisions button.deploy', { timeout: 30000 });
  await page.waitForSelector('#deploy-dialog[open]', { timeout: 30000 });
  assert.equal(await page.inputValue('#deploy-cms'), latest.revision);
  const firstOption = await page.textContent('#deploy-cms option:first-child');
  assert.ok(firstOption.includes('a warmer greeting') && firstOption.endsWith('(latest)'), firstOption);
  assert.deepEqual(await inspect(page, dir, 'deploy-dialog'), []);
  await page.fill('#deploy-env', 'production');
  await page.click('#deploy-confirm');
  await page.waitForSelector('#environments >> text=production', { timeout: 30000 });
  const dep = (await api(base, 'GET', `${P}/deployment/versions`, admin)).data[0];
  assert.equal(dep.cmsRevision, latest.revision);

  // The chat on production answers with the published text.
  await page.click('#environments a.chat-link');
  await page.fill('#text', 'hi');
  await page.click('#send');
  await page.waitForSelector('.bubble.bot >> text=Hello from the console', { timeout: 30000 });

  // An older revision loads into the editor to publish again.
  await page.goto(`${base}/#/p/${shop.id}/cms`);
  // The page says which CMS revision each environment runs, in the list and by revision.
  await page.waitForSelector('#cms-envs', { timeout: 30000 });
  const envs = await page.textContent('#cms-envs');
  assert.ok(envs.includes(`production runs deployment ${dep.version}: ${latest.revision.slice(0, 10)} · a warmer greeting`), envs);
  assert.equal(await page.textContent('#cms-revisions tr:has-text("a warmer greeting") td.runs-in'), 'production');
  assert.equal(await page.textContent('#cms-revisions tr:has-text("first content") td.runs-in'), '');
  await page.click('#cms-revisions tr:has-text("first content") button.load', { timeout: 30000 });
  await page.waitForSelector('#cms-state >> text=Unpublished changes', { timeout: 30000 });
  assert.equal(await page.inputValue('#cms-home-greeting-text'), 'Hello from v1');
  assert.deepEqual(errors, []);
  console.log('ok cms: form editor, problems at their place, publish, deploy dialog with the CMS revision, chat reads it');
} catch (e) {
  failed = true;
  console.error(e);
  if (page) {
    await page.screenshot({ path: join(dir, 'cms-failure.png'), fullPage: true }).catch(() => {});
    console.error('page:', await page.textContent('main').catch(() => '?'));
    console.error('status:', await page.textContent('#status').catch(() => '?'));
  }
} finally {
  if (browser) await browser.close();
  stop();
}
process.exit(failed ? 1 : 0);
