#!/usr/bin/env node
// Greedy text generation from a GGUF (sanity check that a converted model produces sensible text):
//   node bench/llama_cpp/generate.mjs MODEL.gguf "prompt text" [--n 40] [--threads 2]
// Prints the continuation and one JSON line with the generated token ids.
import { importNlc, cpuLlama } from './nlc.mjs';

const argv = process.argv.slice(2);
let n = 40, threads = 2;
const pos = [];
for (let i = 0; i < argv.length; i++) {
  if (argv[i] === '--n') n = Number(argv[++i]);
  else if (argv[i] === '--threads') threads = Number(argv[++i]);
  else pos.push(argv[i]);
}
const [modelPath, text] = pos;
if (!modelPath || text == null) { console.error('usage: generate.mjs MODEL.gguf "prompt" [--n 40] [--threads 2]'); process.exit(2); }

const { mod } = await importNlc();
const llama = await cpuLlama(mod, { threads });
const model = await llama.loadModel({ modelPath, gpuLayers: 0 });
const prompt = model.tokenize(text);
const context = await model.createContext({ contextSize: prompt.length + n + 8, threads });
const seq = context.getSequence();
const greedy = { token: true, options: { temperature: 0 } };
let r = await seq.controlledEvaluate(prompt.map((t, i) => (i === prompt.length - 1 ? [t, { generateNext: greedy }] : t)));
const out = [r[prompt.length - 1].next.token];
while (out.length < n) {
  r = await seq.controlledEvaluate([[out[out.length - 1], { generateNext: greedy }]]);
  out.push(r[0].next.token);
}
console.log(`${text}${model.detokenize(out)}`);
console.log(JSON.stringify({ prompt_ids: prompt, generated: out }));
await context.dispose();
await model.dispose();
