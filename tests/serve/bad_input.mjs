// Bad requests get a well-formed OpenAI error with the right status, and the
// server stays up: malformed JSON, wrong types and ranges, unknown roles,
// unknown routes, a missing or wrong API key (config.apiKey must be set;
// /health needs none). Prints {cases: [{name, status, param, code}], ...}.
import { check, checkChatCompletion, checkError, config, get, post, print, request } from './lib.mjs';

check(config.apiKey, 'bad_input.mjs needs a server with --api-key');
const user = [{ role: 'user', content: 'hi' }];
const chat = (extra) => ({ messages: user, max_tokens: 4, ...extra });

// [name, route, body (string: sent as is), status, param the error must name (undefined: any)]
const cases = [
  ['malformed JSON', '/v1/chat/completions', '{"messages": [{"role": "user", "content": "hi"}', 400],
  ['not an object', '/v1/chat/completions', '[1, 2]', 400],
  ['empty body', '/v1/chat/completions', '', 400],
  ['a number beyond a double', '/v1/chat/completions', '{"messages": [{"role": "user", "content": "hi"}], "temperature": 1e400}', 400],
  ['invalid UTF-8', '/v1/chat/completions', Buffer.from('{"messages": [{"role": "user", "content": "\xff\xfe"}]}', 'latin1'), 400],
  ['messages: "hi"', '/v1/chat/completions', { messages: 'hi' }, 400, 'messages'],
  ['messages missing', '/v1/chat/completions', { max_tokens: 4 }, 400, 'messages'],
  ['messages: []', '/v1/chat/completions', { messages: [] }, 400, 'messages'],
  ['max_tokens: "x"', '/v1/chat/completions', chat({ max_tokens: 'x' }), 400, 'max_tokens'],
  ['max_tokens: 0', '/v1/chat/completions', chat({ max_tokens: 0 }), 400, 'max_tokens'],
  ['max_tokens: 1.5', '/v1/chat/completions', chat({ max_tokens: 1.5 }), 400, 'max_tokens'],
  ['temperature: 5', '/v1/chat/completions', chat({ temperature: 5 }), 400, 'temperature'],
  ['temperature: "hot"', '/v1/chat/completions', chat({ temperature: 'hot' }), 400, 'temperature'],
  ['top_p: 0', '/v1/chat/completions', chat({ top_p: 0 }), 400, 'top_p'],
  ['seed: "abc"', '/v1/chat/completions', chat({ seed: 'abc' }), 400, 'seed'],
  ['n: 2', '/v1/chat/completions', chat({ n: 2 }), 400, 'n'],
  ['stop: 5', '/v1/chat/completions', chat({ stop: 5 }), 400, 'stop'],
  ['stream: "yes"', '/v1/chat/completions', chat({ stream: 'yes' }), 400, 'stream'],
  ['stream_options without stream', '/v1/chat/completions', chat({ stream_options: { include_usage: true } }), 400, 'stream_options'],
  ['top_logprobs without logprobs', '/v1/chat/completions', chat({ top_logprobs: 2 }), 400, 'top_logprobs'],
  ['top_logprobs: 50', '/v1/chat/completions', chat({ logprobs: true, top_logprobs: 50 }), 400, 'top_logprobs'],
  ['unknown role', '/v1/chat/completions', { messages: [{ role: 'wizard', content: 'hi' }] }, 400],
  ['role missing', '/v1/chat/completions', { messages: [{ content: 'hi' }] }, 400],
  ['content: 42', '/v1/chat/completions', { messages: [{ role: 'user', content: 42 }] }, 400],
  ['an image part', '/v1/chat/completions',
   { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:,' } }] }] }, 400],
  ['tool call arguments not JSON', '/v1/chat/completions',
   { messages: [user[0], { role: 'assistant', tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{oops' } }] }] }, 400],
  ['tools: "all"', '/v1/chat/completions', chat({ tools: 'all' }), 400],
  ['tool_choice: "maybe"', '/v1/chat/completions', chat({ tool_choice: 'maybe' }), 400, 'tool_choice'],
  ['no user message (the template raises)', '/v1/chat/completions', { messages: [{ role: 'system', content: 'x' }] }, 400],
  ['chat_template_kwargs: 3', '/v1/chat/completions', chat({ chat_template_kwargs: 3 }), 400, 'chat_template_kwargs'],
  ['completions: prompt missing', '/v1/completions', { max_tokens: 4 }, 400, 'prompt'],
  ['completions: prompt ""', '/v1/completions', { prompt: '' }, 400, 'prompt'],
  ['completions: id outside the vocabulary', '/v1/completions', { prompt: [1, 99999999] }, 400, 'prompt'],
  ['completions: prompt {}', '/v1/completions', { prompt: {} }, 400, 'prompt'],
  ['completions: two prompts', '/v1/completions', { prompt: ['a', 'b'] }, 400, 'prompt'],
  ['completions: logprobs 9', '/v1/completions', { prompt: 'a', logprobs: 9 }, 400, 'logprobs'],
  ['tokenize: content 5', '/tokenize', { content: 5 }, 400, 'content'],
  ['detokenize: tokens ["a"]', '/detokenize', { tokens: ['a'] }, 400, 'tokens'],
  ['detokenize: id -1', '/detokenize', { tokens: [-1] }, 400, 'tokens'],
  ['response_format: {type: "xml"}', '/v1/chat/completions', chat({ response_format: { type: 'xml' } }), 400, 'response_format.type'],
  ['json_schema without a schema', '/v1/chat/completions',
   chat({ response_format: { type: 'json_schema', json_schema: { name: 's' } } }), 400, 'response_format.json_schema.schema'],
  ['json_schema with an unsupported keyword', '/v1/chat/completions',
   chat({ response_format: { type: 'json_schema', json_schema: { name: 's', schema: { type: 'string', pattern: '^a' } } } }),
   400, 'response_format.json_schema'],
];

const out = { cases: [] };
for (const [name, route, body, status, param] of cases) {
  const r = await post(route, body);
  const e = checkError(r, status, name);
  if (param !== undefined) check(e.param === param, () => `${name}: param ${JSON.stringify(e.param)}, want ${param}`);
  check(e.type === 'invalid_request_error', () => `${name}: type ${e.type}`);
  out.cases.push({ name, status: r.status, param: e.param, message: e.message });
}

// Routes and methods that do not exist.
for (const [method, route] of [['GET', '/v1/nothing'], ['POST', '/v1/models'], ['GET', '/v1/chat/completions']]) {
  const r = await request(method, route);
  checkError(r, 404, `${method} ${route}`);
  out.cases.push({ name: `${method} ${route}`, status: r.status });
}

// The API key.
for (const [name, key] of [['no key', ''], ['wrong key', config.apiKey + 'x'], ['truncated key', config.apiKey.slice(0, -1)]]) {
  for (const [method, route, body] of [['POST', '/v1/chat/completions', chat({})], ['GET', '/v1/models'], ['POST', '/v1/completions', { prompt: 'a' }],
                                        ['POST', '/tokenize', { content: 'a' }], ['GET', '/metrics']]) {
    const r = await request(method, route, { body, key });
    const e = checkError(r, 401, `${name}: ${method} ${route}`);
    check(e.type === 'authentication_error', () => `${name}: type ${e.type}`);
  }
  out.cases.push({ name, status: 401 });
}
const basic = await request('GET', '/v1/models', { key: '', headers: { Authorization: `Basic ${config.apiKey}` } });
checkError(basic, 401, 'Authorization: Basic');
const health = await get('/health', { key: '' });
check(health.status === 200 && health.json?.status === 'ok', () => `/health without a key: ${health.status} ${health.text}`);
const page = await get('/', { key: '' });
check(page.status === 200 && page.text.includes('<html'), '/ without a key');

// Still up, and still right.
const good = await post('/v1/chat/completions', chat({ temperature: 0 }));
check(good.status === 200, () => `a good request after the bad ones: HTTP ${good.status}: ${good.text}`);
checkChatCompletion(good.json, 'a good request after the bad ones');
print(out);
