// The playground page in a real browser: headless Chromium (Debian's `chromium`,
// CHROMIUM_BIN to override) driven by playwright-core. Paste the agent key, type "menu", see
// the bot's reply and its buttons, click "Tea", see the next reply. A screenshot is saved as
// artifacts/playground.png.
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { agent, here, inspect } from './lib.mjs';

const executablePath = process.env.CHROMIUM_BIN || '/usr/bin/chromium';
const { base, key, stop } = await agent();
let browser;
let failed = false;
try {
  browser = await chromium.launch({ executablePath, headless: true, args: ['--no-sandbox'] });
  const page = await browser.newPage();
  await page.goto(`${base}/v1/playground`);
  await page.fill('#key', key);
  await page.fill('#text', 'menu');
  await page.click('#send');
  await page.waitForSelector('.bot >> text=Pick one', { timeout: 30000 });
  const tea = page.locator('button.reply', { hasText: 'Tea' });
  await tea.waitFor({ timeout: 30000 });
  assert.equal(await page.locator('button.reply').count(), 2);
  await tea.click();
  await page.waitForSelector('.bot >> text=You picked tea.', { timeout: 30000 });
  const dir = join(here, 'artifacts');
  mkdirSync(dir, { recursive: true });
  await page.screenshot({ path: join(dir, 'playground.png'), fullPage: true });
  // Styled as the console: nothing past a phone's edge, no serious axe-core finding.
  assert.deepEqual(await inspect(page, dir, 'playground'), []);
  console.log('ok playground: reply, buttons, click, next reply; screenshot artifacts/playground.png');
} catch (e) {
  failed = true;
  console.error(e);
} finally {
  if (browser) await browser.close();
  stop();
}
process.exit(failed ? 1 : 0);
