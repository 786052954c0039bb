// config.count requests (default 200), config.concurrency at a time (16):
// good and bad, streamed and whole, chat and text, some whose client walks
// away mid-stream. Every answer must be well-formed (an OpenAI response or
// error with the expected status, streams ending in [DONE]); afterwards the
// server is idle (nothing running or queued) and answers a good request.
// Prints {statuses, kinds, seconds}.
import { check, checkChatCompletion, checkChatStream, checkError, checkUsage, config, get, metrics, post, postStream,
         print, readEvents, sleep } from './lib.mjs';

const count = config.count ?? 200, concurrency = config.concurrency ?? 16, offset = config.seed_offset ?? 0;
const words = ['apple', 'river', 'engine', 'garden', 'planet', 'window', 'silver', 'castle'];
const user = (i) => [{ role: 'user', content: `Write about the ${words[i % 8]} number ${i + offset}.` }];
const thinkingOff = { chat_template_kwargs: { enable_thinking: false } };

async function streamed(route, body, what, abortAfter = 0) {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new Error('timeout')), 120000);
  const r = await postStream(route, body, { signal: controller.signal });
  check(r.status === 200, () => `${what}: HTTP ${r.status}`);
  check((r.headers.get('content-type') ?? '').startsWith('text/event-stream'), `${what}: not text/event-stream`);
  if (abortAfter) {
    const reader = r.body.getReader();
    for (let got = 0; got < abortAfter;) { const { done, value } = await reader.read(); if (done) break; got += value.length; }
    controller.abort();
    clearTimeout(timer);
    return 'aborted';
  }
  const events = await readEvents(r);
  clearTimeout(timer);
  return events;
}

// Each kind: what it sends and what it must get.
const kinds = [
  ['chat', async (i) => {
    const r = await post('/v1/chat/completions', { messages: user(i), max_tokens: 6, temperature: 0.7, seed: i, ...thinkingOff });
    check(r.status === 200, () => `chat ${i}: HTTP ${r.status} ${r.text.slice(0, 200)}`);
    checkChatCompletion(r.json, `chat ${i}`);
    return r.status;
  }],
  ['chat stream', async (i) => {
    const s = checkChatStream(await streamed('/v1/chat/completions', { messages: user(i), max_tokens: 6,
                                                                        stream_options: { include_usage: true }, ...thinkingOff }, `chat stream ${i}`), `chat stream ${i}`);
    checkUsage(s.usage, `chat stream ${i}`);
    return 200;
  }],
  ['text', async (i) => {
    const r = await post('/v1/completions', { prompt: `Number ${i} is`, max_tokens: 5 });
    check(r.status === 200 && r.json.object === 'text_completion' && typeof r.json.choices[0].text === 'string',
          () => `text ${i}: HTTP ${r.status} ${r.text.slice(0, 200)}`);
    checkUsage(r.json.usage, `text ${i}`);
    return r.status;
  }],
  ['text stream', async (i) => {
    const { events, done } = await streamed('/v1/completions', { prompt: `Number ${i} is`, max_tokens: 5 }, `text stream ${i}`);
    check(done && events.length > 0 && events.every((e) => e.object === 'text_completion') && events.at(-1).choices[0].finish_reason,
          () => `text stream ${i}: ${JSON.stringify(events).slice(0, 300)}`);
    return 200;
  }],
  ['malformed', async (i) => checkError(await post('/v1/chat/completions', `{"messages": [${i}`), 400, `malformed ${i}`) && 400],
  ['wrong type', async (i) => {
    const bodies = [{ messages: 'hi' }, { messages: user(i), max_tokens: 'x' }, { messages: user(i), temperature: 5 },
                    { messages: [{ role: 'robot', content: 'x' }] }];
    return checkError(await post('/v1/chat/completions', bodies[i % 4]), 400, `wrong type ${i}`) && 400;
  }],
  ['no key', async (i) => checkError(await post('/v1/chat/completions', { messages: user(i) }, { key: '' }), 401, `no key ${i}`) && 401],
  ['tokenize', async (i) => {
    const r = await post('/tokenize', { content: `token ${i}` });
    check(r.status === 200 && Array.isArray(r.json.tokens), `tokenize ${i}`);
    return 200;
  }],
  ['not found', async (i) => checkError(await get(`/v2/thing/${i}`), 404, `not found ${i}`) && 404],
  ['walks away', async (i) => {
    await streamed('/v1/chat/completions', { messages: user(i), max_tokens: 200, ...thinkingOff }, `walks away ${i}`, 1);
    return 'aborted';
  }],
];

const statuses = {}, perKind = {};
const started = Date.now();
let next = 0;
async function worker() {
  for (let i; (i = next++) < count;) {
    const [name, run] = kinds[i % kinds.length];
    const status = await run(i);
    statuses[status] = (statuses[status] ?? 0) + 1;
    perKind[name] = (perKind[name] ?? 0) + 1;
  }
}
await Promise.all(Array.from({ length: concurrency }, worker));
const seconds = (Date.now() - started) / 1000;

// Idle again: the abandoned streams were cancelled, nothing is left running.
let m;
for (let t = 0; t < 100; ++t) {
  m = await metrics();
  if (m.deltagen_requests_running === 0 && m.deltagen_requests_queued === 0) break;
  await sleep(100);
}
check(m.deltagen_requests_running === 0 && m.deltagen_requests_queued === 0,
      () => `still busy after the run: running ${m.deltagen_requests_running}, queued ${m.deltagen_requests_queued}`);
const health = await get('/health');
check(health.status === 200, 'health after the run');
const good = await post('/v1/chat/completions', { messages: user(0), max_tokens: 4, ...thinkingOff });
check(good.status === 200, () => `a good request after the run: HTTP ${good.status}`);
checkChatCompletion(good.json, 'a good request after the run');
m = await metrics();  // the state the test compares: after the last request
print({ count, concurrency, statuses, kinds: perKind, seconds, metrics: m });
