// A 10-turn conversation sent the OpenAI way (the whole history every time):
// user turns of ~300 tokens of English (consecutive quotes from the tiny
// model's sample.txt, config.sample), replies of up to 64 tokens, greedy,
// thinking off. Prints {turns: [...], replies: [...]}; tests/serve_test.cpp
// compares the replies with a --no-cache server's.
//
// What the prompt cache must save, exactly. Qwen3.5's template renders turn k as
//   H(k-1) + <|im_start|>assistant\n REPLY(k-1) <|im_end|>\n + <|im_start|>user\n USER(k) <|im_end|>\n + GEN
// where H(k-1) is the whole history up to turn k-1's user message, REPLY is the
// reply re-rendered (trimmed, without the empty think block the generation
// prompt had) and GEN = <|im_start|>assistant\n<think>\n\n</think>\n\n. The
// server keeps the state at the end of H(k-1) (the history without the
// generation prompt; service.cpp's checkpoint), so from turn 2 on
//   cached_tokens = |H(k-1)|
//   prompt_tokens - cached_tokens = |reply piece| + |user piece| + |GEN|
// Every piece starts with a special token, so the token counts of the pieces
// (POST /tokenize) add up to the count of the whole. The scheduler also keeps
// a state every --checkpoint-every (2048) prompt tokens; the expectation
// below replays the cache over the rendered prompts' token ids, so it stays
// exact if such a state ever lies deeper than H(k-1) (then it is reported in
// "periodic_hits").
import fs from 'node:fs';
import { chatRenderer, check, checkChatCompletion, config, equal, post, print, tokenize } from './lib.mjs';

const turns = config.turns ?? 10, userChars = config.userChars ?? 1000, replyTokens = config.replyTokens ?? 64;
const cacheOn = config.cache ?? true, every = config.checkpointEvery ?? 2048;
const render = await chatRenderer();

// Consecutive quotes, cut at a blank line after userChars characters.
const sample = fs.readFileSync(config.sample, 'utf8');
const userTexts = [];
for (let at = config.sampleOffset ?? 0; userTexts.length < turns;) {
  let end = sample.indexOf('\n\n', at + userChars);
  check(end > 0, 'sample.txt is too short');
  userTexts.push(sample.slice(at, end).trim());
  at = end + 2;
}

const GEN = '<|im_start|>assistant\n<think>\n\n</think>\n\n';
const genTokens = (await tokenize(GEN)).length;
const isPrefix = (a, b, n) => { for (let i = 0; i < n; ++i) if (a[i] !== b[i]) return false; return true; };
const snapshots = [];  // {ids, length}: the states the server's cache holds by now
const history = [];
const out = { turns: [], replies: [], gen_tokens: genTokens, periodic_hits: 0 };
let previousBase = 0;

for (let k = 1; k <= turns; ++k) {
  history.push({ role: 'user', content: userTexts[k - 1] });
  const r = await post('/v1/chat/completions', { messages: history, max_tokens: replyTokens, temperature: 0,
                                                 chat_template_kwargs: { enable_thinking: false } });
  check(r.status === 200, () => `turn ${k}: HTTP ${r.status}: ${r.text.slice(0, 300)}`);
  const reply = checkChatCompletion(r.json, `turn ${k}`);
  const usage = r.json.usage, cached = usage.prompt_tokens_details.cached_tokens;

  // The prompt as rendered by Hugging Face's engine, in the server's tokens.
  const ids = await tokenize(render(history, { enableThinking: false }));
  const base = await tokenize(render(history, { addGenerationPrompt: false, enableThinking: false }));
  equal(usage.prompt_tokens, ids.length, `turn ${k}: prompt_tokens vs the rendered prompt`);
  check(isPrefix(base, ids, base.length) && base.length + genTokens === ids.length, `turn ${k}: history + GEN != prompt`);

  // Replay the cache: the deepest held state that is a prefix of the prompt
  // (at least the last prompt token always runs).
  let expected = 0;
  if (cacheOn)
    for (const s of snapshots)
      if (s.length <= ids.length - 1 && s.length > expected && isPrefix(s.ids, ids, s.length)) expected = s.length;
  equal(cached, expected, `turn ${k}: cached_tokens`);
  const row = { prompt_tokens: usage.prompt_tokens, cached_tokens: cached, completion_tokens: usage.completion_tokens,
                finish_reason: r.json.choices[0].finish_reason };
  if (k >= 2 && cacheOn) {
    const replyPiece = (await tokenize(`<|im_start|>assistant\n${history.at(-2).content.trim()}<|im_end|>\n`)).length;
    const userPiece = (await tokenize(`<|im_start|>user\n${userTexts[k - 1].trim()}<|im_end|>\n`)).length;
    Object.assign(row, { reply_piece_tokens: replyPiece, user_piece_tokens: userPiece, previous_history_tokens: previousBase });
    row.periodic_hit = expected !== previousBase;
    if (!row.periodic_hit) {
      equal(usage.prompt_tokens - cached, replyPiece + userPiece + genTokens, `turn ${k}: prompt_tokens - cached_tokens`);
    } else {
      ++out.periodic_hits;  // a --checkpoint-every state deeper than H(k-1): the replay above accounts for it
      check(expected > previousBase, `turn ${k}: the cache lost the previous turn's state`);
    }
  }
  out.turns.push(row);
  // What this request leaves in the cache: the end of its history (a
  // checkpoint), and every multiple of `every` among the tokens it ran.
  if (cacheOn) {
    const keep = (n) => { if (!snapshots.some((s) => s.length === n && isPrefix(s.ids, ids, n))) snapshots.push({ ids: ids.slice(0, n), length: n }); };
    if (base.length > cached) keep(base.length);
    if (every > 0) for (let m = (Math.floor(cached / every) + 1) * every; m <= ids.length; m += every) keep(m);
  }
  previousBase = base.length;
  out.replies.push(reply);
  history.push({ role: 'assistant', content: reply });
}
print(out);
