// Shared by the server's end-to-end scripts (tests/serve/*.mjs, run by
// tests/serve_test.cpp). Every script takes one argument, a JSON object:
//   base      the server, "http://127.0.0.1:PORT"
//   apiKey    its key ("" when it has none)
//   modules   third_party/node_modules (openai, playwright-core)
//   jinja     the @huggingface/jinja package folder
//   template  Qwen3.5's chat_template.jinja
//   out       a folder for files the test reads afterwards
// and prints one JSON object on stdout, or fails: exit status 1 and a line
// "FAIL: ..." on stderr saying what was wrong.
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

export const config = JSON.parse(process.argv[2] ?? '{}');

export function fail(message) {
  process.stderr.write(`FAIL: ${message}\n`);
  process.exit(1);
}
process.on('unhandledRejection', (e) => fail(e?.stack ?? String(e)));
process.on('uncaughtException', (e) => fail(e?.stack ?? String(e)));

export function check(condition, message) {
  if (!condition) fail(typeof message === 'function' ? message() : message);
}

export function equal(got, want, what) {
  const g = JSON.stringify(got), w = JSON.stringify(want);
  check(g === w, () => `${what}: got ${g}, want ${w}`);
}

export function print(result) {
  process.stdout.write(JSON.stringify(result) + '\n');
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function importFile(file) {
  return import(pathToFileURL(file).href);
}

// The official OpenAI client, pointed at the server as a user would.
export async function openaiClient(options = {}) {
  const { default: OpenAI } = await importFile(path.join(config.modules, 'openai', 'index.mjs'));
  return new OpenAI({ baseURL: config.base + '/v1', apiKey: config.apiKey || 'none', maxRetries: 0, timeout: 120000, ...options });
}

export async function playwright() {
  return importFile(path.join(config.modules, 'playwright-core', 'index.mjs'));
}

// Debian's Chromium, headless, in a fresh profile under config.out (the caller
// removes it), at the page's 1100 x 800 test size; nothing downloaded.
export async function launchChromium() {
  const { chromium } = await playwright();
  const profile = fs.mkdtempSync(path.join(config.out, 'chromium-profile-'));
  const browser = await chromium.launchPersistentContext(profile, {
    executablePath: config.chromium ?? '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
           '--disable-component-update', '--disable-sync'],
    viewport: { width: 1100, height: 800 },
  });
  return { browser, profile };
}

export function authHeaders(key = config.apiKey) {
  return key ? { Authorization: `Bearer ${key}` } : {};
}

// A raw HTTP request; the reply as {status, headers, text, json (or undefined)}.
export async function request(method, route, { body, headers = {}, key = config.apiKey, signal, timeoutMs = 120000 } = {}) {
  const init = { method, headers: { ...authHeaders(key), ...headers }, signal: signal ?? AbortSignal.timeout(timeoutMs) };
  if (body !== undefined) {
    init.body = typeof body === 'string' || body instanceof Uint8Array ? body : JSON.stringify(body);
    if (!init.headers['Content-Type']) init.headers['Content-Type'] = 'application/json';
  }
  const r = await fetch(config.base + route, init);
  const text = await r.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: r.status, headers: r.headers, text, json };
}

export const post = (route, body, options = {}) => request('POST', route, { ...options, body });

// A streamed request ("stream": true added): the fetch Response, its body unread.
export function postStream(route, body, { signal } = {}) {
  return fetch(config.base + route, { method: 'POST', signal: signal ?? AbortSignal.timeout(120000),
    headers: { 'Content-Type': 'application/json', ...authHeaders() }, body: JSON.stringify({ ...body, stream: true }) });
}
export const get = (route, options = {}) => request('GET', route, options);

// An OpenAI error object: {"error": {"message": string, "type": string, "param", "code"}}.
export function isErrorBody(json) {
  const e = json?.error;
  return !!e && typeof e.message === 'string' && e.message.length > 0 && typeof e.type === 'string' &&
         'param' in e && 'code' in e && (e.param === null || typeof e.param === 'string') &&
         (e.code === null || typeof e.code === 'string');
}

export function checkError(reply, status, what) {
  check(reply.status === status, () => `${what}: HTTP ${reply.status}, want ${status}: ${reply.text.slice(0, 300)}`);
  check(isErrorBody(reply.json), () => `${what}: not an OpenAI error object: ${reply.text.slice(0, 300)}`);
  return reply.json.error;
}

// A whole chat completion as OpenAI shapes it; returns the message text.
export function checkChatCompletion(json, what) {
  check(json && json.object === 'chat.completion' && typeof json.id === 'string', () => `${what}: not a chat.completion: ${JSON.stringify(json)}`);
  const c = json.choices?.[0];
  check(json.choices.length === 1 && c.index === 0 && c.message?.role === 'assistant', () => `${what}: bad choices: ${JSON.stringify(json.choices)}`);
  check(['stop', 'length', 'tool_calls'].includes(c.finish_reason), () => `${what}: finish_reason ${c.finish_reason}`);
  checkUsage(json.usage, what);
  check(json.usage.completion_tokens >= 1, () => `${what}: no completion tokens`);
  return c.message.content ?? '';
}

export function checkUsage(u, what) {
  check(u && Number.isInteger(u.prompt_tokens) && Number.isInteger(u.completion_tokens) &&
        u.total_tokens === u.prompt_tokens + u.completion_tokens && u.prompt_tokens >= 1 &&
        Number.isInteger(u.prompt_tokens_details?.cached_tokens) && u.prompt_tokens_details.cached_tokens >= 0 &&
        u.prompt_tokens_details.cached_tokens < u.prompt_tokens,
        () => `${what}: bad usage ${JSON.stringify(u)}`);
}

// Server-sent events from a fetch Response: the parsed data objects, and
// whether "data: [DONE]" ended them. Fails on a line that is not JSON.
export async function readEvents(response, onEvent = () => {}) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const events = [];
  let buffer = '', done = false;
  for (;;) {
    const { value, done: eof } = await reader.read();
    if (eof) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      for (const line of block.split('\n')) {
        if (line.startsWith(':') || line === '') continue;  // comments: keep-alives
        check(line.startsWith('data: '), () => `not an SSE data line: ${JSON.stringify(line)}`);
        const data = line.slice(6);
        check(!done, () => `data after [DONE]: ${data}`);
        if (data === '[DONE]') {
          done = true;
          continue;
        }
        let event;
        try {
          event = JSON.parse(data);
        } catch {
          fail(`an SSE event is not JSON: ${data}`);
        }
        events.push(event);
        onEvent(event);
      }
    }
  }
  check(buffer === '', () => `the stream ended inside an event: ${JSON.stringify(buffer)}`);
  return { events, done };
}

// A streamed chat completion: checks the chunks' shape, returns the text,
// the finish reason and the usage chunk (if any).
export function checkChatStream({ events, done }, what) {
  check(done, `${what}: the stream did not end with data: [DONE]`);
  let text = '', finish = null, usage = null, id = null;
  for (const e of events) {
    check(!e.error, () => `${what}: error event ${JSON.stringify(e)}`);
    check(e.object === 'chat.completion.chunk', () => `${what}: not a chunk: ${JSON.stringify(e)}`);
    id ??= e.id;
    check(e.id === id, `${what}: chunks of different ids`);
    if (e.usage) {
      check(e.choices.length === 0, `${what}: the usage chunk has choices`);
      usage = e.usage;
      continue;
    }
    check(usage === null, `${what}: a chunk after the usage chunk`);
    const c = e.choices[0];
    check(finish === null, () => `${what}: a chunk after the finish chunk: ${JSON.stringify(e)}`);
    if (c.delta?.content) text += c.delta.content;
    if (c.finish_reason) finish = c.finish_reason;
  }
  check(finish !== null, `${what}: no chunk with a finish_reason`);
  return { text, finish, usage };
}

// Renders Qwen3.5's chat template with Hugging Face's JS Jinja engine, as
// transformers' apply_chat_template would: tool call arguments given as JSON
// strings (OpenAI's API) become objects, as deltagen's normalize_messages does.
export async function chatRenderer() {
  const { Template } = await importFile(path.join(config.jinja, 'dist', 'index.js'));
  const template = new Template(fs.readFileSync(config.template, 'utf8'));
  return (messages, { tools, addGenerationPrompt = true, enableThinking } = {}) => {
    const normalized = messages.map((m) => {
      if (!m.tool_calls) return m;
      return { ...m, tool_calls: m.tool_calls.map((c) => ({ ...c, function: { ...c.function, arguments: JSON.parse(c.function.arguments) } })) };
    });
    const context = { messages: normalized, add_generation_prompt: addGenerationPrompt, bos_token: '', eos_token: '<|im_end|>' };
    if (tools) context.tools = tools;
    if (enableThinking !== undefined) context.enable_thinking = enableThinking;
    return template.render(context);
  };
}

// The server's tokenizer (llama-server's /tokenize).
export async function tokenize(text) {
  const r = await post('/tokenize', { content: text });
  check(r.status === 200 && Array.isArray(r.json?.tokens), () => `/tokenize: HTTP ${r.status}: ${r.text.slice(0, 200)}`);
  return r.json.tokens;
}

// /metrics as {name{labels}: value}.
export async function metrics() {
  const r = await get('/metrics');
  check(r.status === 200, () => `/metrics: HTTP ${r.status}`);
  const m = {};
  for (const line of r.text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const [name, value] = line.split(' ');
    m[name] = Number(value);
  }
  return m;
}
