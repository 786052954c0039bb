// Continuous batching changes nothing: six greedy requests with different
// prompts (three streamed, three whole), plus two seeded sampled ones, give
// the same text sent one by one and sent all at once. The concurrent round
// must really have been batched: /metrics' decode rows per decode step > 1.
// Prints {texts, rows_per_step}.
import { check, checkChatCompletion, checkChatStream, equal, metrics, post, postStream, print, readEvents } from './lib.mjs';

const topics = ['the sea', 'computers', 'politics', 'love', 'cats', 'the weather', 'money', 'music'];
const requests = topics.map((topic, i) => ({
  messages: [{ role: 'user', content: `Say something funny about ${topic}.` }],
  max_tokens: 32 + 4 * i,
  chat_template_kwargs: { enable_thinking: false },
  ...(i < 6 ? { temperature: 0 } : { temperature: 0.9, top_p: 0.9, seed: 100 + i }),
  stream: i % 2 === 1,
}));

async function send(body, what) {
  if (!body.stream) {
    const r = await post('/v1/chat/completions', body);
    check(r.status === 200, () => `${what}: HTTP ${r.status}: ${r.text.slice(0, 200)}`);
    return { text: checkChatCompletion(r.json, what), tokens: r.json.usage.completion_tokens };
  }
  const r = await postStream('/v1/chat/completions', { ...body, stream_options: { include_usage: true } });
  check(r.status === 200, () => `${what}: HTTP ${r.status}`);
  const s = checkChatStream(await readEvents(r), what);
  return { text: s.text, tokens: s.usage.completion_tokens };
}

const alone = [];
for (const [i, body] of requests.entries()) alone.push(await send(body, `request ${i} alone`));
const before = await metrics();
const together = await Promise.all(requests.map((body, i) => send(body, `request ${i} concurrent`)));
const after = await metrics();
for (let i = 0; i < requests.length; ++i) {
  equal(together[i].text, alone[i].text, `request ${i} (${requests[i].stream ? 'streamed' : 'whole'}): concurrent vs alone`);
  equal(together[i].tokens, alone[i].tokens, `request ${i}: completion tokens`);
}
const steps = after.deltagen_decode_steps_total - before.deltagen_decode_steps_total;
const generated = after.deltagen_generated_tokens_total - before.deltagen_generated_tokens_total;
// Every generated token but each sequence's first comes from a decode step.
const rowsPerStep = (generated - requests.length) / steps;
check(rowsPerStep > 1.5, `the concurrent requests were not batched: ${rowsPerStep.toFixed(2)} sequences per decode step`);
print({ texts: alone.map((a) => a.text), rows_per_step: rowsPerStep, steps, generated });
