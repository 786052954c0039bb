// A client that goes away cancels its sequence: one streamed request closed
// after its first tokens, one whole request abandoned while it is generated.
// Each time /metrics' deltagen_requests_cancelled_total goes up by one, the
// server is idle again soon after, and the next request works.
// config.long: a request body that generates for long (seconds).
// Prints {cancelled: [before, after stream, after whole], ...}.
import { check, checkChatCompletion, config, metrics, post, postStream, print, readEvents, sleep } from './lib.mjs';

const route = '/v1/chat/completions';
const long = config.long;

async function waitCancelled(before, what) {
  const started = Date.now();
  for (;;) {
    const m = await metrics();
    if (m.deltagen_requests_cancelled_total > before && m.deltagen_requests_running === 0) return { m, ms: Date.now() - started };
    check(Date.now() - started < 10000, () => `${what}: not cancelled after 10 s: cancelled ${m.deltagen_requests_cancelled_total} (was ${before}), running ${m.deltagen_requests_running}`);
    await sleep(50);
  }
}

const m0 = await metrics();
// Streamed: read until some text came, then close the connection.
{
  const controller = new AbortController();
  const r = await postStream(route, long, { signal: controller.signal });
  check(r.status === 200, () => `stream: HTTP ${r.status}`);
  // Until some generated text came (content or reasoning), then leave.
  let texts = 0, left = false;
  await readEvents(r, (e) => {
    const d = e.choices?.[0]?.delta ?? {};
    if ((d.content || d.reasoning_content) && ++texts === 3) {
      left = true;
      controller.abort();
    }
  }).catch((e) => check(left && e.name === 'AbortError', () => `stream: ${e.message}`));
  check(left, 'the long stream ended by itself before the client left');
}
const { m: m1, ms: streamMs } = await waitCancelled(m0.deltagen_requests_cancelled_total, 'stream');
check(m1.deltagen_requests_finished_total === m0.deltagen_requests_finished_total, 'the abandoned stream counted as finished');

// Whole: give up while the server generates.
{
  const controller = new AbortController();
  const pending = post(route, long, { signal: controller.signal }).catch((e) => e);
  for (let t = 0; ; ++t) {  // until it is running
    const m = await metrics();
    if (m.deltagen_requests_running > 0) break;
    check(t < 200, 'the whole request never started');
    await sleep(20);
  }
  await sleep(200);
  controller.abort();
  await pending;
}
const { m: m2, ms: wholeMs } = await waitCancelled(m1.deltagen_requests_cancelled_total, 'whole');

const good = await post(route, { messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 });
check(good.status === 200, () => `the next request: HTTP ${good.status}`);
checkChatCompletion(good.json, 'the next request');
print({ cancelled: [m0, m1, m2].map((m) => m.deltagen_requests_cancelled_total), stream_ms: streamMs, whole_ms: wholeMs });
