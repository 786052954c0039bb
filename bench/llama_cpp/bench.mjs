#!/usr/bin/env node
// llama-bench style timing of a GGUF through node-llama-cpp's prebuilt CPU llama.cpp.
//
//   node bench/llama_cpp/bench.mjs MODEL.gguf [--pp 1000] [--tg 100] [--runs 3] [--threads 2]
//        [--batch 512] [--tg-prompt 8] [--no-warmup] [--sample] [--flash-attn auto|on|off]
//
// pp N: clear the sequence state (KV cache + recurrent state), then evaluate N token ids in one
//       request (llama.cpp batches of --batch tokens, n_batch = n_ubatch = --batch, like llama-bench's
//       default n_ubatch 512); logits only for the last token, not sampled (like llama-bench).
// tg M: clear the state, evaluate a short untimed prompt of --tg-prompt ids, then time M single-token
//       decode steps (fixed ids, logits computed, not sampled, like llama-bench).
// --sample: sample greedily after pp and feed each tg step the previous greedy token instead; this adds
//       node-llama-cpp's sampler cost (large for a 248k vocabulary) to every step.
// Token ids are fixed and synthetic (no tokenizer involved; ids 100..999), the same in every run.
// Prints each run, a markdown table with the mean (and stddev) tokens/s, and one JSON line.
// Each run also reports how many cores other processes used meanwhile (> 0.2 flags contention).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { importNlc, cpuLlama } from './nlc.mjs';

function usage(msg) {
  if (msg) console.error(`error: ${msg}`);
  console.error('usage: bench.mjs MODEL.gguf [--pp N] [--tg M] [--runs R] [--threads T] [--batch B] [--tg-prompt P] [--no-warmup] [--sample] [--flash-attn auto|on|off]');
  process.exit(2);
}
const opt = { pp: 1000, tg: 100, runs: 3, threads: 2, batch: 512, tgPrompt: 8, warmup: true, fa: 'auto', sample: false };
let modelPath = null;
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  const num = () => { const v = Number(argv[++i]); if (!Number.isInteger(v) || v < 0) usage(`bad value for ${a}`); return v; };
  switch (a) {
    case '--pp': opt.pp = num(); break;
    case '--tg': opt.tg = num(); break;
    case '--runs': case '-r': opt.runs = num(); break;
    case '--threads': case '-t': opt.threads = num(); break;
    case '--batch': case '-b': opt.batch = num(); break;
    case '--tg-prompt': opt.tgPrompt = num(); break;
    case '--no-warmup': opt.warmup = false; break;
    case '--sample': opt.sample = true; break;
    case '--flash-attn': opt.fa = argv[++i]; break;
    case '-h': case '--help': usage(); break;
    default:
      if (a.startsWith('-')) usage(`unknown option ${a}`);
      if (modelPath) usage('one model only');
      modelPath = a;
  }
}
if (!modelPath) usage();
if (opt.runs < 1 || opt.threads < 1 || opt.batch < 1) usage('runs, threads and batch must be >= 1');
if (opt.tg > 0 && opt.tgPrompt < 1) usage('--tg-prompt must be >= 1');

const { mod, version } = await importNlc();
const llama = await cpuLlama(mod, { threads: opt.threads });
const model = await llama.loadModel({ modelPath, gpuLayers: 0 });
const ctxSize = Math.max(opt.pp, opt.tgPrompt + opt.tg) + 8;
const flashAttention = opt.fa === 'on' ? true : opt.fa === 'off' ? false : 'auto';
const context = await model.createContext({
  contextSize: ctxSize,
  batchSize: Math.min(opt.batch, ctxSize),
  threads: { ideal: opt.threads, min: opt.threads },
  flashAttention,
  sequences: 1,
});
const seq = context.getSequence();

// Fixed pseudo-random token ids in [lo, lo + span): [100, 1000) for real vocabularies, smaller for tiny test models.
const nVocab = model.fileInfo.metadata.tokenizer?.ggml?.tokens?.length ?? 1000;
const idLo = Math.min(100, Math.floor(nVocab / 8));
const idSpan = Math.min(900, nVocab - 1 - idLo);
function ids(n, seed) {
  let s = seed >>> 0;
  const out = new Array(n);
  for (let i = 0; i < n; i++) { s = (Math.imul(s, 1664525) + 1013904223) >>> 0; out[i] = idLo + (s % idSpan); }
  return out;
}
const greedy = { token: true, options: { temperature: 0 } };
const now = () => process.hrtime.bigint();
const secs = (a, b) => Number(b - a) / 1e9;
// Contention check: CPU seconds that OTHER processes used during a timed section (machine-wide busy
// time from /proc/stat minus this process's CPU time), per wall second, i.e. in cores. Above ~0.2 the
// run competed with something else and is not trustworthy on a small machine.
let cpu0 = null, sys0 = null;
function sysBusySec() {
  try {
    const f = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    const idle = f[3] + (f[4] ?? 0);
    return (f.slice(0, 8).reduce((a, c) => a + c, 0) - idle) / 100; // USER_HZ is 100 on Linux
  } catch { return null; }
}
const cpuStart = () => { cpu0 = process.cpuUsage(); sys0 = sysBusySec(); };
const cpuShare = (wall) => {
  const d = process.cpuUsage(cpu0);
  const mine = (d.user + d.system) / 1e6;
  const sys1 = sysBusySec();
  return { share: mine / (wall * opt.threads), others: sys0 == null || sys1 == null ? null : Math.max(0, (sys1 - sys0 - mine) / wall) };
};

// Decode `tokens` with logits for the last one, without sampling (what llama-bench does). Uses
// node-llama-cpp's internal `_noSampling` evaluate option (3.21.1: the batch requests the last
// token's logits, then the generator ends without calling the sampler).
async function decodeNoSample(tokens) {
  const it = seq.evaluate(tokens, { _noSampling: true });
  const r = await it.next();
  if (!r.done) { await it.return(); throw new Error('_noSampling evaluate produced a token: node-llama-cpp API changed, use --sample'); }
}
// Decode `tokens`, greedy-sample after the last one, return that token.
async function decodeGreedy(tokens) {
  const items = tokens.map((t, i) => (i === tokens.length - 1 ? [t, { generateNext: greedy }] : t));
  const r = await seq.controlledEvaluate(items);
  const tok = r[tokens.length - 1]?.next?.token;
  if (tok == null) throw new Error('no token generated');
  return tok;
}

async function runPP(n) {
  await seq.clearHistory();
  const toks = ids(n, 1234);
  cpuStart();
  const t0 = now();
  if (opt.sample) await decodeGreedy(toks); else await decodeNoSample(toks);
  const t1 = now();
  const s = secs(t0, t1);
  return { s, ...cpuShare(s) };
}
// Default: M steps, each decoding one fixed pseudo-random id with logits and no sampling (llama-bench's
// tg). --sample: each step greedy-samples and feeds that token back (adds node-llama-cpp's sampler).
async function runTG(m) {
  await seq.clearHistory();
  const prompt = ids(opt.tgPrompt, 99);
  let next = await decodeGreedy(prompt);
  const feed = ids(m, 4321);
  const gen = [];
  cpuStart();
  const t0 = now();
  for (let i = 0; i < m; i++) {
    if (opt.sample) {
      gen.push(next);
      next = await decodeGreedy([next]);
    } else {
      await decodeNoSample([feed[i]]);
    }
  }
  const t1 = now();
  const s = secs(t0, t1);
  return { s, gen, ...cpuShare(s) };
}
// Short greedy continuation (untimed), to show the model runs deterministically.
async function greedyTokens(k) {
  await seq.clearHistory();
  let next = await decodeGreedy(ids(opt.tgPrompt, 99));
  const out = [next];
  while (out.length < k) { next = await decodeGreedy([next]); out.push(next); }
  return out;
}

const fmtO = (o) => (o == null ? '?' : o.toFixed(2));
const stats = (xs) => {
  const mean = xs.reduce((a, c) => a + c, 0) / xs.length;
  const sd = xs.length > 1 ? Math.sqrt(xs.reduce((a, c) => a + (c - mean) ** 2, 0) / (xs.length - 1)) : 0;
  return { mean, sd };
};

if (opt.warmup) { // like llama-bench: one small untimed evaluation first
  if (opt.pp > 0) await runPP(Math.min(opt.pp, 16));
  if (opt.tg > 0) await runTG(2);
}
const res = [];
if (opt.pp > 0) {
  const tps = [], shares = [], others = [];
  for (let r = 0; r < opt.runs; r++) {
    const { s, share, others: o } = await runPP(opt.pp);
    tps.push(opt.pp / s); shares.push(share); others.push(o);
    console.error(`pp${opt.pp} run ${r + 1}/${opt.runs}: ${s.toFixed(3)} s, ${(opt.pp / s).toFixed(2)} tok/s, own cpu ${share.toFixed(2)} x ${opt.threads} cores, other processes ${fmtO(o)} cores`);
  }
  res.push({ test: `pp${opt.pp}`, n_tokens: opt.pp, runs_tps: tps, shares, others, ...stats(tps) });
}
let firstGen = null;
let deterministic = true;
if (opt.tg > 0 && !opt.sample) { // untimed greedy check: same 16 tokens twice
  firstGen = await greedyTokens(16);
  deterministic = JSON.stringify(await greedyTokens(16)) === JSON.stringify(firstGen);
}
if (opt.tg > 0) {
  const tps = [], shares = [], others = [];
  for (let r = 0; r < opt.runs; r++) {
    const { s, gen, share, others: o } = await runTG(opt.tg);
    if (opt.sample) { if (firstGen == null) firstGen = gen; else if (JSON.stringify(gen) !== JSON.stringify(firstGen)) deterministic = false; }
    tps.push(opt.tg / s); shares.push(share); others.push(o);
    console.error(`tg${opt.tg} run ${r + 1}/${opt.runs}: ${s.toFixed(3)} s, ${(opt.tg / s).toFixed(2)} tok/s, own cpu ${share.toFixed(2)} x ${opt.threads} cores, other processes ${fmtO(o)} cores`);
  }
  res.push({ test: `tg${opt.tg}`, n_tokens: opt.tg, runs_tps: tps, shares, others, ...stats(tps) });
}

const fileMiB = fs.statSync(modelPath).size / 2 ** 20;
const cpu = os.cpus()[0]?.model ?? 'cpu';
console.log(`\nllama.cpp via node-llama-cpp ${version} (prebuilt CPU), ${path.basename(modelPath)} (${fileMiB.toFixed(0)} MiB), ${opt.threads} threads, batch ${context.batchSize}, ctx ${context.contextSize}, flash_attn ${opt.fa}, sampling ${opt.sample ? 'greedy' : 'none (logits only)'}, ${cpu}\n`);
console.log('| test | runs | tokens/s (each run) | mean tokens/s | stddev | other processes, cores (each run) |');
console.log('|---|---:|---|---:|---:|---|');
for (const r of res) {
  console.log(`| ${r.test} | ${r.runs_tps.length} | ${r.runs_tps.map((v) => v.toFixed(2)).join(', ')} | ${r.mean.toFixed(2)} | ${r.sd.toFixed(2)} | ${r.others.map(fmtO).join(', ')} |`);
}
const contended = res.some((r) => r.others.some((v) => v != null && v > 0.2));
if (contended) console.log('\nWARNING: other processes used > 0.2 cores during some runs; rerun on an idle machine.');
console.log(JSON.stringify({
  engine: 'llama.cpp', via: `node-llama-cpp@${version}`, model: path.resolve(modelPath), model_mib: Number(fileMiB.toFixed(1)),
  threads: opt.threads, batch: context.batchSize, ctx: context.contextSize, flash_attn: opt.fa, tg_prompt: opt.tgPrompt, sampling: opt.sample ? 'greedy' : 'none',
  warmup: opt.warmup, cpu, results: res.map((r) => ({ test: r.test, n_tokens: r.n_tokens, runs_tps: r.runs_tps.map((v) => Number(v.toFixed(3))), mean_tps: Number(r.mean.toFixed(3)), sd_tps: Number(r.sd.toFixed(3)), own_cpu_share: r.shares.map((v) => Number(v.toFixed(3))), other_procs_cores: r.others.map((v) => (v == null ? null : Number(v.toFixed(3)))) })),
  contended,
  tg_deterministic: opt.tg > 0 ? deterministic : null, tg_first_tokens: firstGen ? firstGen.slice(0, 16) : null,
}));
await context.dispose();
await model.dispose();
