// The console's layout in a real browser (Debian's `chromium`, CHROMIUM_BIN to override),
// signed in as the administrator with a team (so the header has every item: Projects, Keys,
// Activity, the team selector, Sign out and who is signed in):
// - the header at 1280 px is one line whose items do not overlap; at 390 px it is the brand
//   and a closed *Menu* that opens by a click and by the keyboard, shows every item without
//   overlap inside the window, and folds again on Escape and on a page change;
// - after a link is followed (by the mouse or the keyboard) focus is on the new page's h1,
//   not on <main>; a mouse click draws no ring around it, a key press the ordinary one;
// - the bot page of a bot with three flows, loops, a fan-out and long conditions: in each
//   flow's graph no two state boxes or transition labels overlap, each label's text stays in
//   its box, a long condition is cut with an ellipsis and whole in its <title>, the SVG has
//   a name; at 1280 px every graph fits its card, at 390 px a graph fits or scrolls
//   sideways in its own frame (and says so), never the page.
// Each page at 1280 and 390 px: no sideways scroll, no serious axe-core finding; screenshots
// in screens/. BOTBOX_CONSOLE_FROM_DISK=1 takes the console's files from the source tree.
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { api, consoleFromDisk, here, inspect, password, signIn, startServer } from './lib.mjs';

const executablePath = process.env.CHROMIUM_BIN || '/usr/bin/chromium';
const { base, stop } = await startServer(['--rate-limit', '10000']);
const dir = join(here, 'screens');
mkdirSync(dir, { recursive: true });
let browser;
let page;
const errors = [];
const layout = [];
let failed = false;

const text = (t) => [{ name: 'text', options: { text: t } }];
const LONG = "intent == 'topping' && content.length > 0 && !content.includes('pineapple')";
/** Three flows: one with loops and back edges, a fan-out of five with long conditions, and
 *  the smallest. */
const bot = {
  name: 'layout',
  flows: {
    order: {
      intents: {
        order: { initial: true, condition: "content.toLowerCase().includes('pizza')" },
        size: { condition: "content.toLowerCase().includes('size')" },
        topping: { condition: "content.toLowerCase().includes('with')" },
        confirm: { type: 'data', condition: 'payload.confirm' },
        back: { condition: "content == 'back'" },
        cancel: { condition: "content == 'cancel'" },
        help: { condition: "content == 'help'" },
        start: { condition: "content == 'start'" },
        other: { fallback: true },
      },
      states: {
        init: { initial: true, transitions: {
          askSize: "intent == 'order' && context.size === undefined && context.topping === undefined",
          help: "intent == 'help'",
          init: { fallback: true } } },
        askSize: { action: text('Which size?'), transitions: {
          askTopping: { condition: "intent == 'size' && ['small', 'medium', 'large'].includes(content.toLowerCase())", mapping: { 'context.size': 'content' } },
          askSize: { fallback: true } } },
        askTopping: { action: text('Which topping?'), transitions: {
          confirm: { condition: LONG, mapping: { 'context.topping': 'content' } },
          askSize: "intent == 'back'" } },
        confirm: { action: text('Shall I order it?'), transitions: {
          done: "intent == 'confirm' && payload.confirm == 'yes'",
          askSize: "intent == 'confirm' && payload.confirm == 'no'",
          cancelled: "intent == 'cancel' || content.toLowerCase().includes('never mind')",
          confirm: { fallback: true } } },
        help: { action: text('Say pizza.'), transitions: { init: "intent == 'start'" } },
        done: { end: true, action: text('Ordered.') },
        cancelled: { end: true, action: text('Cancelled.') },
      },
    },
    support: {
      intents: {
        billing: { condition: "content.includes('bill')" },
        shipping: { condition: "content.includes('ship')" },
        returns: { condition: "content.includes('return')" },
        account: { condition: "content.includes('account')" },
        thanks: { condition: "content.includes('thanks')" },
        restart: { condition: "content == 'restart'" },
        other: { fallback: true },
      },
      states: {
        init: { initial: true, transitions: {
          billing: "intent == 'billing' && context.customer != null && context.customer.plan != 'free'",
          shipping: "intent == 'shipping' && (context.order != null || content.match(/[0-9]{6}/) != null)",
          returns: "intent == 'returns' && context.order != null && context.order.days < 30",
          accountQuestionsAndPasswordResets: "intent == 'account'",
          other: { fallback: true } } },
        billing: { action: text('Billing.'), transitions: { resolved: "intent == 'thanks' || intent == 'resolved'" } },
        shipping: { action: text('Shipping.'), transitions: { resolved: "intent == 'thanks' || intent == 'resolved'" } },
        returns: { action: text('Returns.'), transitions: { resolved: "intent == 'thanks' || intent == 'resolved'" } },
        accountQuestionsAndPasswordResets: { action: text('Account.'), transitions: { resolved: "intent == 'thanks'" } },
        other: { action: text('Other.'), transitions: { init: "intent == 'restart'", resolved: "intent == 'thanks'" } },
        resolved: { end: true, action: text('Glad to help.') },
      },
    },
    fallback: {
      intents: { other: { fallback: true } },
      states: {
        init: { initial: true, transitions: { sorry: { fallback: true } } },
        sorry: { end: true, action: text("Sorry, I don't understand.") },
      },
    },
  },
};

/** Pairs of rectangles ({name, x, y, w, h}) that overlap by more than half a pixel. */
function overlaps(rects) {
  const found = [];
  for (let i = 0; i < rects.length; i++) {
    for (let j = i + 1; j < rects.length; j++) {
      const [a, b] = [rects[i], rects[j]];
      const dx = Math.min(a.x + a.w, b.x + b.w) - Math.max(a.x, b.x);
      const dy = Math.min(a.y + a.h, b.y + b.h) - Math.max(a.y, b.y);
      if (dx > 0.5 && dy > 0.5) found.push(`${a.name} overlaps ${b.name} (${dx.toFixed(1)} × ${dy.toFixed(1)} px)`);
    }
  }
  return found;
}

/** The header's items as the window shows them: [{name, x, y, w, h}] of each visible one. */
function headerItems() {
  return page.evaluate(() => {
    const items = [document.querySelector('header .brand'), document.getElementById('menu-toggle'),
      ...document.getElementById('nav').children, document.getElementById('who')];
    return items.filter((e) => e && e.getClientRects().length && e.getBoundingClientRect().width > 0).map((e) => {
      const r = e.getBoundingClientRect();
      return { name: e.id || e.className || e.textContent.trim() || e.tagName, x: r.x, y: r.y, w: r.width, h: r.height };
    });
  });
}

/** Every item inside the window, none over another. */
function fitsApart(items, width, where) {
  assert.deepEqual(overlaps(items), [], `${where}: header items overlap`);
  for (const it of items) assert.ok(it.x >= -0.5 && it.x + it.w <= width + 0.5, `${where}: ${it.name} spans ${it.x}-${it.x + it.w} px`);
}

/** All on one line: some height every item spans. */
function oneLine(items, where) {
  const top = Math.max(...items.map((i) => i.y));
  const bottom = Math.min(...items.map((i) => i.y + i.h));
  assert.ok(top < bottom, `${where}: not one line: ${JSON.stringify(items)}`);
}

/** Where focus is: the active element's tag and text, and whether it is <main>. */
function focus() {
  return page.evaluate(() => {
    const a = document.activeElement;
    return { tag: a.tagName, text: a.textContent.trim(), main: a === document.getElementById('main'),
      firstH1: a === document.querySelector('main h1'), outline: getComputedStyle(a).outlineStyle,
      visible: a.matches(':focus-visible') };
  });
}

/** Each flow graph at the window's width: boxes and labels apart, label text inside its
 *  box, and the graph inside its card or scrolling in its frame (the page never sideways). */
async function checkGraphs(width) {
  await page.setViewportSize({ width, height: 900 });
  // The frames' "scroll sideways" notes follow their size (a resize observer).
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
  const graphs = await page.evaluate(() => [...document.querySelectorAll('svg.graph')].map((svg) => {
    const rect = (e, name) => { const r = e.getBoundingClientRect(); return { name, x: r.x, y: r.y, w: r.width, h: r.height }; };
    const boxes = [...svg.querySelectorAll('g.state')].map((g) => rect(g.querySelector('rect'), `state ${g.dataset.state}`));
    const labels = [...svg.querySelectorAll('g.edge-label')].map((g) => rect(g.querySelector('rect'), `label ${g.dataset.from}→${g.dataset.to}`));
    const spill = [...svg.querySelectorAll('g.edge-label, g.state')].filter((g) => {
      const [r, t] = [g.querySelector('rect').getBoundingClientRect(), g.querySelector('text').getBoundingClientRect()];
      return t.left < r.left - 1 || t.right > r.right + 1 || t.top < r.top - 1 || t.bottom > r.bottom + 1;
    }).map((g) => g.dataset.state || `${g.dataset.from}→${g.dataset.to}`);
    const frame = svg.closest('.graph-box');
    const f = frame.getBoundingClientRect();
    const s = svg.getBoundingClientRect();
    const hint = frame.nextElementSibling;
    return { name: svg.getAttribute('aria-label'), role: svg.getAttribute('role'), rects: [...boxes, ...labels], spill,
      inside: s.left >= f.left - 0.5 && s.right <= f.right + 0.5, scrolls: frame.scrollWidth > frame.clientWidth,
      overflow: getComputedStyle(frame).overflowX, hint: hint.classList.contains('graph-hint') && !hint.hidden,
      focusable: frame.tabIndex === 0 };
  }));
  assert.equal(graphs.length, 3);
  for (const g of graphs) {
    const where = `${g.name} at ${width} px`;
    assert.equal(g.role, 'img', where);
    assert.match(g.name, /^Flow \w+: \d+ states?, \d+ transitions? \(listed under the graph\)$/);
    assert.deepEqual(overlaps(g.rects), [], where);
    assert.deepEqual(g.spill, [], `${where}: text out of its box`);
    if (width >= 1280) assert.ok(g.inside && !g.scrolls, `${where}: wider than its card`);
    else assert.ok(g.inside || (g.scrolls && g.overflow === 'auto' && g.focusable && g.hint), `${where}: neither fits nor scrolls in its frame: ${JSON.stringify(g)}`);
    assert.equal(g.hint, g.scrolls, `${where}: the scroll note`);
  }
  const [scroll, inner] = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
  assert.ok(scroll <= inner, `the bot page at ${width} px is ${scroll} px wide`);
  return graphs;
}

try {
  const admin = (await api(base, 'POST', '/login', null, { username: 'admin', password })).id;
  await api(base, 'POST', '/teams', admin, { name: 'acme-support-and-sales' });
  const project = await api(base, 'POST', '/projects', admin, { name: 'layout', options: { bot: true } });
  await api(base, 'POST', `/projects/${project.id}/bot/revisions`, admin, bot);

  browser = await chromium.launch({ executablePath, headless: true, args: ['--no-sandbox'] });
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  await consoleFromDisk(context);
  page = await context.newPage();
  page.on('pageerror', (e) => errors.push(String(e)));
  // The page's policy refuses nothing it needs (the layout module, the graphs' sizes).
  page.on('console', (m) => { if (m.type() === 'error' && /Content Security Policy/i.test(m.text())) errors.push(m.text()); });
  await signIn(page, base, 'admin', password);
  assert.equal(await page.locator('#team').count(), 1, 'the team selector');
  assert.equal(await page.locator('#activity-link').count(), 1);

  // The header at 1280 px: one line, nothing over anything, no Menu button.
  let items = await headerItems();
  assert.deepEqual(items.map((i) => i.name).filter((n) => n === 'menu-toggle'), []);
  assert.equal(items.length, 7, JSON.stringify(items));
  fitsApart(items, 1280, '1280 px');
  oneLine(items, '1280 px');

  // Focus after a click on a link: the new page's h1, not <main>, with no ring (a mouse).
  await page.click('#workspace-keys');
  await page.waitForFunction(() => document.activeElement?.tagName === 'H1' && document.activeElement.textContent.startsWith('Workspace keys'), null, { timeout: 30000 });
  let f = await focus();
  assert.ok(f.firstH1 && !f.main, JSON.stringify(f));
  assert.equal(f.outline, 'none', `a clicked link's page draws no ring: ${JSON.stringify(f)}`);
  await page.click('header .brand');
  await page.waitForFunction(() => document.activeElement?.textContent === 'Projects' && document.activeElement.tagName === 'H1', null, { timeout: 30000 });
  await page.click(`a[href="#/p/${project.id}"]`);
  await page.waitForSelector('#bot-link', { timeout: 30000 });
  f = await focus();
  assert.ok(f.firstH1 && !f.main && f.text.includes('layout'), JSON.stringify(f));
  await page.click('#bot-link');
  await page.waitForSelector('svg.graph', { timeout: 30000 });
  f = await focus();
  assert.ok(f.firstH1 && !f.main && f.text.startsWith('layout'), JSON.stringify(f));

  // The bot page's graphs at 1280 and 390 px.
  const wide = await checkGraphs(1280);
  assert.ok(wide.find((g) => g.name.startsWith('Flow order:')).rects.length >= 7 + 10);
  const narrow = await checkGraphs(390);
  console.log(`graphs at 390 px: ${narrow.map((g) => `${g.name.split(':')[0]} ${g.inside ? 'fits' : 'scrolls in its frame'}`).join(', ')}`);
  // A long condition: cut with an ellipsis, whole in its tooltip; the graph has a name.
  const long = page.locator('svg.graph g.edge-label[data-from="askTopping"][data-to="confirm"]');
  assert.equal(await long.locator('title').textContent(), LONG);
  assert.ok((await long.locator('text').textContent()).endsWith('…'), await long.locator('text').textContent());
  assert.equal(await page.getByRole('img', { name: /^Flow order: 7 states, 12 transitions/ }).count(), 1);
  await page.setViewportSize({ width: 1280, height: 900 });
  layout.push(...(await inspect(page, dir, 'layout-bot')).map((p) => `bot page: ${p}`));

  // The header at 390 px: the brand and a closed Menu on one line.
  await page.setViewportSize({ width: 390, height: 800 });
  const toggle = page.locator('#menu-toggle');
  items = await headerItems();
  assert.deepEqual(items.map((i) => i.name), ['brand', 'menu-toggle'], 'only the brand and Menu show');
  fitsApart(items, 390, '390 px, closed');
  oneLine(items, '390 px, closed');
  assert.equal(await toggle.getAttribute('aria-expanded'), 'false');
  assert.equal(await toggle.getAttribute('aria-controls'), 'menu');
  await page.screenshot({ path: join(dir, 'layout-header-phone-closed.png') });
  // Opened by a click: every item, in the window, apart.
  await toggle.click();
  assert.equal(await toggle.getAttribute('aria-expanded'), 'true');
  items = await headerItems();
  assert.equal(items.length, 8, JSON.stringify(items));
  fitsApart(items, 390, '390 px, open');
  await page.screenshot({ path: join(dir, 'layout-header-phone-open.png') });
  layout.push(...(await inspect(page, dir, 'layout-menu')).map((p) => `menu open: ${p}`));
  await page.setViewportSize({ width: 390, height: 800 });
  // Escape folds it and gives focus back to Menu.
  await page.focus('#workspace-keys');
  await page.keyboard.press('Escape');
  assert.equal(await toggle.getAttribute('aria-expanded'), 'false');
  assert.equal(await page.evaluate(() => document.activeElement.id), 'menu-toggle');
  assert.deepEqual((await headerItems()).map((i) => i.name), ['brand', 'menu-toggle']);
  // By the keyboard: Enter opens it, Tab reaches its links, Enter follows one; the menu
  // folds and focus is on the new page's h1, with the ordinary ring.
  await page.keyboard.press('Enter');
  assert.equal(await toggle.getAttribute('aria-expanded'), 'true');
  await page.keyboard.press('Tab');
  assert.equal(await page.evaluate(() => document.activeElement.textContent), 'Projects');
  await page.keyboard.press('Tab');
  assert.equal(await page.evaluate(() => document.activeElement.id), 'workspace-keys');
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => document.activeElement?.tagName === 'H1' && location.hash === '#/keys', null, { timeout: 30000 });
  assert.equal(await toggle.getAttribute('aria-expanded'), 'false', 'a page change folds the menu');
  f = await focus();
  assert.ok(f.firstH1 && !f.main, JSON.stringify(f));
  assert.ok(f.visible && f.outline !== 'none', `a key press shows the ring: ${JSON.stringify(f)}`);
  const ring = await page.evaluate(() => { const h = document.activeElement.getBoundingClientRect(); const m = document.getElementById('main').getBoundingClientRect(); return [h.width, h.height, m.width, m.height]; });
  assert.ok(ring[1] < ring[3] / 2 || ring[1] < 80, `the ring frames the heading, not the page: ${ring}`);
  await page.screenshot({ path: join(dir, 'layout-focus-phone.png') });

  assert.deepEqual(errors, []);
  assert.deepEqual(layout, [], layout.join('\n'));
  console.log('ok console layout: header on one line or a menu, focus on the h1, graphs apart and in their frame');
} catch (e) {
  failed = true;
  console.error(e);
  if (layout.length) console.error(layout.join('\n'));
  if (page) {
    await page.screenshot({ path: join(dir, 'layout-failure.png'), fullPage: true }).catch(() => {});
    console.error('the page:', await page.textContent('main').catch(() => '?'));
  }
} finally {
  if (browser) await browser.close();
  stop();
}
process.exit(failed ? 1 : 0);
