// The web console in a real browser: headless Chromium (Debian's `chromium`, CHROMIUM_BIN to
// override) driven by playwright-core. Sign in; open the pizza project (pushed through the
// API); deploy its revision to production from the page (the deploy dialog); chat:
// "I want pizza" shows the carousel as cards, clicking Pepperoni goes on, the debug panel
// names the flow and intent; a channel's conversation in the transcripts; an agent key
// created (shown once) and revoked; the errors page; a task in review approved with a note;
// then a bot whose replies, button labels, image URLs and context
// carry script payloads: they show as text and none runs. Screenshots in artifacts/.
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { api, consoleFromDisk, here, inspect, password, requestsOf, startServer } from './lib.mjs';

const executablePath = process.env.CHROMIUM_BIN || '/usr/bin/chromium';
// The console's requests count toward the user's project-API rate limit (100 a minute by
// default); this test makes a few hundred.
const { base, stop } = await startServer(['--rate-limit', '10000']);
const dir = join(here, 'artifacts');
mkdirSync(dir, { recursive: true });
let browser;
let page;
const dialogs = [];
// What each page looks like on a desktop and a phone: layout and accessibility problems.
const layout = [];
const look = async (name) => { layout.push(...(await inspect(page, dir, `page-${name}`)).map((p) => `${name}: ${p}`)); };
let failed = false;
try {
  const admin = (await api(base, 'POST', '/login', null, { username: 'admin', password })).id;
  const pizza = await api(base, 'POST', '/projects', admin, { name: 'pizza' });
  await api(base, 'POST', `/projects/${pizza.id}/bot/revisions`, admin, JSON.parse(readFileSync(join(here, 'pizza.json'), 'utf8')));
  // A hostile bot: every string a page could render is a script payload.
  const payload = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>';
  const hostile = {
    name: 'hostile',
    flows: {
      main: {
        intents: { any: { initial: true, type: 'text' } },
        states: {
          init: { initial: true, transitions: { reply: "intent == 'any'" } },
          reply: {
            end: true,
            action: [
              { name: 'text', options: { text: payload } },
              { name: 'template', options: { type: 'button', items: { title: payload, text: payload, actions: [
                { type: 'postback', label: payload, payload: { x: payload } },
                { type: 'url', label: 'evil link', url: 'javascript:window.__pwned=3' }] } } },
              { name: 'template', options: { type: 'carousel', items: [
                { title: payload, text: payload, thumbnailImageUrl: 'javascript:window.__pwned=4', actions: [] }] } },
            ],
          },
        },
        actions: {},
      },
    },
  };
  const hp = await api(base, 'POST', '/projects', admin, { name: 'hostile' });
  const hrev = await api(base, 'POST', `/projects/${hp.id}/bot/revisions`, admin, hostile);
  await api(base, 'POST', `/projects/${hp.id}/deployment/versions`, admin, { version: '1.0.0', botRevision: hrev.revision });
  await api(base, 'POST', `/projects/${hp.id}/environments`, admin, { depId: hp.id, depVersion: '1.0.0', name: 'production' });

  browser = await chromium.launch({ executablePath, headless: true, args: ['--no-sandbox'] });
  page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await consoleFromDisk(page);
  page.on('dialog', async (d) => {
    dialogs.push(`${d.type()}: ${d.message()}`);
    if (d.type() === 'prompt') await d.accept('production');
    else if (d.type() === 'confirm') await d.accept();
    else await d.dismiss();
  });
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));

  // Sign in (a wrong password first: said in words).
  await page.goto(base + '/');
  await page.fill('#username', 'admin');
  await page.fill('#password', 'wrong');
  await page.click('#signin');
  await page.waitForSelector('[role=alert] >> text=incorrect', { timeout: 30000 });
  await page.fill('#password', password);
  // Signing in reads each thing once: the token, who you are, your teams, your projects.
  const signInRequests = [];
  const onRequest = (r) => { const u = new URL(r.url()); if (!u.pathname.startsWith('/console/')) signInRequests.push(`${r.method()} ${u.pathname}`); };
  page.on('request', onRequest);
  await page.click('#signin');
  await page.waitForSelector('a >> text=pizza', { timeout: 30000 });
  await page.waitForLoadState('networkidle');
  page.off('request', onRequest);
  assert.deepEqual(signInRequests.map((r) => r.replace(/\/users\/[^/]+\//, '/users/{id}/')).sort(),
    ['GET /me', 'GET /projects', 'GET /users/{id}/teams', 'POST /login'], signInRequests.join(', '));
  await look('projects');
  await page.click('a >> text=pizza', { timeout: 30000 });
  await page.waitForSelector('#revisions');
  await look('project');

  // Deploy the pushed revision to production from the page.
  await page.waitForSelector('#revisions');
  await page.click('#revisions button.deploy');
  await page.waitForSelector('#deploy-dialog[open]', { timeout: 30000 });
  assert.equal(await page.inputValue('#deploy-env'), 'production');
  await page.click('#deploy-confirm');
  await page.waitForSelector('#environments >> text=production', { timeout: 30000 });

  // Chat: the carousel as cards, a click on a card's button, the debug panel.
  await page.click('#environments a.chat-link');
  await page.fill('#text', 'I want pizza');
  await page.click('#send');
  await page.waitForSelector('.cards .item >> text=Pepperoni', { timeout: 30000 });
  assert.equal(await page.locator('.cards .item').count(), 2);
  assert.equal(await page.textContent('[data-field=flow]'), 'order');
  await page.click('.cards .item button.reply >> text=Pepperoni');
  await page.waitForSelector('.bubble.bot >> text=How many? (1-9)', { timeout: 30000 });
  await page.fill('#text', '2');
  await page.click('#send');
  await page.waitForSelector('.bubble.bot >> text=Is it correct: 2 x pepperoni?', { timeout: 30000 });
  await page.click('button.reply >> text=Yes');
  await page.waitForSelector('.bubble.bot >> text=Thank you for your order', { timeout: 30000 });
  assert.equal(await page.textContent('[data-field=errors]'), 'none');
  await page.screenshot({ path: join(dir, 'console-chat.png'), fullPage: true });
  await look('chat');
  // The tester's conversation is in the environment's transcripts, as who chatted.
  await page.goto(`${base}/#/p/${pizza.id}/transcripts/production`);
  await page.waitForSelector('.conversation >> text=admin', { timeout: 30000 });
  assert.ok((await page.textContent('#conversations')).includes('I want pizza'));
  // A test chat says so, apart from channel traffic.
  assert.ok((await page.textContent('.conversation[data-channel="console"] .channel')).includes('test chat in the console'));
  await look('transcripts');

  // A quick reply (Messenger's `items.quickreply`) is a button that sends its payload.
  const qp = await api(base, 'POST', '/projects', admin, { name: 'drinks' });
  const drinks = { name: 'drinks', flows: { main: {
    intents: { menu: { initial: true, condition: "content == 'menu'" }, tea: { initial: true, type: 'data', condition: "payload.drink == 'tea'" } },
    states: {
      init: { initial: true, transitions: { ask: "intent == 'menu'", tea: "intent == 'tea'" } },
      ask: { end: true, action: [{ name: 'template', options: { type: 'button', items: { title: 'Drinks', text: 'Pick one',
        actions: [], quickreply: [{ type: 'text', label: 'Tea', payload: { drink: 'tea' } }] } } }] },
      tea: { end: true, action: [{ name: 'text', options: { text: 'You picked tea.' } }] } },
    actions: {} } } };
  const qrev = await api(base, 'POST', `/projects/${qp.id}/bot/revisions`, admin, drinks);
  await api(base, 'POST', `/projects/${qp.id}/deployment/versions`, admin, { version: '1.0.0', botRevision: qrev.revision });
  await api(base, 'POST', `/projects/${qp.id}/environments`, admin, { depId: qp.id, depVersion: '1.0.0', name: 'production' });
  await page.goto(`${base}/#/p/${qp.id}/chat/production`);
  await page.reload();
  await page.waitForSelector('#send');
  await page.fill('#text', 'menu');
  await page.click('#send');
  await page.click('button.reply >> text=Tea', { timeout: 30000 });
  await page.waitForSelector('.bubble.bot >> text=You picked tea.', { timeout: 30000 });

  // That conversation in the transcripts (console steps are not channel traffic: a webhook
  // message is sent for the transcript), and keys created once and revoked.
  const envs = await api(base, 'GET', `/projects/${pizza.id}/environments`, admin);
  const prod = envs.data.find((e) => e.name === 'production');
  const ch = await api(base, 'POST', `/projects/${pizza.id}/environments/${prod.id}/channels`, admin, { name: 'web', type: 'generic', url: 'https://example.com/hook' });
  const hook = await fetch(ch.webhook, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ userId: 'visitor-7', messages: [{ type: 'text', content: 'I want pizza' }] }) });
  assert.equal(hook.status, 200);
  await page.goto(`${base}/#/p/${pizza.id}`);
  await page.click('#environments a.transcripts-link');
  await page.waitForSelector('.conversation >> text=visitor-7', { timeout: 30000 });
  assert.ok((await page.textContent('.conversation:has-text("visitor-7") .channel')).includes('channel web (generic)'));
  assert.ok((await page.textContent('#conversations')).includes('[carousel] Pepperoni'), await page.textContent('#conversations'));
  await page.goto(`${base}/#/p/${pizza.id}/keys/production`);
  await page.fill('#keyname', 'web-widget');
  await page.click('#create-key');
  await page.waitForSelector('#newkey', { timeout: 30000 });
  const key = await page.textContent('#newkey');
  assert.ok(key.startsWith('sak_'), key);
  await page.click('#keys button.revoke');
  await page.waitForSelector('#keys >> text=revoked', { timeout: 30000 });
  // Each key says when it was made and, once revoked, when.
  const created = (await page.textContent('#keys tbody tr td.created')).trim();
  assert.ok(!Number.isNaN(Date.parse(created)) || /\d/.test(created), created);
  assert.match((await page.textContent('#keys tbody tr td.state')).trim(), /^revoked \S/);
  await look('keys');
  const used = await fetch(`${base}/v1/chat`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ messages: [] }) });
  assert.equal(used.status, 401, 'a revoked key is refused');
  await page.goto(`${base}/#/p/${pizza.id}/errors`);
  await page.waitForSelector('text=No errors', { timeout: 30000 });
  // The channel with its webhook on the project page; a workspace key made and revoked.
  await page.goto(`${base}/#/p/${pizza.id}`);
  await page.waitForSelector(`#environments .channel >> text=${ch.webhook}`, { timeout: 30000 });
  await page.click('#workspace-keys');
  await page.fill('#keyname', 'automation');
  await page.click('#create-key');
  await page.waitForSelector('#newkey', { timeout: 30000 });
  assert.ok((await page.textContent('#newkey')).startsWith('sk-ws-'));
  await page.click('#keys button.revoke');
  await page.waitForSelector('#keys >> text=revoked', { timeout: 30000 });

  // Analytics of that environment: the figures and a chart drawn from the server's
  // aggregation; the bot's source by flow.
  await page.goto(`${base}/#/p/${pizza.id}/analytics/production`);
  await page.waitForSelector('#total-messages', { timeout: 30000 });
  assert.ok(Number((await page.textContent('#total-messages')).split(' ')[0]) >= 1);
  assert.ok(await page.locator('svg.chart rect').count() >= 1);
  // Step latency from the steps' stored times (the webhook message's step).
  assert.match(await page.textContent('#latency'), /^step latency p50 [\d.]+ (µs|ms|s), p99 [\d.]+ (µs|ms|s)$/);
  assert.ok(await page.locator('svg.chart[aria-label^="Step latency p99"] rect').count() >= 1);
  // The errors chart is scaled to its errors: "none" (and no "1" on its axis) without any.
  const botErrors = Number((await page.textContent('#analytics .figures')).match(/(\d+) errors?/)[1]);
  const errorsChart = page.locator('svg.chart[aria-label^="Errors per hour"]');
  assert.match(await errorsChart.getAttribute('aria-label'), botErrors ? /^Errors per hour: at most \d+$/ : /^Errors per hour: none$/);
  if (!botErrors) assert.equal(await errorsChart.locator('text').filter({ hasText: /^1$/ }).count(), 0);
  await page.screenshot({ path: join(dir, 'console-analytics.png'), fullPage: true });
  await look('analytics');
  await page.goto(`${base}/#/p/${pizza.id}/bot`);
  await page.waitForSelector('details.flow >> text=order', { timeout: 30000 });
  // The order flow as a graph: its states, the initial one marked, arrows between them.
  for (const st of ['init', 'ask', 'askQty', 'confirmOrder', 'done', 'cancelled']) {
    assert.equal(await page.locator(`svg.graph[aria-label^="Flow order:"] g.state[data-state="${st}"]`).count(), 1, st);
  }
  assert.equal(await page.locator(`svg.graph[aria-label^="Flow order:"] g.state.initial[data-state="init"]`).count(), 1);
  assert.ok(await page.locator('svg.graph path.edge').count() >= 5);
  // The YAML with line numbers: a line found by its number.
  await page.waitForSelector('#yaml >> text=maxRecursion: 10', { timeout: 30000 });
  const at = await page.getAttribute('#yaml .line:has-text("maxRecursion: 10")', 'data-n');
  await page.fill('#goto-line', at);
  await page.click('#goto-line + button');
  assert.ok((await page.textContent('#yaml .line.here')).includes('maxRecursion: 10'));
  await page.screenshot({ path: join(dir, 'console-bot.png'), fullPage: true });
  await look('bot');

  // Deploy again (0.0.2), then roll back to 0.0.1 after a confirmation.
  await page.goto(`${base}/#/p/${pizza.id}`);
  await page.waitForSelector('#revisions');
  await page.click('#revisions button.deploy');
  await page.click('#deploy-confirm', { timeout: 30000 });
  await page.waitForSelector('#environments >> text=0.0.2', { timeout: 30000 });
  await page.click('button.rollback[data-version="0.0.1"]');
  await page.waitForSelector('#environments .env-version >> text=/^0\\.0\\.1$/', { timeout: 30000 });
  // 0.0.2 is newer than what runs now: it is deployed again, not "rolled back" to.
  assert.equal(await page.locator('button.rollback[data-version="0.0.2"]').count(), 0);
  assert.equal(await page.locator('button.deploy-version[data-version="0.0.2"]').count(), 1);
  // The notice it leaves sits above the content: it overlaps no table.
  await page.waitForSelector('#status >> text=Rolled back', { timeout: 30000 });
  const overlaps = await page.evaluate(() => {
    const n = document.getElementById('status').getBoundingClientRect();
    return [...document.querySelectorAll('table')].filter((t) => {
      const r = t.getBoundingClientRect();
      return r.left < n.right && n.left < r.right && r.top < n.bottom && n.top < r.bottom;
    }).length;
  });
  assert.equal(overlaps, 0);
  // Deployed again from its row: production runs 0.0.2.
  await page.click('button.deploy-version[data-version="0.0.2"]');
  await page.waitForSelector('#environments .env-version >> text=/^0\\.0\\.2$/', { timeout: 30000 });
  await look('project-deployments');

  // Acting for a team: its (empty) projects, then back to the user's own.
  await api(base, 'POST', '/teams', admin, { name: 'acme' });
  await page.reload();
  await page.waitForSelector('#team', { timeout: 30000 });
  await page.selectOption('#team', { label: 'acme' });
  await page.waitForSelector('text=No projects yet', { timeout: 30000 });
  assert.ok((await page.textContent('#who')).includes('acme'));
  await page.selectOption('#team', { label: 'Myself' });
  await page.waitForSelector('a >> text=pizza', { timeout: 30000 });

  // Owners: a developer's project named like the admin's is not in the admin's list, which
  // says whose each project is; every tenant's only through the explicit link.
  await api(base, 'POST', '/users', admin, { username: 'dev1', password: 'dev1-password', roleId: 'developer' });
  const dev1 = (await api(base, 'POST', '/login', null, { username: 'dev1', password: 'dev1-password' })).id;
  await api(base, 'POST', '/projects', dev1, { name: 'pizza' });
  await page.goto(`${base}/#/`);
  await page.waitForSelector('#all-tenants', { timeout: 30000 });
  const mine = await page.textContent('main table');
  assert.ok(mine.includes('admin (user)') && !mine.includes('dev1'), mine);
  await page.click('#all-tenants');
  await page.waitForSelector('main td >> text=dev1 (user)', { timeout: 30000 });
  assert.equal(await page.locator('main td >> text=/^pizza$/').count(), 2);
  await page.screenshot({ path: join(dir, 'console-owners.png'), fullPage: true });
  await page.setViewportSize({ width: 390, height: 800 });
  await page.screenshot({ path: join(dir, 'console-owners-phone.png'), fullPage: true });
  const wide = await page.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(wide <= 390, `the project list scrolls sideways on a phone: ${wide} px`);
  await page.setViewportSize({ width: 1280, height: 900 });
  await page.goto(`${base}/#/`);
  await page.waitForSelector('a >> text=pizza', { timeout: 30000 });

  // The review queue: a task whose bot proposed outputs waits; approved from the page.
  const tb = await api(base, 'POST', '/projects', admin, { name: 'approvals' });
  const taskBot = { name: 'approvals', flows: { main: {
    intents: { task: { initial: true, type: 'data', condition: "payload.type == 'task'" } },
    states: {
      init: { initial: true, transitions: { done: { condition: "intent == 'task'", mapping: { 'data.outputs': '({total: payload.inputs.n * 2})' } } } },
      done: { end: true, action: [{ name: 'text', options: { text: 'ok' } }] } },
    actions: {} } } };
  const trev = await api(base, 'POST', `/projects/${tb.id}/bot/revisions`, admin, taskBot);
  await api(base, 'POST', `/projects/${tb.id}/deployment/versions`, admin, { version: '1.0.0', botRevision: trev.revision });
  const tenv = await api(base, 'POST', `/projects/${tb.id}/environments`, admin, { depId: tb.id, depVersion: '1.0.0', name: 'production' });
  const tcase = await api(base, 'POST', `/projects/${tb.id}/cases`, admin, { name: 'double', environmentId: tenv.id, review: true,
    inputs: [{ name: 'n', type: 'number' }], outputs: [{ name: 'total', type: 'number' }], timeoutSeconds: 30 });
  const task = await api(base, 'POST', `/projects/${tb.id}/cases/${tcase.id}/tasks`, admin, { inputs: { n: 21 } });
  for (const t0 = Date.now(); ; await new Promise((r) => setTimeout(r, 50))) {
    const t = await api(base, 'GET', `/projects/${tb.id}/tasks/${task.id}`, admin);
    if (t.status === 'review') break;
    assert.ok(['pending', 'in_progress'].includes(t.status), JSON.stringify(t));
    assert.ok(Date.now() - t0 < 30000, 'the task reached review');
  }
  await page.goto(`${base}/#/p/${tb.id}`);
  await page.click('#cases-link');
  const review = page.locator(`section.review[data-task="${task.id}"]`);
  await review.waitFor({ timeout: 30000 });
  assert.ok((await review.textContent()).includes('"total": 42'), await review.textContent());
  await review.locator('button.reject').click();
  await page.waitForSelector('section.review [role=alert] >> text=Say why', { timeout: 30000 });
  await review.locator('textarea').fill('checked by hand');
  await review.locator('button.approve').click();
  await page.waitForSelector(`tr[data-task="${task.id}"] td.status >> text=done`, { timeout: 30000 });
  await look('cases');
  const decided = await api(base, 'GET', `/projects/${tb.id}/tasks/${task.id}`, admin);
  assert.equal(decided.status, 'done');
  assert.equal(decided.reviews[0].comment, 'checked by hand');

  // NL Studio: train from the page, label a span by selecting it, predict.
  const nl = await api(base, 'POST', '/projects', admin, { name: 'words', options: { nlu: true, nluLang: 'en', nluVisibility: 'private' } });
  const ents = `/projects/${nl.id}/nlus/words/entities`;
  await api(base, 'POST', ents, admin, { type: 'trait', profile: 'intent', labels: ['greet', 'bye'], name: 'intent' });
  await api(base, 'POST', ents, admin, { type: 'phrase', profile: 'default', name: 'food' });
  await page.goto(`${base}/#/p/${nl.id}`);
  await page.click('#nl-link');
  await page.fill('#lines', 'hello #intent:greet\nhi there #intent:greet\ngood morning #intent:greet\nbye #intent:bye\ngoodbye #intent:bye\nsee you later #intent:bye\nI want pizza #intent:greet');
  await page.click('#train');
  await page.waitForSelector('#training-status >> text=success', { timeout: 60000 });
  const pizzaLine = page.locator('.sentence', { hasText: 'I want pizza' });
  await pizzaLine.waitFor();
  await pizzaLine.evaluate((node) => {
    const t = node.firstChild;
    const r = document.createRange();
    r.setStart(t, 7);
    r.setEnd(t, 12);
    const s = window.getSelection();
    s.removeAllRanges();
    s.addRange(r);
    node.dispatchEvent(new MouseEvent('mouseup', { bubbles: true }));
  });
  await page.click('button.apply-label');
  await page.waitForSelector('.sentence mark >> text=pizza', { timeout: 30000 });
  assert.equal(await page.getAttribute('.sentence mark', 'title'), 'food');
  // After an emoji the span counts characters as the API does (the emoji is one).
  await page.fill('#lines', '🍕 pizza now #intent:greet');
  await page.click('#train');
  await page.waitForSelector('#training-status >> text=success', { timeout: 60000 });
  const emojiLine = page.locator('.sentence', { hasText: 'pizza now' });
  await emojiLine.evaluate((node) => {
    const t = node.firstChild;
    const r = document.createRange();
    r.setStart(t, 3); // UTF-16: the emoji is two units, then a space
    r.setEnd(t, 8);
    const s = window.getSelection();
    s.removeAllRanges();
    s.addRange(r);
    node.dispatchEvent(new MouseEvent('mouseup', { bubbles: true }));
  });
  await page.click('button.apply-label');
  await page.waitForSelector('.sentence:has-text("pizza now") mark >> text=pizza', { timeout: 30000 });
  const stored = (await api(base, 'GET', `/projects/${nl.id}/nlus/words/training_data?limit=100`, admin)).data
    .find((r) => r.input.startsWith('🍕'));
  const span = stored.entities.find((e) => e.entity === 'food');
  assert.deepEqual([span.start, span.end, span.value], [2, 7, 'pizza']);
  // The predict box takes the card's width (less its button), not a narrow field.
  const [predictWidth, boxCard] = await page.evaluate(() => [document.getElementById('predict-text').getBoundingClientRect().width,
    document.getElementById('predict-text').closest('.card').getBoundingClientRect().width]);
  assert.ok(predictWidth > boxCard * 0.6, `${predictWidth} of ${boxCard}`);
  await page.fill('#predict-text', 'hello there');
  await page.click('#predict');
  await page.waitForSelector('#prediction table >> text=greet', { timeout: 30000 });
  await page.screenshot({ path: join(dir, 'console-nl.png'), fullPage: true });
  await look('nl');

  // An NLU made from the console, on a project without one.
  await page.goto(`${base}/#/p/${pizza.id}/nl`);
  // The NL page just left has a New NLU form too: fill this page's, once it is drawn.
  await page.waitForSelector('text=This project has no NLU yet.', { timeout: 30000 });
  await page.fill('#nlu-name', 'menu', { timeout: 30000 });
  await page.click('#create-nlu');
  await page.waitForSelector('h1 >> text=NL Studio · menu', { timeout: 30000 });
  assert.ok((await page.textContent('main')).includes('admin:menu'));

  // Errors with filters: a bot whose method throws, one console step; its user error is
  // listed, and a filter on failed steps shows none.
  const op = await api(base, 'POST', '/projects', admin, { name: 'oops' });
  const oops = { name: 'oops', methods: { 'boom(message, context, data, options, config, result)': "throw new Error('no stock');" },
    flows: { main: { intents: { any: { initial: true, type: 'text' } },
      states: { init: { initial: true, transitions: { answer: "intent == 'any'" } },
        answer: { end: true, action: [{ name: 'method', method: 'boom' }, { name: 'text', options: { text: 'sorry' } }] } },
      actions: {} } } };
  // A misspelt key: pushed with a warning, which the revision list shows.
  const orev = await api(base, 'POST', `/projects/${op.id}/bot/revisions`, admin, { ...oops, transtions: 1 });
  await page.goto(`${base}/#/p/${op.id}`);
  await page.click('#revisions details.warnings summary', { timeout: 30000 });
  assert.ok((await page.textContent('#revisions details.warnings')).includes('transtions'), await page.textContent('#revisions'));
  // No environment: the latest revision.
  await page.goto(`${base}/#/p/${op.id}/chat`);
  await page.reload();
  await page.waitForSelector('#send');
  await page.fill('#text', 'pizza');
  await page.click('#send');
  await page.waitForSelector('[data-field=errors] >> text=no stock', { timeout: 30000 });
  // The step's errors stand apart in the panel: one list item each, marked as errors.
  assert.ok(await page.locator('[data-field=errors] li.error').count() >= 1);
  await page.goto(`${base}/#/p/${op.id}/errors`);
  await page.waitForSelector('#errors >> text=bot/method-error', { timeout: 30000 });
  await page.selectOption('#error-group', 'step');
  await page.fill('#error-channel', 'console');
  await page.click('#error-filter');
  await page.waitForSelector('text=No errors', { timeout: 30000 });
  await page.selectOption('#error-group', 'bot');
  await page.click('#error-filter');
  await page.waitForSelector('#errors >> text=no stock', { timeout: 30000 });
  await look('errors');
  // A channel user's error links to that conversation in the transcripts.
  await api(base, 'POST', `/projects/${op.id}/deployment/versions`, admin, { version: '1.0.0', botRevision: orev.revision });
  const oenv = await api(base, 'POST', `/projects/${op.id}/environments`, admin, { depId: op.id, depVersion: '1.0.0', name: 'production' });
  const och = await api(base, 'POST', `/projects/${op.id}/environments/${oenv.id}/channels`, admin, { name: 'web', type: 'generic', url: 'https://example.com/hook' });
  const sent = await fetch(och.webhook, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ userId: 'visitor-9', messages: [{ type: 'text', content: 'one margherita' }] }) });
  assert.equal(sent.status, 200);
  await page.fill('#error-channel', '');
  await page.click('#error-filter');
  await page.click('#errors a.conversation-link >> text=visitor-9', { timeout: 30000 });
  await page.waitForSelector('.conversation >> text=visitor-9', { timeout: 30000 });
  assert.ok((await page.textContent('#conversations')).includes('one margherita'), await page.textContent('#conversations'));
  assert.equal(await page.inputValue('#user'), 'visitor-9');

  // What a page view costs: at most 3 API requests each (the console's own files aside).
  const viewCost = (hash, ready) => requestsOf(page, base, () => page.goto(`${base}/${hash}`), ready);
  for (const [hash, ready] of [[`#/p/${pizza.id}`, '#environments'], ['#/', 'main table'],
    [`#/p/${pizza.id}/transcripts/production`, '.conversation'], [`#/p/${pizza.id}/analytics/production`, '#total-messages'],
    [`#/p/${op.id}/errors`, '#errors'], [`#/p/${pizza.id}/keys/production`, '#keys'], ['#/keys', '#keys'],
    [`#/p/${pizza.id}/bot`, 'details.flow'], [`#/p/${nl.id}/nl`, '#training'], [`#/p/${pizza.id}/cms`, '#cms-pages'],
    [`#/p/${tb.id}/cases`, '#queue']]) {
    const cost = await viewCost(hash, ready);
    assert.ok(cost.length <= 3, `${hash}: ${cost.length} requests: ${cost.join(', ')}`);
  }

  // A phone-sized window keeps the chat usable.
  await page.goto(`${base}/#/p/${pizza.id}/chat/production`);
  await page.waitForSelector('#send');
  await page.setViewportSize({ width: 390, height: 800 });
  assert.ok(await page.isVisible('#send'));
  // A conversation taller than its box scrolls: the newest carousel keeps its size and its
  // buttons work; a card without an image has no image element.
  for (let i = 0; i < 6; i++) {
    await page.fill('#text', 'cancel');
    await page.click('#send');
    await page.waitForSelector(`.bubble.bot >> nth=${2 * i}`, { timeout: 30000 });
    await page.fill('#text', 'I want pizza');
    await page.click('#send');
    await page.waitForFunction((n) => document.querySelectorAll('#chat .cards').length === n, i + 1, { timeout: 30000 });
  }
  const card = page.locator('#chat .cards >> nth=-1').locator('.item >> nth=0');
  const box = await card.boundingBox();
  assert.ok(box.height >= 60 && box.width >= 150, `a card shrank: ${JSON.stringify(box)}`);
  assert.ok(await page.evaluate(() => document.getElementById('chat').scrollHeight > document.getElementById('chat').clientHeight));
  assert.equal(await page.locator('#chat img').count(), 0, 'the pizza cards have no image, so no image element');
  await card.locator('button.reply').click();
  await page.waitForSelector('.bubble.bot >> text=How many? (1-9) >> nth=-1', { timeout: 30000 });
  await page.screenshot({ path: join(dir, 'console-phone.png'), fullPage: true });
  await page.setViewportSize({ width: 1280, height: 900 });

  // The hostile bot: its payloads are text, nothing runs.
  // From one chat page to another: a reload, so the old page's form cannot take the input.
  await page.goto(`${base}/#/p/${hp.id}/chat/production`);
  await page.reload();
  await page.waitForSelector('#send');
  await page.fill('#text', 'hi');
  await page.click('#send');
  await page.waitForSelector('.cards .item', { timeout: 30000 });
  const shown = await page.textContent('#chat');
  assert.ok(shown.includes('<img src=x onerror='), shown);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  assert.equal(await page.locator('#chat img').count(), 0, 'a javascript: image URL is not used');
  assert.equal(await page.locator('#chat a').count(), 0, 'a javascript: link is not made');
  assert.equal(await page.textContent('[data-field=calls]'), 'none');
  await page.click('#chat button.reply');
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  assert.deepEqual(errors, []);
  assert.ok(!dialogs.some((d) => d.startsWith('alert')), dialogs.join('; '));
  assert.deepEqual(layout, [], layout.join('\n'));
  await page.screenshot({ path: join(dir, 'console-hostile.png'), fullPage: true });
  console.log('ok console: sign in, deploy from the dialog, chat with cards and buttons, debug panel, script payloads stay text');
} catch (e) {
  failed = true;
  console.error(e);
  // What the page showed when it failed.
  if (page) {
    await page.screenshot({ path: join(dir, 'console-failure.png'), fullPage: true }).catch(() => {});
    console.error('page:', await page.textContent('main').catch(() => '?'));
    console.error('status:', await page.textContent('#status').catch(() => '?'), 'dialogs:', dialogs.join('; '));
  }
} finally {
  if (browser) await browser.close();
  stop();
}
process.exit(failed ? 1 : 0);
