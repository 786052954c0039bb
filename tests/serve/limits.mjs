// The server's limits, on one started with --context 512 --max-body-mb 1
// --parallel 1 --max-queue 0:
//   - a 2 MB body: 413 with an OpenAI error;
//   - a prompt longer than the context: 400, code context_length_exceeded,
//     the message giving the context (512) and the prompt's token count;
//   - five long requests at once: one runs, the four that find no room (none
//     may wait) get 503 with Retry-After;
// and a normal request works after each. config.long: a body that generates
// for long. Prints {too_large, context, queue: {statuses}}.
import fs from 'node:fs';
import { chatRenderer, check, checkChatCompletion, checkError, config, fail, post, print, tokenize } from './lib.mjs';

const render = await chatRenderer();
const works = async (what) => {
  const r = await post('/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 });
  check(r.status === 200, () => `${what}: then a good request: HTTP ${r.status} ${r.text.slice(0, 200)}`);
  checkChatCompletion(r.json, `${what}: then a good request`);
};
const out = {};

// 2 MB, well-formed.
const big = JSON.stringify({ messages: [{ role: 'user', content: 'x'.repeat(2 << 20) }] });
let tooLarge;
try {
  tooLarge = await post('/v1/chat/completions', big);
} catch (e) {
  fail(`a 2 MB body: the connection failed before a response came: ${e.cause?.code ?? ''} ${e.message}`);
}
const e413 = checkError(tooLarge, 413, 'a 2 MB body');
out.too_large = { status: tooLarge.status, message: e413.message };
await works('2 MB body');

// Longer than the context, but under the body limit.
const sample = fs.readFileSync(config.sample, 'utf8').slice(0, 6000);
const messages = [{ role: 'user', content: sample }];
const promptTokens = (await tokenize(render(messages))).length;
check(promptTokens > 512, `the long prompt has only ${promptTokens} tokens`);
const longReply = await post('/v1/chat/completions', { messages });
const e = checkError(longReply, 400, 'a prompt longer than the context');
check(e.code === 'context_length_exceeded', () => `code ${e.code}, want context_length_exceeded`);
check(e.message.includes('512') && e.message.includes(String(promptTokens)),
      () => `the message should give the context (512) and the prompt's ${promptTokens} tokens: ${e.message}`);
out.context = { prompt_tokens: promptTokens, message: e.message };
await works('too long');

// Queue overflow.
const n = 5;
const replies = await Promise.all(Array.from({ length: n }, () => post('/v1/chat/completions', config.long)));
const statuses = replies.map((r) => r.status);
for (const [i, r] of replies.entries()) {
  if (r.status === 503) {
    const e = checkError(r, 503, `request ${i} of ${n}`);
    check(r.headers.get('retry-after') !== null && Number(r.headers.get('retry-after')) >= 1,
          () => `request ${i}: 503 without Retry-After`);
    out.busy_message = e.message;
  } else {
    check(r.status === 200, () => `request ${i} of ${n}: HTTP ${r.status} ${r.text.slice(0, 200)}`);
    checkChatCompletion(r.json, `request ${i} of ${n}`);
  }
}
// --parallel 1 --max-queue 0: one runs, none may wait.
check(statuses.filter((s) => s === 200).length === 1 && statuses.filter((s) => s === 503).length === n - 1,
      () => `${n} long requests at once on --parallel 1 --max-queue 0: want one 200 and ${n - 1} x 503, got ${statuses}`);
out.queue = { statuses };
await works('queue overflow');
print(out);

