#!/usr/bin/env node
// Correctness check of the GGUF writer + llama.cpp on the golden tiny checkpoint:
//   node bench/llama_cpp/write_gguf.mjs ../shared/golden/tiny-a $OUT/tiny-a-f32.gguf --f32
//   node bench/llama_cpp/check_golden.mjs $OUT/tiny-a-f32.gguf [GOLDEN_DIR]
// Feeds the golden prompt ids, decodes greedily, and compares the tokens with the Hugging Face ones;
// also compares llama.cpp's next-token probabilities after the prompt with softmax(golden logits).
import fs from 'node:fs';
import path from 'node:path';
import { importNlc, cpuLlama } from './nlc.mjs';

const [ggufPath, goldenDirArg] = process.argv.slice(2);
if (!ggufPath) { console.error('usage: check_golden.mjs MODEL.gguf [GOLDEN_DIR]'); process.exit(2); }
const goldenDir = goldenDirArg ?? path.join(path.dirname(new URL(import.meta.url).pathname), '../../../shared/golden/tiny-a/golden');
const summary = JSON.parse(fs.readFileSync(path.join(goldenDir, 'summary.json'), 'utf8'));
const prompt = summary.prompt_ids;
const want = summary.greedy_new_tokens;

function readNpyF32(p) {
  const b = fs.readFileSync(p);
  const hl = b.readUInt16LE(8);
  const hdr = b.subarray(10, 10 + hl).toString('latin1');
  if (!hdr.includes("'<f4'")) throw new Error(`${p}: not <f4`);
  const shape = hdr.match(/'shape':\s*\(([^)]*)\)/)[1].split(',').map((s) => s.trim()).filter(Boolean).map(Number);
  const off = 10 + hl;
  const data = new Float32Array(b.buffer.slice(b.byteOffset + off, b.byteOffset + b.length));
  return { shape, data };
}

const { mod, version } = await importNlc();
const llama = await cpuLlama(mod, { threads: 1 });
const model = await llama.loadModel({ modelPath: ggufPath, gpuLayers: 0 });
const context = await model.createContext({ contextSize: 64, batchSize: 64, threads: 1 });
const seq = context.getSequence();
const greedy = { token: true, options: { temperature: 0 } };

const items = prompt.map((t, i) => (i === prompt.length - 1 ? [t, { generateNext: { ...greedy, probabilities: true } }] : t));
const res = await seq.controlledEvaluate(items);
const first = res[prompt.length - 1].next;
const got = [first.token];
for (let i = 1; i < want.length; i++) {
  const r = await seq.controlledEvaluate([[got[i - 1], { generateNext: greedy }]]);
  got.push(r[0].next.token);
}

let maxProbDiff = null;
const lp = path.join(goldenDir, 'logits_prefill.npy');
if (fs.existsSync(lp)) {
  const { shape, data } = readNpyF32(lp);
  const V = shape[1];
  const row = data.subarray((prompt.length - 1) * V, prompt.length * V);
  const m = Math.max(...row);
  let z = 0;
  for (const v of row) z += Math.exp(v - m);
  maxProbDiff = 0;
  for (let t = 0; t < V; t++) {
    const ref = Math.exp(row[t] - m) / z;
    const p = first.probabilities.get(t) ?? 0;
    maxProbDiff = Math.max(maxProbDiff, Math.abs(p - ref));
  }
}
const ok = JSON.stringify(got) === JSON.stringify(want);
console.log(`node-llama-cpp ${version}, model ${ggufPath}`);
console.log(`prompt   ${JSON.stringify(prompt)}`);
console.log(`golden   ${JSON.stringify(want)}`);
console.log(`llama.cpp ${JSON.stringify(got)}`);
console.log(`max |p_llama - softmax(golden logits)| after the prompt: ${maxProbDiff}`);
console.log(JSON.stringify({ check: 'golden_greedy', match: ok, got, want, max_prob_diff: maxProbDiff }));
await context.dispose();
await model.dispose();
process.exit(ok ? 0 : 1);
