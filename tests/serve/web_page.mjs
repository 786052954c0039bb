// The chat page at / in headless Chromium (Debian's /usr/bin/chromium driven
// by playwright-core; a fresh profile, nothing downloaded): type a message,
// click Send, wait for the streamed reply to finish (the page sets
// data-done="true" on the reply bubble), check the reply and its stats line
// (tokens/s, cached tokens); again in a new chat (now the prompt comes from
// the cache: cached tokens > 0); then click Stop during a long reply.
// The page asks for at most its "Max tokens" (1024): this model never ends a
// reply by itself, so the server's small --context (512) ends them sooner.
// Screenshots go to config.out. Prints {replies, stats, screenshots, stopped}.
import fs from 'node:fs';
import path from 'node:path';
import { check, config, metrics, launchChromium, print, sleep } from './lib.mjs';

const { browser, profile } = await launchChromium();
const out = { replies: [], stats: [], screenshots: [] };
try {
  const page = browser.pages()[0] ?? await browser.newPage();
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  await page.goto(config.base + '/');
  if (config.apiKey) await page.fill('#key', config.apiKey);
  await page.setChecked('#thinking', false);
  await page.fill('#temperature', '0');

  const bubbles = page.locator('.msg.assistant');
  const done = async (bubble, timeout) =>
    page.waitForFunction((e) => e.dataset.done === 'true', await bubble.elementHandle(), { timeout });
  async function send(text) {
    const n = await bubbles.count();
    await page.fill('#input', text);
    await page.click('#send');
    const bubble = bubbles.nth(n);
    await bubble.waitFor();
    return bubble;
  }
  async function finished(bubble, what) {
    await done(bubble, 60000);
    const cls = await bubble.getAttribute('class');
    const content = await bubble.locator('.content').textContent();
    const stats = await bubble.locator('.stats').textContent();
    check(!cls.includes('error'), () => `${what}: the page shows an error: ${content}`);
    return { content, stats };
  }
  const shot = async (name) => {
    const file = path.join(config.out, name);
    await page.screenshot({ path: file, fullPage: true });
    out.screenshots.push(file);
  };

  // The same message twice, each time in a new chat: the second prompt is the
  // first one again, so its history (all but the generation prompt) comes
  // from the prompt cache, and greedy decoding gives the same reply.
  const message = 'Tell me a short joke about computers.';
  for (let i = 0; i < 2; ++i) {
    if (i) await page.click('#clear');
    const { content, stats } = await finished(await send(message), `reply ${i + 1}`);
    check(content.trim().length > 0, `reply ${i + 1}: empty`);
    const speed = stats.match(/([\d.]+) tokens\/s/), cached = stats.match(/(\d+) cached tokens/);
    check(speed && Number(speed[1]) > 0, () => `reply ${i + 1}: no tokens/s in the stats line: ${JSON.stringify(stats)}`);
    check(cached, () => `reply ${i + 1}: no cached tokens in the stats line: ${JSON.stringify(stats)}`);
    check(/\d+ prompt tokens \(\d+ cached\), \d+ generated/.test(stats), () => `reply ${i + 1}: no usage in the stats line: ${JSON.stringify(stats)}`);
    if (i === 1) {
      check(Number(cached[1]) > 0, () => `reply 2: nothing came from the prompt cache: ${JSON.stringify(stats)}`);
      check(content === out.replies[0], 'reply 2: greedy, same prompt, but a different reply');
    }
    out.replies.push(content);
    out.stats.push(stats);
  }
  await shot('chat.png');

  // Stop a long reply once it has started.
  await page.click('#clear');
  const before = (await metrics()).deltagen_requests_cancelled_total;
  const bubble = await send(config.longMessage ?? 'Write a very long story about a dragon.');
  await page.waitForFunction((e) => e.querySelector('.content').textContent.length > 0 || e.dataset.done === 'true', await bubble.elementHandle(),
                             { timeout: 30000 });
  check(await bubble.getAttribute('data-done') !== 'true', 'the long reply finished before Stop could be clicked');
  check(await page.isEnabled('#stop') && await page.isDisabled('#send'), 'while streaming: Stop should be enabled and Send disabled');
  await page.click('#stop');
  await done(bubble, 10000);
  const stopped = await bubble.locator('.stats').textContent();
  const length = (await bubble.locator('.content').textContent()).length;
  check(stopped.startsWith('stopped'), () => `after Stop the stats line should say so: ${JSON.stringify(stopped)}`);
  let cancelled = before;
  for (let t = 0; t < 100 && cancelled === before; ++t) {
    await sleep(50);
    cancelled = (await metrics()).deltagen_requests_cancelled_total;
  }
  check(cancelled === before + 1, `Stop: the server did not cancel the sequence (cancelled ${before} -> ${cancelled})`);
  await sleep(300);
  check((await bubble.locator('.content').textContent()).length === length, 'the reply kept growing after Stop');
  check(await page.isEnabled('#send') && await page.isDisabled('#stop'), 'after Stop: Send should be enabled again');
  await shot('chat-stopped.png');
  out.stopped = { stats: stopped, chars: length };
  check(pageErrors.length === 0, () => `errors in the page: ${pageErrors.join('; ')}`);
} finally {
  await browser.close();
  fs.rmSync(profile, { recursive: true, force: true });
}
print(out);
