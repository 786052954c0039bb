// The official OpenAI JS client against deltagen serve, unchanged: models,
// chat (whole and streamed, same seed -> same text), a tool call round trip,
// logprobs, stream_options.include_usage, /v1/completions, response_format
// json_schema (valid JSON of the schema at temperature 0 and 1). Checks the shapes
// here; prints what tests/serve_test.cpp compares with `deltagen generate`:
//   {models, chat: {text, streamed, ...}, tools: {prompt_tokens, rendered_tokens, ...},
//    completion: {prompt, text, ...}, sampling}
// and writes into config.out: conv.json (the chat's messages), chat_prompt.txt (their
// rendering), tool_conv.json + tools.json (the tool round trip), tool_prompt.txt.
import fs from 'node:fs';
import path from 'node:path';
import { chatRenderer, check, checkUsage, config, equal, openaiClient, print, tokenize } from './lib.mjs';

const client = await openaiClient();
const render = await chatRenderer();
const result = {};

// ---- models ----
const models = [];
for await (const m of client.models.list()) models.push(m);
check(models.length === 1 && models[0].object === 'model' && typeof models[0].id === 'string',
      () => `models.list(): ${JSON.stringify(models)}`);
result.models = models.map((m) => m.id);
const model = models[0].id;

// Sampling spelled out in full, so that `deltagen generate` can be given the same.
const sampling = { temperature: 0.8, top_p: 0.95, top_k: 40, min_p: 0.0, repetition_penalty: 1.0,
                   presence_penalty: 0.0, frequency_penalty: 0.0, seed: 1234, max_tokens: 24 };
result.sampling = sampling;

// ---- chat: whole and streamed ----
const conversation = [
  { role: 'system', content: 'You are a helpful assistant.' },
  { role: 'user', content: 'Tell me something wise about time and money.' },
];
const chatRequest = { model, messages: conversation, ...sampling, chat_template_kwargs: { enable_thinking: false } };
const whole = await client.chat.completions.create(chatRequest);
check(whole.object === 'chat.completion' && whole.choices.length === 1, () => `chat: ${JSON.stringify(whole)}`);
const message = whole.choices[0].message;
check(message.role === 'assistant' && typeof message.content === 'string' && message.content.length > 0,
      () => `chat: no text: ${JSON.stringify(whole)}`);
checkUsage(whole.usage, 'chat');
check(['stop', 'length'].includes(whole.choices[0].finish_reason), 'chat: finish_reason');
check(whole.model === model, 'chat: model');

const stream = await client.chat.completions.create({ ...chatRequest, stream: true, stream_options: { include_usage: true } });
let streamed = '', finish = null, usage = null, chunks = 0, roleSeen = false;
for await (const chunk of stream) {
  check(chunk.object === 'chat.completion.chunk', () => `stream: ${JSON.stringify(chunk)}`);
  if (chunk.usage) {
    check(chunk.choices.length === 0, 'stream: the usage chunk has choices');
    usage = chunk.usage;
    continue;
  }
  check(usage === null, 'stream: a chunk after the usage chunk');
  const c = chunk.choices[0];
  if (c.delta.role) roleSeen = c.delta.role === 'assistant';
  if (c.delta.content) streamed += c.delta.content;
  if (c.finish_reason) finish = c.finish_reason;
  ++chunks;
}
check(roleSeen, 'stream: no delta with role "assistant"');
check(finish === whole.choices[0].finish_reason, `stream: finish_reason ${finish}, whole: ${whole.choices[0].finish_reason}`);
check(usage !== null, 'stream: include_usage gave no usage chunk');
checkUsage(usage, 'stream usage');
equal(usage.completion_tokens, whole.usage.completion_tokens, 'stream: completion_tokens');
equal(usage.prompt_tokens, whole.usage.prompt_tokens, 'stream: prompt_tokens');

// Without include_usage: no usage chunk.
const quiet = await client.chat.completions.create({ ...chatRequest, max_tokens: 4, stream: true });
for await (const chunk of quiet) check(!chunk.usage, 'stream without include_usage: a usage chunk');

const rendered = render(conversation, { enableThinking: false });
result.chat = { text: message.content, streamed, chunks, finish_reason: finish, usage: whole.usage,
                rendered_tokens: (await tokenize(rendered)).length };
fs.writeFileSync(path.join(config.out, 'conv.json'), JSON.stringify(conversation));
fs.writeFileSync(path.join(config.out, 'chat_prompt.txt'), rendered);

// ---- a tool call round trip ----
const tools = [{
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The current weather in a city.',
    parameters: { type: 'object', properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['c', 'f'] } },
                  required: ['city'] },
  },
}];
const toolConversation = [
  { role: 'user', content: 'What is the weather in Paris?' },
  { role: 'assistant', content: null,
    tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris", "unit": "c"}' } }] },
  { role: 'tool', tool_call_id: 'call_1', content: '{"temperature": 18, "sky": "cloudy"}' },
];
// The template's defaults (thinking on), as `deltagen generate --chat --print-prompt` renders them.
const toolReply = await client.chat.completions.create({ model, messages: toolConversation, tools, max_tokens: 16, temperature: 0 });
check(toolReply.object === 'chat.completion', () => `tools: ${JSON.stringify(toolReply)}`);
checkUsage(toolReply.usage, 'tools');
const toolPrompt = render(toolConversation, { tools });
result.tools = { prompt_tokens: toolReply.usage.prompt_tokens, rendered_tokens: (await tokenize(toolPrompt)).length,
                 finish_reason: toolReply.choices[0].finish_reason };
fs.writeFileSync(path.join(config.out, 'tool_conv.json'), JSON.stringify(toolConversation));
fs.writeFileSync(path.join(config.out, 'tools.json'), JSON.stringify(tools));
fs.writeFileSync(path.join(config.out, 'tool_prompt.txt'), toolPrompt);

// ---- logprobs ----
const lp = await client.chat.completions.create({ model, messages: conversation, max_tokens: 8, temperature: 0, logprobs: true,
                                                  top_logprobs: 3, chat_template_kwargs: { enable_thinking: false } });
const content = lp.choices[0].logprobs?.content;
check(Array.isArray(content) && content.length === lp.usage.completion_tokens,
      () => `logprobs: ${content?.length} entries for ${lp.usage.completion_tokens} tokens`);
for (const [i, e] of content.entries()) {
  const what = `logprobs.content[${i}]`;
  check(typeof e.token === 'string' && Number.isFinite(e.logprob) && e.logprob <= 0 && Array.isArray(e.bytes) &&
        e.bytes.every((b) => Number.isInteger(b) && b >= 0 && b < 256), () => `${what}: ${JSON.stringify(e)}`);
  check(e.top_logprobs.length === 3, () => `${what}: ${e.top_logprobs.length} top_logprobs, want 3`);
  for (const t of e.top_logprobs)
    check(typeof t.token === 'string' && Number.isFinite(t.logprob) && t.logprob <= 0 && Array.isArray(t.bytes), `${what}.top_logprobs`);
  for (let k = 1; k < 3; ++k) check(e.top_logprobs[k - 1].logprob >= e.top_logprobs[k].logprob, `${what}: top_logprobs not sorted`);
  // Greedy: the chosen token is the most likely one.
  check(e.top_logprobs[0].token === e.token && Math.abs(e.top_logprobs[0].logprob - e.logprob) < 1e-6,
        () => `${what}: greedy chose ${JSON.stringify(e.token)} but the top is ${JSON.stringify(e.top_logprobs[0])}`);
}
const plain = await client.chat.completions.create({ model, messages: conversation, max_tokens: 8, temperature: 0,
                                                     chat_template_kwargs: { enable_thinking: false } });
check(plain.choices[0].logprobs === null || plain.choices[0].logprobs === undefined, 'logprobs present without being asked');
equal(lp.choices[0].message.content, plain.choices[0].message.content, 'logprobs changed the greedy text');
result.logprobs = { tokens: content.length };

// ---- /v1/completions ----
const prompt = 'The secret of getting ahead is';
const textRequest = { model, prompt, ...sampling };
const completion = await client.completions.create(textRequest);
check(completion.object === 'text_completion' && completion.choices.length === 1 && typeof completion.choices[0].text === 'string' &&
      completion.choices[0].text.length > 0, () => `completions: ${JSON.stringify(completion)}`);
checkUsage(completion.usage, 'completions');
equal(completion.usage.prompt_tokens, (await tokenize(prompt)).length, 'completions: prompt_tokens');
let textStreamed = '';
const textStream = await client.completions.create({ ...textRequest, stream: true, stream_options: { include_usage: true } });
let textUsage = null;
for await (const chunk of textStream) {
  if (chunk.usage) textUsage = chunk.usage;
  else textStreamed += chunk.choices[0].text;
}
equal(textStreamed, completion.choices[0].text, 'completions: streamed text');
equal(textUsage?.completion_tokens, completion.usage.completion_tokens, 'completions: streamed usage');
const legacy = await client.completions.create({ model, prompt, max_tokens: 6, temperature: 0, logprobs: 2, echo: true });
const l = legacy.choices[0].logprobs;
check(legacy.choices[0].text.startsWith(prompt), 'completions echo: the text does not start with the prompt');
check(l && l.tokens.length === legacy.usage.completion_tokens && l.token_logprobs.length === l.tokens.length &&
      l.top_logprobs.length === l.tokens.length && l.text_offset.length === l.tokens.length,
      () => `completions logprobs: ${JSON.stringify(l)}`);
for (let i = 0; i < l.tokens.length; ++i) {
  const top = Object.entries(l.top_logprobs[i]);
  check(top.length >= 1 && top.length <= 2 && top.every(([, v]) => Number.isFinite(v) && v <= 0),
        () => `completions top_logprobs[${i}]: ${JSON.stringify(l.top_logprobs[i])}`);
  check(l.text_offset[i] >= prompt.length && (i === 0 || l.text_offset[i] >= l.text_offset[i - 1]), 'completions text_offset');
}
result.completion = { prompt, text: completion.choices[0].text, finish_reason: completion.choices[0].finish_reason,
                      completion_tokens: completion.usage.completion_tokens };

// ---- response_format: the reply is JSON of the schema (constrained decoding) ----
// Every string is bounded (enum, maxLength): this small model would write a free string forever.
const schema = { type: 'object', properties: { mood: { enum: ['calm', 'busy'] }, score: { type: 'integer', minimum: 0, maximum: 9 },
                                               note: { type: 'string', maxLength: 12 } },
                 required: ['mood', 'score', 'note'], additionalProperties: false };
for (const temperature of [0, 1]) {
  const structured = await client.chat.completions.create({
    model, messages: conversation, max_tokens: 600, temperature, seed: 7, chat_template_kwargs: { enable_thinking: false },
    response_format: { type: 'json_schema', json_schema: { name: 'status', schema } } });
  const choice = structured.choices[0];
  equal(choice.finish_reason, 'stop', `response_format (temperature ${temperature}): finish_reason`);
  let doc;
  try { doc = JSON.parse(choice.message.content); } catch (e) { check(false, `response_format: not JSON: ${choice.message.content}`); }
  check(['calm', 'busy'].includes(doc.mood) && Number.isInteger(doc.score) && doc.score >= 0 && doc.score <= 9 &&
        typeof doc.note === 'string' && [...doc.note].length <= 12 && Object.keys(doc).length === 3,
        () => `response_format: not of the schema: ${choice.message.content}`);
  (result.structured ??= []).push(doc);
}
print(result);
