// NL Studio in a real browser (Debian's `chromium`, CHROMIUM_BIN to override): a team
// project with an NLU, made through the API. Its developer creates a trait, a phrase and a
// dictionary entity on the page (a refused name shows the server's words and keeps what was
// typed; creating costs one request), edits one, deletes one after a confirmation (a refused
// delete says why), adds sentences and trains (a refused one is named by its line in the box
// and left there to fix), edits a sentence's text (its labels move with their words, checked
// through the API; a refused edit keeps the text), removes a label, deletes a sentence, and
// trains again with nothing typed. A page view costs at most three API requests, counted
// until the network is quiet after the page shows (a fourth made later still counts). The
// team's viewer sees the page without any control that changes it. At 1280 and 390 px: no
// sideways scroll, no serious axe-core finding; screenshots in screens/.
// BOTBOX_CONSOLE_FROM_DISK=1 serves the console's files from the source tree.
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { api, consoleFromDisk, here, inspect, password, requestsOf, signIn, startServer } from './lib.mjs';

const executablePath = process.env.CHROMIUM_BIN || '/usr/bin/chromium';
const { base, stop } = await startServer(['--rate-limit', '10000']);
const dir = join(here, 'screens');
mkdirSync(dir, { recursive: true });
let browser;
const pages = [];
const errors = [];
const layout = [];
const dialogs = [];
let dismissNext = false;
let failed = false;

/** A fresh browser context signed in as `username`. Confirmations are accepted unless
 *  `dismissNext` says otherwise. */
async function signedIn(username, pass) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  await consoleFromDisk(context);
  const page = await context.newPage();
  page.on('pageerror', (e) => errors.push(`${username}: ${e}`));
  page.on('dialog', async (d) => {
    dialogs.push(d.message());
    if (dismissNext) { dismissNext = false; await d.dismiss(); } else await d.accept();
  });
  pages.push([username, page]);
  await signIn(page, base, username, pass);
  return page;
}

/** Clicks `selector` and dismisses the confirmation it asks: the requests the click made
 *  (the handler has run when the click returns, confirm being synchronous, and a request
 *  it made is reported before the answer of the round trip that follows). */
async function dismissing(page, selector) {
  const seen = [];
  const on = (r) => { if (!new URL(r.url()).pathname.startsWith('/console/')) seen.push(`${r.method()} ${r.url()}`); };
  dismissNext = true;
  page.on('request', on);
  await page.click(selector);
  await page.evaluate(() => 0);
  page.off('request', on);
  return seen;
}

try {
  // A team with a developer and a viewer; its project with an NLU named after it.
  const admin = (await api(base, 'POST', '/login', null, { username: 'admin', password })).id;
  const people = {};
  for (const name of ['dev', 'viewer']) {
    const u = await api(base, 'POST', '/users', admin, { username: name, password: `${name}-password`, roleId: 'developer' });
    people[name] = { id: u.id, pass: `${name}-password` };
  }
  const acme = (await api(base, 'POST', '/teams', admin, { name: 'acme' })).id;
  await api(base, 'POST', `/teams/${acme}/users/${people.dev.id}`, admin, { role: 'developer' });
  await api(base, 'POST', `/teams/${acme}/users/${people.viewer.id}`, admin, { role: 'viewer' });
  const words = await api(base, 'POST', '/projects', admin, { name: 'words', teamId: acme, options: { nlu: true, nluLang: 'en', nluVisibility: 'private' } });
  const N = `/projects/${words.id}/nlus/words`;
  // An entity as the API gives it, less its name.
  const entity = async (name) => { const { name: _, ...e } = await api(base, 'GET', `${N}/entities/${name}`, admin); return e; };
  const sentences = async () => (await api(base, 'GET', `${N}/training_data?limit=100`, admin)).data;

  browser = await chromium.launch({ executablePath, headless: true, args: ['--no-sandbox'] });
  const dev = await signedIn('dev', people.dev.pass);
  const nlPage = `${base}/#/p/${words.id}/nl`;
  // A view: the NLUs, the access, the sentences.
  const view = await requestsOf(dev, base, () => dev.goto(nlPage), '#training');
  assert.ok(view.length <= 3, `a view costs ${view.length} requests: ${view.join(', ')}`);
  assert.equal(await dev.textContent('#training'), 'No sentences yet.');
  assert.equal(await dev.locator('#read-only').count(), 0);

  // A refused entity: the server's words beside the form, everything typed still there.
  await dev.fill('#entity-name', 'bad name!');
  await dev.selectOption('#entity-type', 'trait');
  await dev.selectOption('#entity-profile', 'intent');
  await dev.fill('#entity-labels', 'greet, bye');
  await dev.click('#entity-save');
  await dev.waitForSelector('#entity-error >> text=must be 1 to 20 letters, digits or \'_\'', { timeout: 30000 });
  assert.equal(await dev.textContent('#entity-error'), 'entity name "bad name!" must be 1 to 20 letters, digits or \'_\'');
  assert.equal(await dev.inputValue('#entity-name'), 'bad name!');
  assert.equal(await dev.inputValue('#entity-labels'), 'greet, bye');
  assert.equal(await dev.inputValue('#entity-profile'), 'intent');
  assert.equal((await api(base, 'GET', `${N}/entities`, admin)).total, 0);

  // A trait, made with the name fixed: one request, the table drawn again from its answer.
  const created = await requestsOf(dev, base, async () => {
    await dev.fill('#entity-name', 'intent');
    await dev.click('#entity-save');
  }, '#entities tr[data-entity="intent"]');
  assert.deepEqual(created, [`POST ${N}/entities`]);
  assert.equal(await dev.textContent('#entity-error'), '');
  assert.equal(await dev.inputValue('#entity-name'), '', 'the form is empty again');
  assert.deepEqual(await entity('intent'), { type: 'trait', profile: 'intent', labels: ['greet', 'bye'] });
  assert.match(await dev.textContent('#entity-result'), /^Created entity intent\./);

  // A phrase.
  await dev.fill('#entity-name', 'food');
  await dev.selectOption('#entity-type', 'phrase');
  assert.ok(await dev.isHidden('#entity-root'), 'a phrase has no root');
  assert.ok(await dev.isVisible('#entity-belongs-to'));
  await dev.selectOption('#entity-profile', 'default');
  await dev.click('#entity-save');
  await dev.waitForSelector('#entities tr[data-entity="food"]', { timeout: 30000 });
  assert.deepEqual(await entity('food'), { type: 'phrase', profile: 'default' });

  // A dictionary; a form with markup stays text.
  const payload = '<img src=x onerror="window.__pwned=1">';
  await dev.fill('#entity-name', 'size');
  await dev.selectOption('#entity-type', 'dict');
  assert.ok(await dev.isHidden('#entity-labels'), 'a dict has no labels');
  await dev.fill('#entity-dictionary', `large: big, huge\nsmall: little, ${payload}\n\nmedium`);
  await dev.click('#entity-save');
  await dev.waitForSelector('#entities tr[data-entity="size"]', { timeout: 30000 });
  assert.deepEqual(await entity('size'), { type: 'dict', profile: 'default', dictionary: { large: ['big', 'huge'], small: ['little', payload], medium: [] } });
  assert.ok((await dev.textContent('#entities tr[data-entity="size"]')).includes(payload));
  assert.equal(await dev.evaluate(() => window.__pwned), undefined);

  // A phrase belonging to food.
  await dev.fill('#entity-name', 'topping');
  await dev.selectOption('#entity-type', 'phrase');
  await dev.selectOption('#entity-belongs-to', 'food');
  await dev.click('#entity-save');
  await dev.waitForSelector('#entities tr[data-entity="topping"]', { timeout: 30000 });
  assert.deepEqual(await entity('topping'), { type: 'phrase', profile: 'default', belongsTo: 'food' });

  // Edit: the trait gets a third label; its name cannot change.
  await dev.click('#entities tr[data-entity="intent"] button.edit-entity');
  await dev.waitForSelector('#entity-form h3 >> text=Edit entity intent', { timeout: 30000 });
  assert.ok(await dev.isDisabled('#entity-name'));
  assert.equal(await dev.inputValue('#entity-labels'), 'greet, bye');
  await dev.fill('#entity-labels', 'greet, bye, order');
  // A screenshot with the form editing an entity.
  layout.push(...(await inspect(dev, dir, 'nl-studio-entity-edit')).map((p) => `entity edit: ${p}`));
  await dev.click('#entity-save');
  await dev.waitForSelector('#entity-result >> text=Saved entity intent', { timeout: 30000 });
  assert.deepEqual(await entity('intent'), { type: 'trait', profile: 'intent', labels: ['greet', 'bye', 'order'] });
  assert.ok((await dev.textContent('#entities tr[data-entity="intent"]')).includes('greet, bye, order'));
  assert.equal(await dev.textContent('#entity-form h3'), 'New entity');

  // Delete: food is refused while topping belongs to it (the server says why); topping goes
  // after a confirmation; a dismissed confirmation deletes nothing.
  await dev.click('#entities tr[data-entity="food"] button.delete-entity');
  await dev.waitForSelector('#entity-result.error >> text=entity topping refers to food', { timeout: 30000 });
  assert.ok(dialogs.at(-1).startsWith('Delete entity food?'), dialogs.at(-1));
  assert.ok(await entity('food'));
  assert.deepEqual(await dismissing(dev, '#entities tr[data-entity="topping"] button.delete-entity'), []);
  assert.ok(await entity('topping'), 'a dismissed confirmation deletes nothing');
  await dev.click('#entities tr[data-entity="topping"] button.delete-entity');
  await dev.waitForSelector('#entity-result >> text=Deleted entity topping.', { timeout: 30000 });
  assert.equal(await dev.locator('#entities tr[data-entity="topping"]').count(), 0);
  await assert.rejects(entity('topping'), /404/);

  // Sentences added and trained (the existing form). Blank lines are not sent: a refused
  // sentence is named by its line in the box (12, the 10th sent) and left there to fix.
  await dev.fill('#lines', ['hello #intent:greet', '', 'hi there #intent:greet', 'good morning #intent:greet',
    'bye #intent:bye', 'goodbye #intent:bye', 'see you later #intent:bye',
    'I want (@food pizza) now #intent:order', 'one (@food pasta) please #intent:order', 'order (@food soup) #intent:order',
    '  ', 'a (@drink cola) please #intent:order'].join('\n'));
  await dev.click('#train');
  await dev.waitForSelector('#training-status >> text=success', { timeout: 60000 });
  assert.equal(await dev.locator('#training li').count(), 9);
  assert.match(await dev.textContent('#training-status'), /^Training: success \(revision \w+\) · 9 of 10 sentences accepted: 9 new, 0 relabelled, 0 unchanged · 1 refused$/);
  assert.deepEqual(await dev.locator('#training-refused li').allTextContents(),
    ['line 12: "a cola please": entity "drink" is not defined in this NLU (defined: food, intent, size)']);
  assert.equal(await dev.inputValue('#lines'), 'a (@drink cola) please #intent:order');
  layout.push(...(await inspect(dev, dir, 'nl-studio-refused')).map((p) => `refused line: ${p}`));
  const rowOf = async (input) => (await sentences()).find((r) => r.input === input);
  const pizza = await rowOf('I want pizza now');
  const li = (r) => `#training li[data-row="${r.id}"]`;
  assert.equal(await dev.textContent(`${li(pizza)} mark`), 'pizza');

  // Edit a sentence's text: the labels move to where their words now are.
  await dev.click(`${li(pizza)} button.edit-sentence`);
  await dev.waitForSelector(`${li(pizza)} input.sentence-input`, { timeout: 30000 });
  assert.equal(await dev.inputValue(`${li(pizza)} input.sentence-input`), 'I want pizza now');
  await dev.fill(`${li(pizza)} input.sentence-input`, 'Please, I want a pizza');
  layout.push(...(await inspect(dev, dir, 'nl-studio-sentence-edit')).map((p) => `sentence edit: ${p}`));
  await dev.click(`${li(pizza)} button.save-sentence`);
  await dev.waitForSelector(`${li(pizza)} .sentence >> text=Please, I want a pizza`, { timeout: 30000 });
  assert.equal(await dev.textContent(`${li(pizza)} mark`), 'pizza');
  assert.match(await dev.textContent(`${li(pizza)} [role=status]`), /^Saved: its labels moved with their words/);
  const moved = await rowOf('Please, I want a pizza');
  assert.equal(moved.id, pizza.id);
  const food = moved.entities.find((e) => e.entity === 'food');
  assert.deepEqual([food.start, food.end, food.value], [17, 22, 'pizza']);
  const intent = moved.entities.find((e) => e.entity === 'intent');
  assert.deepEqual([intent.start, intent.end, intent.label], [0, 22, 'order']);

  // A refused edit (the labelled word is gone): the server's words, the text as typed.
  await dev.click(`${li(pizza)} button.edit-sentence`);
  await dev.fill(`${li(pizza)} input.sentence-input`, 'Please, I want a salad');
  await dev.click(`${li(pizza)} button.save-sentence`);
  await dev.waitForSelector(`${li(pizza)} [role=alert] >> text=the new input no longer has these words`, { timeout: 30000 });
  assert.ok((await dev.textContent(`${li(pizza)} [role=alert]`)).includes('(food on "pizza")'), await dev.textContent(`${li(pizza)} [role=alert]`));
  assert.equal(await dev.inputValue(`${li(pizza)} input.sentence-input`), 'Please, I want a salad');
  assert.equal((await rowOf('Please, I want a pizza')).id, pizza.id, 'nothing changed');
  // Its food label removed, then the edit goes through; the text typed survives the redraw.
  await dev.click(`${li(pizza)} button.remove-label[aria-label^="Remove label food"]`);
  await dev.waitForFunction((sel) => !document.querySelector(`${sel} button.remove-label[aria-label^="Remove label food"]`), li(pizza), { timeout: 30000 });
  assert.equal(await dev.inputValue(`${li(pizza)} input.sentence-input`), 'Please, I want a salad');
  assert.deepEqual((await rowOf('Please, I want a pizza')).entities.map((e) => e.entity), ['intent']);
  await dev.click(`${li(pizza)} button.save-sentence`);
  await dev.waitForSelector(`${li(pizza)} .sentence >> text=Please, I want a salad`, { timeout: 30000 });
  assert.deepEqual((await rowOf('Please, I want a salad')).entities.map((e) => [e.entity, e.end]), [['intent', 22]]);

  // Delete a sentence after a confirmation (a dismissed one keeps it).
  const later = await rowOf('see you later');
  assert.deepEqual(await dismissing(dev, `${li(later)} button.delete-sentence`), [], 'a dismissed confirmation deletes nothing');
  assert.ok(await rowOf('see you later'));
  await dev.click(`${li(later)} button.delete-sentence`);
  await dev.waitForSelector(`${li(later)} >> text=Deleted “see you later”`, { timeout: 30000 });
  assert.equal(await rowOf('see you later'), undefined);
  assert.equal(await dev.textContent('#training-count'), 'Training data (8)');
  assert.ok(dialogs.at(-1).startsWith('Delete the sentence “see you later”?'), dialogs.at(-1));

  // Trained again with nothing typed (the refused sentence taken out of the box): a new
  // revision.
  await dev.fill('#lines', '');
  const before = await dev.textContent('#training-status');
  await dev.click('#train');
  await dev.waitForFunction((b) => { const t = document.getElementById('training-status').textContent; return t !== b && !t.endsWith('…'); }, before, { timeout: 60000 });
  assert.match(await dev.textContent('#training-status'), /^Training: success \(revision \w+\)$/);
  assert.notEqual(await dev.textContent('#training-status'), before);

  // A view's cost with entities and sentences; the page as it is now.
  await dev.goto(`${base}/#/`);
  await dev.waitForSelector('main table', { timeout: 30000 });
  const full = await requestsOf(dev, base, () => dev.goto(nlPage), '#training li');
  assert.ok(full.length <= 3, `a view costs ${full.length} requests: ${full.join(', ')}`);
  assert.doesNotMatch(await dev.innerText('main'), /\b(null|undefined)\b/, 'no missing value drawn as text');
  layout.push(...(await inspect(dev, dir, 'nl-studio')).map((p) => `developer: ${p}`));

  // The viewer: the entities and the predict box, no control that changes anything.
  const viewer = await signedIn('viewer', people.viewer.pass);
  await viewer.goto(nlPage);
  await viewer.waitForSelector('#training', { timeout: 30000 });
  assert.equal(await viewer.textContent('#read-only'), 'You have read access to this project (viewer): changes are made by its developers.');
  assert.ok(await viewer.locator('#entities tr[data-entity="size"]').count() === 1);
  const names = await viewer.locator('main').getByRole('button').evaluateAll((bs) => bs.map((b) => (b.getAttribute('aria-label') || b.textContent || '').trim()));
  assert.deepEqual(names, ['Predict'], names.join(', '));
  assert.deepEqual(await viewer.locator('main input, main textarea, main select').evaluateAll((xs) => xs.map((x) => x.id)), ['predict-text']);
  assert.equal(await viewer.locator('#entity-form, #lines, #nlu-name, .row-actions').count(), 0);
  // The viewer reads the training sentences (without their Edit and Delete).
  assert.equal(await viewer.locator('#training li').count(), (await sentences()).length);
  layout.push(...(await inspect(viewer, dir, 'nl-studio-viewer')).map((p) => `viewer: ${p}`));

  assert.deepEqual(errors, []);
  assert.deepEqual(layout, [], layout.join('\n'));
  console.log('ok NL Studio: entities created, edited and deleted; sentences edited, relabelled and deleted; retrain; viewer read-only; 1280 and 390 px');
} catch (e) {
  failed = true;
  console.error(e);
  if (layout.length) console.error(layout.join('\n'));
  for (const [who, page] of pages) {
    await page.screenshot({ path: join(dir, `nl-studio-failure-${who}.png`), fullPage: true }).catch(() => {});
    console.error(`${who}'s page:`, await page.textContent('main').catch(() => '?'));
  }
} finally {
  if (browser) await browser.close();
  stop();
}
process.exit(failed ? 1 : 0);
