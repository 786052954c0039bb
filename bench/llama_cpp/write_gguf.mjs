#!/usr/bin/env node
// Write a llama.cpp GGUF (architecture "qwen35") from a Hugging Face Qwen3.5 dense text checkpoint
// (config.json + model.safetensors, BF16/F16/F32), so that llama.cpp can be timed on the same weights
// as a deltagen build.
//
//   node bench/llama_cpp/write_gguf.mjs CHECKPOINT_DIR OUT.gguf [--f32] [--tokenizer tokenizer.json]
//
// Default: every 2-D weight matrix is pure Q4_0 (block 32, llama.cpp's reference rounding), including
// token_embd (which is also the tied output head); norms, conv kernels and per-head vectors are F32.
// --f32 writes every tensor as F32 (for correctness checks).
//
// Tensor names, shapes, metadata keys and the per-tensor transforms follow llama.cpp's converter
// (convert_hf_to_gguf.py: Qwen3NextModel + _LinearAttentionVReorderBase, registered for
// Qwen3_5ForConditionalGeneration) and the qwen35 loader (src/models/qwen35.cpp):
//   * A_log            -> blk.N.ssm_a        = -exp(A_log)
//   * dt_bias          -> blk.N.ssm_dt.bias
//   * conv1d [C,1,K]   -> blk.N.ssm_conv1d.weight, squeezed to [C,K] (ggml ne {K,C}), F32
//   * every "*norm.weight" except linear_attn.norm gets +1 (HF stores offsets from 1)
//   * when linear_num_key_heads != linear_num_value_heads, the value heads are reordered from
//     grouped-by-key-head to tiled order in in_proj_qkv (V rows), in_proj_z, in_proj_a/b, A_log,
//     dt_bias, conv1d (V channels) and out_proj (columns), because ggml repeats q/k heads by tiling.
//   * tied embeddings: no output.weight; llama.cpp reuses token_embd.
// No code from llama.cpp is used here; the GGUF container and Q4_0 packing are written from the spec.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));

// ---------------------------------------------------------------- arguments
function usage(msg) {
  if (msg) console.error(`error: ${msg}`);
  console.error('usage: node write_gguf.mjs CHECKPOINT_DIR OUT.gguf [--f32] [--tokenizer PATH]');
  process.exit(2);
}
const argv = process.argv.slice(2);
const pos = [];
let f32All = false;
let tokenizerPath = null;
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (a === '--f32') f32All = true;
  else if (a === '--tokenizer') tokenizerPath = argv[++i];
  else if (a === '-h' || a === '--help') usage();
  else if (a.startsWith('--')) usage(`unknown option ${a}`);
  else pos.push(a);
}
if (pos.length !== 2) usage();
const [ckptDir, outPath] = pos;

// ---------------------------------------------------------------- config
const rawCfg = JSON.parse(fs.readFileSync(path.join(ckptDir, 'config.json'), 'utf8'));
const cfg = { ...rawCfg, ...(rawCfg.text_config ?? {}) };
const rope = cfg.rope_parameters ?? cfg.rope_scaling ?? {};
const H = cfg.hidden_size;
const nLayer = cfg.num_hidden_layers;
const nHead = cfg.num_attention_heads;
const nHeadKv = cfg.num_key_value_heads;
const headDim = cfg.head_dim ?? H / nHead;
const nk = cfg.linear_num_key_heads;
const nv = cfg.linear_num_value_heads;
const dk = cfg.linear_key_head_dim;
const dv = cfg.linear_value_head_dim;
const vocab = cfg.vocab_size;
const partial = cfg.partial_rotary_factor ?? rope.partial_rotary_factor ?? 0.25;
const fullInterval = cfg.full_attention_interval ?? 4;
const tied = rawCfg.tie_word_embeddings ?? cfg.tie_word_embeddings ?? false;
if (dk !== dv) throw new Error(`llama.cpp qwen35 assumes linear key dim == value dim (got ${dk}, ${dv})`);
if (cfg.layer_types) {
  cfg.layer_types.forEach((t, i) => {
    const full = (i + 1) % fullInterval === 0;
    if ((t === 'full_attention') !== full) throw new Error(`layer_types[${i}]=${t} does not follow full_attention_interval=${fullInterval}`);
  });
}
const ropeTheta = rope.rope_theta ?? cfg.rope_theta ?? 10000;
const mropeSection = [...(rope.mrope_section ?? [])];
while (mropeSection.length < 4) mropeSection.push(0);

// ---------------------------------------------------------------- safetensors
const stPath = path.join(ckptDir, 'model.safetensors');
const stFd = fs.openSync(stPath, 'r');
const hdrLenBuf = Buffer.alloc(8);
fs.readSync(stFd, hdrLenBuf, 0, 8, 0);
const hdrLen = Number(hdrLenBuf.readBigUInt64LE(0));
const hdrBuf = Buffer.alloc(hdrLen);
fs.readSync(stFd, hdrBuf, 0, hdrLen, 8);
const st = JSON.parse(hdrBuf.toString('utf8'));
delete st.__metadata__;
const dataBase = 8 + hdrLen;

function hfName(suffix) {
  for (const p of ['model.language_model.', 'model.', '']) if (st[p + suffix]) return p + suffix;
  return null;
}

function readF32(name) {
  const info = st[name];
  const [b, e] = info.data_offsets;
  const buf = Buffer.alloc(e - b);
  fs.readSync(stFd, buf, 0, e - b, dataBase + b);
  const n = info.shape.reduce((a, c) => a * c, 1);
  const out = new Float32Array(n);
  if (info.dtype === 'F32') {
    new Uint8Array(out.buffer).set(buf);
  } else if (info.dtype === 'BF16') {
    const u16 = new Uint16Array(buf.buffer, buf.byteOffset, n);
    const u32 = new Uint32Array(out.buffer);
    for (let i = 0; i < n; i++) u32[i] = u16[i] << 16;
  } else if (info.dtype === 'F16') {
    const u16 = new Uint16Array(buf.buffer, buf.byteOffset, n);
    for (let i = 0; i < n; i++) out[i] = f16ToF32(u16[i]);
  } else {
    throw new Error(`${name}: unsupported dtype ${info.dtype}`);
  }
  return { data: out, shape: info.shape.slice() };
}

// ---------------------------------------------------------------- half floats
function f16ToF32(h) {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}
const cvtF = new Float32Array(1);
const cvtU = new Uint32Array(cvtF.buffer);
function f32ToF16(v) { // round to nearest even
  cvtF[0] = v;
  const x = cvtU[0];
  const sign = (x >>> 16) & 0x8000;
  const e = (x >>> 23) & 0xff;
  let m = x & 0x7fffff;
  if (e === 0xff) return sign | 0x7c00 | (m ? 0x200 : 0);
  let ne = e - 127 + 15;
  if (ne >= 0x1f) return sign | 0x7c00;
  if (ne <= 0) {
    if (ne < -10) return sign;
    m |= 0x800000;
    const shift = 14 - ne;
    let hm = m >>> shift;
    const rem = m & ((1 << shift) - 1);
    const half = 1 << (shift - 1);
    if (rem > half || (rem === half && (hm & 1))) hm++;
    return sign | hm;
  }
  let hm = m >>> 13;
  const rem = m & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && (hm & 1))) {
    hm++;
    if (hm === 0x400) { hm = 0; ne++; if (ne >= 0x1f) return sign | 0x7c00; }
  }
  return sign | (ne << 10) | hm;
}

// ---------------------------------------------------------------- Q4_0 (block 32: f16 d, 16 bytes of nibbles)
const QK = 32;
const GGML_F32 = 0;
const GGML_Q4_0 = 2;
function quantQ4_0(x) {
  const nb = x.length / QK;
  const out = Buffer.alloc(nb * 18);
  const fr = Math.fround;
  for (let b = 0; b < nb; b++) {
    const o = b * QK;
    let amax = 0, max = 0;
    for (let j = 0; j < QK; j++) {
      const v = x[o + j];
      const a = Math.abs(v);
      if (amax < a) { amax = a; max = v; }
    }
    const d = fr(max / -8);
    const id = d !== 0 ? fr(1 / d) : 0;
    const ob = b * 18;
    out.writeUInt16LE(f32ToF16(d), ob);
    for (let j = 0; j < 16; j++) {
      const x0 = fr(fr(x[o + j] * id) + 8.5);
      const x1 = fr(fr(x[o + 16 + j] * id) + 8.5);
      const q0 = Math.min(15, Math.trunc(x0));
      const q1 = Math.min(15, Math.trunc(x1));
      out[ob + 2 + j] = q0 | (q1 << 4);
    }
  }
  return out;
}

// ---------------------------------------------------------------- transforms
// V heads grouped by key head [g0v0..g0v(r-1), g1v0..] -> tiled [g0v0, g1v0, ..., g0v1, g1v1, ...]
// along `dim` of a row-major tensor whose size along dim is nv*hd.
function reorderVHeads(data, shape, dim, hd) {
  const r = nv / nk;
  if (r === 1) return data;
  const outer = shape.slice(0, dim).reduce((a, c) => a * c, 1);
  const inner = shape.slice(dim + 1).reduce((a, c) => a * c, 1);
  if (shape[dim] !== nv * hd) throw new Error(`reorder: dim ${dim} of [${shape}] is not ${nv}*${hd}`);
  const out = new Float32Array(data.length);
  const blk = hd * inner;
  for (let o = 0; o < outer; o++) {
    const base = o * shape[dim] * inner;
    for (let g = 0; g < nk; g++) {
      for (let j = 0; j < r; j++) {
        const src = base + (g * r + j) * blk;
        const dst = base + (j * nk + g) * blk;
        out.set(data.subarray(src, src + blk), dst);
      }
    }
  }
  return out;
}

// Plan: list of {name, hf, kind, post} in GGUF order.
const plan = [];
function add(gguf, hfSuffix, opts = {}) {
  const hf = hfName(hfSuffix);
  if (!hf) {
    if (opts.optional) return;
    throw new Error(`missing tensor ${hfSuffix}`);
  }
  plan.push({ gguf, hf, ...opts });
}
add('token_embd.weight', 'embed_tokens.weight', { mat: true });
add('output_norm.weight', 'norm.weight', { plus1: true });
if (!tied) add('output.weight', 'lm_head.weight', { mat: true, optional: false });
for (let i = 0; i < nLayer; i++) {
  const p = `layers.${i}.`;
  const b = `blk.${i}.`;
  const full = (i + 1) % fullInterval === 0;
  add(b + 'attn_norm.weight', p + 'input_layernorm.weight', { plus1: true });
  add(b + 'post_attention_norm.weight', p + 'post_attention_layernorm.weight', { plus1: true });
  if (full) {
    add(b + 'attn_q.weight', p + 'self_attn.q_proj.weight', { mat: true });
    add(b + 'attn_k.weight', p + 'self_attn.k_proj.weight', { mat: true });
    add(b + 'attn_v.weight', p + 'self_attn.v_proj.weight', { mat: true });
    add(b + 'attn_output.weight', p + 'self_attn.o_proj.weight', { mat: true });
    add(b + 'attn_q_norm.weight', p + 'self_attn.q_norm.weight', { plus1: true });
    add(b + 'attn_k_norm.weight', p + 'self_attn.k_norm.weight', { plus1: true });
  } else {
    const la = p + 'linear_attn.';
    add(b + 'attn_qkv.weight', la + 'in_proj_qkv.weight', { mat: true, vre: 'qkv' });
    add(b + 'attn_gate.weight', la + 'in_proj_z.weight', { mat: true, vre: 'rows_dv' });
    add(b + 'ssm_beta.weight', la + 'in_proj_b.weight', { mat: true, vre: 'rows_1' });
    add(b + 'ssm_alpha.weight', la + 'in_proj_a.weight', { mat: true, vre: 'rows_1' });
    add(b + 'ssm_conv1d.weight', la + 'conv1d.weight', { vre: 'conv', squeeze: true });
    add(b + 'ssm_dt.bias', la + 'dt_bias', { vre: 'rows_1' });
    add(b + 'ssm_a', la + 'A_log', { vre: 'rows_1', negexp: true });
    add(b + 'ssm_norm.weight', la + 'norm.weight', {});
    add(b + 'ssm_out.weight', la + 'out_proj.weight', { mat: true, vre: 'cols_dv' });
  }
  add(b + 'ffn_gate.weight', p + 'mlp.gate_proj.weight', { mat: true });
  add(b + 'ffn_up.weight', p + 'mlp.up_proj.weight', { mat: true });
  add(b + 'ffn_down.weight', p + 'mlp.down_proj.weight', { mat: true });
}

function load(item) {
  let { data, shape } = readF32(item.hf);
  if (item.squeeze) shape = shape.filter((d) => d !== 1);
  switch (item.vre) {
    case 'qkv': {
      const qk = 2 * nk * dk;
      const v = data.subarray(qk * H);
      const vr = reorderVHeads(v, [nv * dv, H], 0, dv);
      const out = new Float32Array(data.length);
      out.set(data.subarray(0, qk * H));
      out.set(vr, qk * H);
      data = out;
      break;
    }
    case 'rows_dv': data = reorderVHeads(data, shape, 0, dv); break;
    case 'rows_1': data = reorderVHeads(data, shape, 0, 1); break;
    case 'cols_dv': data = reorderVHeads(data, shape, 1, dv); break;
    case 'conv': {
      const qk = 2 * nk * dk;
      const K = shape[1];
      const v = data.subarray(qk * K);
      const vr = reorderVHeads(v, [nv * dv, K], 0, dv);
      const out = new Float32Array(data.length);
      out.set(data.subarray(0, qk * K));
      out.set(vr, qk * K);
      data = out;
      break;
    }
    default: break;
  }
  if (item.negexp) for (let i = 0; i < data.length; i++) data[i] = -Math.exp(data[i]);
  if (item.plus1) for (let i = 0; i < data.length; i++) data[i] = data[i] + 1;
  return { data, shape };
}

// Shapes, types and sizes are known before the data is produced.
const tensors = plan.map((item) => {
  let shape = st[item.hf].shape.slice();
  if (item.squeeze) shape = shape.filter((d) => d !== 1);
  const ne = shape.slice().reverse(); // ggml order
  let type = GGML_F32;
  if (item.mat && !f32All) {
    if (ne.length === 2 && ne[0] % QK === 0) type = GGML_Q4_0;
    else console.error(`warning: ${item.gguf} ne0=${ne[0]} not a multiple of 32, kept F32`);
  }
  const n = ne.reduce((a, c) => a * c, 1);
  const size = type === GGML_Q4_0 ? (n / QK) * 18 : n * 4;
  return { ...item, ne, type, size };
});

// ---------------------------------------------------------------- tokenizer
function findTokenizer() {
  if (tokenizerPath) return tokenizerPath;
  for (const p of [path.join(ckptDir, 'tokenizer.json'),
    path.resolve(HERE, '../../third_party/tokenizer/qwen3/tokenizer.json')]) {
    if (fs.existsSync(p)) return p;
  }
  throw new Error('no tokenizer.json: pass --tokenizer PATH');
}
const tokPath = findTokenizer();
const tok = JSON.parse(fs.readFileSync(tokPath, 'utf8'));
if (tok.model?.type !== 'BPE') throw new Error(`${tokPath}: expected a BPE tokenizer`);
const TT_NORMAL = 1, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5;
const tokens = new Array(vocab);
const toktypes = new Array(vocab).fill(TT_NORMAL);
for (const [t, id] of Object.entries(tok.model.vocab)) if (id < vocab) tokens[id] = t;
const specialIds = new Set();
for (const a of tok.added_tokens ?? []) {
  if (a.id >= vocab) continue;
  tokens[a.id] = a.content;
  const looksSpecial = a.content.startsWith('<|') && a.content.endsWith('|>');
  toktypes[a.id] = a.special || looksSpecial ? TT_CONTROL : TT_USER;
  if (toktypes[a.id] === TT_CONTROL) specialIds.add(a.id);
}
let truncated = false;
for (let i = 0; i < vocab; i++) {
  if (tokens[i] === undefined) { tokens[i] = `[PAD${i}]`; toktypes[i] = TT_UNUSED; }
}
const inVocab = new Set(tokens.filter((t, i) => toktypes[i] !== TT_UNUSED));
let merges = tok.model.merges.map((m) => (Array.isArray(m) ? m.join(' ') : m));
if (Object.keys(tok.model.vocab).length + (tok.added_tokens?.length ?? 0) > vocab) {
  // checkpoint vocabulary is smaller than the tokenizer's (e.g. a tiny test model): keep only merges
  // whose parts and result are in the kept vocabulary
  truncated = true;
  merges = merges.filter((m) => {
    const [a, b2] = m.split(' ');
    return inVocab.has(a) && inVocab.has(b2) && inVocab.has(a + b2);
  });
}
const idOf = (s) => { const i = tokens.indexOf(s); return i >= 0 ? i : null; };
let eos = cfg.eos_token_id;
if (Array.isArray(eos)) eos = eos[0];
if (eos == null || eos >= vocab || toktypes[eos] === TT_UNUSED) eos = idOf('<|im_end|>') ?? idOf('<|endoftext|>') ?? eos;
const pad = idOf('<|endoftext|>');

// ---------------------------------------------------------------- GGUF writer
const T = { U8: 0, I8: 1, U16: 2, I16: 3, U32: 4, I32: 5, F32: 6, BOOL: 7, STR: 8, ARR: 9, U64: 10, I64: 11, F64: 12 };
const chunks = [];
let hdrSize = 0;
function push(b) { chunks.push(b); hdrSize += b.length; }
function u32(v) { const b = Buffer.alloc(4); b.writeUInt32LE(v >>> 0); push(b); }
function i32(v) { const b = Buffer.alloc(4); b.writeInt32LE(v); push(b); }
function u64(v) { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); push(b); }
function f32(v) { const b = Buffer.alloc(4); b.writeFloatLE(v); push(b); }
function str(s) { const b = Buffer.from(s, 'utf8'); u64(b.length); push(b); }
const kvs = [];
const kv = (key, type, value, elemType) => kvs.push({ key, type, value, elemType });
function writeKV({ key, type, value, elemType }) {
  str(key); u32(type);
  const one = (t, v) => {
    switch (t) {
      case T.U32: u32(v); break;
      case T.I32: i32(v); break;
      case T.F32: f32(v); break;
      case T.BOOL: push(Buffer.from([v ? 1 : 0])); break;
      case T.STR: str(v); break;
      default: throw new Error(`kv type ${t}`);
    }
  };
  if (type === T.ARR) {
    u32(elemType); u64(value.length);
    if (elemType === T.STR) {
      // build the whole string array in one buffer (the vocabulary has ~250k entries)
      const parts = [];
      for (const s of value) {
        const b = Buffer.from(s, 'utf8');
        const l = Buffer.alloc(8); l.writeBigUInt64LE(BigInt(b.length));
        parts.push(l, b);
      }
      push(Buffer.concat(parts));
    } else if (elemType === T.I32) {
      const b = Buffer.alloc(4 * value.length);
      value.forEach((v, i) => b.writeInt32LE(v, 4 * i));
      push(b);
    } else {
      for (const v of value) one(elemType, v);
    }
  } else {
    one(type, value);
  }
}

const A = 'qwen35';
const name = path.basename(path.resolve(ckptDir));
kv('general.architecture', T.STR, A);
kv('general.type', T.STR, 'model');
kv('general.name', T.STR, name);
kv('general.file_type', T.U32, f32All ? 0 : 2); // LLAMA_FTYPE_ALL_F32 / LLAMA_FTYPE_MOSTLY_Q4_0
kv('general.quantization_version', T.U32, 2);
kv('general.alignment', T.U32, 32);
kv(`${A}.block_count`, T.U32, nLayer);
kv(`${A}.context_length`, T.U32, cfg.max_position_embeddings ?? 262144);
kv(`${A}.embedding_length`, T.U32, H);
kv(`${A}.feed_forward_length`, T.U32, cfg.intermediate_size);
kv(`${A}.attention.head_count`, T.U32, nHead);
kv(`${A}.attention.head_count_kv`, T.U32, nHeadKv);
kv(`${A}.rope.dimension_sections`, T.ARR, mropeSection.slice(0, 4), T.I32);
kv(`${A}.rope.freq_base`, T.F32, ropeTheta);
kv(`${A}.attention.layer_norm_rms_epsilon`, T.F32, cfg.rms_norm_eps ?? 1e-6);
kv(`${A}.attention.key_length`, T.U32, headDim);
kv(`${A}.attention.value_length`, T.U32, headDim);
kv(`${A}.ssm.conv_kernel`, T.U32, cfg.linear_conv_kernel_dim);
kv(`${A}.ssm.state_size`, T.U32, dk);
kv(`${A}.ssm.group_count`, T.U32, nk);
kv(`${A}.ssm.time_step_rank`, T.U32, nv);
kv(`${A}.ssm.inner_size`, T.U32, dv * nv);
kv(`${A}.full_attention_interval`, T.U32, fullInterval);
kv(`${A}.rope.dimension_count`, T.U32, Math.trunc(headDim * partial));
kv('tokenizer.ggml.model', T.STR, 'gpt2');
kv('tokenizer.ggml.pre', T.STR, 'qwen2');
kv('tokenizer.ggml.tokens', T.ARR, tokens, T.STR);
kv('tokenizer.ggml.token_type', T.ARR, toktypes, T.I32);
kv('tokenizer.ggml.merges', T.ARR, merges, T.STR);
if (eos != null) kv('tokenizer.ggml.eos_token_id', T.U32, eos);
if (pad != null) { kv('tokenizer.ggml.padding_token_id', T.U32, pad); kv('tokenizer.ggml.bos_token_id', T.U32, pad); }
kv('tokenizer.ggml.add_bos_token', T.BOOL, false);

const ALIGN = 32;
push(Buffer.from('GGUF', 'ascii'));
u32(3);
u64(tensors.length);
u64(kvs.length);
for (const e of kvs) writeKV(e);
let off = 0;
for (const t of tensors) {
  t.offset = off;
  str(t.gguf); u32(t.ne.length);
  for (const d of t.ne) u64(d);
  u32(t.type); u64(off);
  off += Math.ceil(t.size / ALIGN) * ALIGN;
}
const padHdr = (ALIGN - (hdrSize % ALIGN)) % ALIGN;
push(Buffer.alloc(padHdr));

fs.mkdirSync(path.dirname(path.resolve(outPath)), { recursive: true });
const tmp = `${outPath}.tmp`;
const out = fs.openSync(tmp, 'w');
for (const c of chunks) fs.writeSync(out, c);
const t0 = Date.now();
let written = 0;
for (const t of tensors) {
  const { data } = load(t);
  let bytes;
  if (t.type === GGML_Q4_0) bytes = quantQ4_0(data);
  else bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  if (bytes.length !== t.size) throw new Error(`${t.gguf}: size ${bytes.length} != ${t.size}`);
  fs.writeSync(out, bytes);
  const padT = Math.ceil(t.size / ALIGN) * ALIGN - t.size;
  if (padT) fs.writeSync(out, Buffer.alloc(padT));
  written += t.size;
}
fs.closeSync(out);
fs.renameSync(tmp, outPath);
const nQ = tensors.filter((t) => t.type === GGML_Q4_0).length;
console.log(JSON.stringify({
  out: outPath, checkpoint: ckptDir, tokenizer: tokPath, vocab_truncated: truncated, merges: merges.length,
  tensors: tensors.length, q4_0_tensors: nQ, f32_tensors: tensors.length - nQ, tied_embeddings: tied,
  v_head_reorder: nv !== nk, eos, bytes: hdrSize + off, seconds: (Date.now() - t0) / 1000,
}));
