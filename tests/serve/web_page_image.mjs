// The chat page's image attachment in headless Chromium, against a --vision
// model: choose a PNG with the page's file input (as the Image button does),
// see its thumbnail, send a message, and read the reply's stats line. The
// request the page sent must carry the image as a data: URL image_url part,
// and the prompt the server counted (usage.prompt_tokens, in the stats line)
// must be the text-only prompt plus the image's tokens: the test compares it
// with the same message sent without the image. Also checks, at the page's
// 1100 px width, that the Temperature field shows its whole placeholder.
// config: base, modules, out, chromium, image (a PNG file), maxTokens.
// Prints {with_image, text_only, image_part, screenshot}.
import fs from 'node:fs';
import path from 'node:path';
import { check, config, launchChromium, print, request } from './lib.mjs';

const message = 'what is in it?';
const { browser, profile } = await launchChromium();
const out = {};
try {
  const page = browser.pages()[0] ?? await browser.newPage();
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  const sent = [];
  page.on('request', (r) => { if (r.url().endsWith('/v1/chat/completions')) sent.push(r.postDataJSON()); });
  await page.goto(config.base + '/');
  await page.setChecked('#thinking', false);
  await page.fill('#temperature', '0');
  await page.fill('#max-tokens', String(config.maxTokens ?? 4));

  // The placeholder's text must fit beside the number field's spin buttons.
  const fit = await page.$eval('#temperature', (input) => {
    const style = getComputedStyle(input);
    const context = document.createElement('canvas').getContext('2d');
    context.font = `${style.fontSize} ${style.fontFamily}`;
    const text = context.measureText(input.placeholder).width;
    const room = input.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight) - 16;  // spin buttons
    return { text, room };
  });
  check(fit.text <= fit.room, () => `the Temperature placeholder needs ${fit.text.toFixed(1)} px, the field shows ${fit.room.toFixed(1)}`);

  await page.setInputFiles('#image-file', config.image);
  await page.locator('#attachments img.thumb').first().waitFor();
  check(await page.locator('#attachments img.thumb').count() === 1, 'one image chosen, but not one thumbnail');

  const bubbles = page.locator('.msg.assistant');
  await page.fill('#input', message);
  await page.click('#send');
  const bubble = bubbles.first();
  await bubble.waitFor();
  await page.waitForFunction((e) => e.dataset.done === 'true', await bubble.elementHandle(), { timeout: 60000 });
  const content = await bubble.locator('.content').textContent();
  const stats = await bubble.locator('.stats').textContent();
  check(!(await bubble.getAttribute('class')).includes('error'), () => `the page shows an error: ${content}`);
  check(await page.locator('.msg.user img.thumb').count() === 1, 'the sent message does not show its image');
  check(await page.locator('#attachments').isHidden(), 'the attachment strip is still shown after sending');

  check(sent.length === 1, () => `the page sent ${sent.length} chat requests, not 1`);
  const parts = sent[0].messages.at(-1).content;
  check(Array.isArray(parts), () => `the user message is not a list of parts: ${JSON.stringify(parts).slice(0, 200)}`);
  const image = parts.find((p) => p.type === 'image_url');
  check(image && image.image_url.url.startsWith('data:image/png;base64,'), 'no PNG data: URL image_url part in the request');
  check(parts.some((p) => p.type === 'text' && p.text === message), 'the text part is missing from the request');
  const png = fs.readFileSync(config.image).toString('base64');
  check(image.image_url.url === 'data:image/png;base64,' + png, 'the data: URL does not hold the file');
  out.image_part = { type: image.type, url_bytes: image.image_url.url.length };

  const usage = stats.match(/(\d+) prompt tokens \(\d+ cached\), \d+ generated/);
  check(usage, () => `no usage in the stats line: ${JSON.stringify(stats)}`);
  out.with_image = Number(usage[1]);

  // The same message without the image, as the page would have sent it.
  const plain = await request('POST', '/v1/chat/completions', {
    body: { messages: [{ role: 'user', content: message }], max_tokens: 1, temperature: 0,
            chat_template_kwargs: { enable_thinking: false } },
  });
  check(plain.status === 200, () => `the text-only request failed: ${plain.status} ${plain.text}`);
  out.text_only = plain.json.usage.prompt_tokens;

  out.screenshot = path.join(config.out, 'chat-image.png');
  await page.screenshot({ path: out.screenshot, fullPage: true });
  check(pageErrors.length === 0, () => `errors in the page: ${pageErrors.join('; ')}`);
} finally {
  await browser.close();
  fs.rmSync(profile, { recursive: true, force: true });
}
print(out);
