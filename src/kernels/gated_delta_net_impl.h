// The parts of gated_delta_net.h that depend on the instruction set (conv +
// SiLU, the per-head recurrence and gated norm), written once in plain loops
// over contiguous channels or value dims, so the compiler vectorizes them, and
// compiled three times: baseline x86-64 (gated_delta_net.cpp), AVX2 and
// AVX-512 (gated_delta_net_avx2.cpp, gated_delta_net_avx512.cpp, built with
// those flags; the AVX-512 file adds hand-written decode paths). Internal
// linkage, so the three copies never meet at link time.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#if defined(__F16C__)
#include <immintrin.h>
#endif

#include "kernels/vector_math.h"
#include "kernels/gated_delta_net.h"
#include "util/half.h"

namespace deltagen::kernels {
namespace {

// IEEE half <-> fp32 with the conversion instructions where the file's
// instruction set has them (F16C comes with AVX2 and AVX-512 here), else
// util/half.h; all round to nearest even, so every level stores the same bits.
// `widen` reads a head's state from DRAM: it keeps a prefetch ~4 KiB ahead.
inline void widen_f16(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) {
    _mm_prefetch(reinterpret_cast<const char*>(src + i) + 4096, _MM_HINT_T0);
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
  }
#elif defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    if (i % 32 == 0) _mm_prefetch(reinterpret_cast<const char*>(src + i) + 4096, _MM_HINT_T0);
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  }
#endif
  for (; i < n; ++i) dst[i] = f16_to_f32(src[i]);
}

inline void narrow_f16(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#elif defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
  for (; i < n; ++i) dst[i] = f32_to_f16(src[i]);
}

// v <- v * sigmoid(v): a loop the compiler vectorizes with AVX2/AVX-512;
// baseline x86-64 would leave it scalar (~30x slower), so there the SSE2 one.
inline void silu_loop(float* v, int64_t n) {
#if defined(__AVX2__)
  for (int64_t i = 0; i < n; ++i) v[i] = silu_of(v[i]);
#else
  silu_inplace(v, n);
#endif
}

// Conv + SiLU for channels [c0, c1) of every token, channels last, then the
// new conv state of those channels. The state is read for all tokens before
// it is overwritten, so present may alias past.
void conv_silu_range(const GatedDeltaShape& s, const GatedDeltaTensors& t, int64_t c0, int64_t c1, float* xc) {
  const int64_t c = s.conv_dim(), kk = s.conv_kernel, st = kk - 1, n = c1 - c0, xs = t.x_stride(s);
  if (s.seq == 1 && t.conv_past) {  // decode: one pass over each channel's taps and state
    for (int64_t row = 0; row < s.batch; ++row) {
      const float* x = t.x + row * xs;
      const float* past = t.conv_past + row * c * st;
      float* present = t.conv_present + row * c * st;
      float* y = xc + row * c;
      for (int64_t ch = c0; ch < c1; ++ch) {
        // The taps in the prompt path's order (oldest first, from 0): the same
        // bits, so a decode step equals that token inside a prompt or verify run.
        float acc = 0;
        for (int64_t j = 0; j < st; ++j) acc += t.conv_w_t[j * c + ch] * past[ch * st + j];
        acc += t.conv_w_t[st * c + ch] * x[ch];
        y[ch] = acc;
        for (int64_t j = 0; j + 1 < st; ++j) present[ch * st + j] = past[ch * st + j + 1];
        if (st > 0) present[ch * st + st - 1] = x[ch];
      }
      silu_loop(y + c0, n);
    }
    return;
  }
  for (int64_t row = 0; row < s.batch; ++row) {
    const float* x = t.x + row * s.seq * xs;
    const float* past = t.conv_past ? t.conv_past + row * c * st : nullptr;
    // xp(u, ch): the conv's input stream, u < 0 reaching back into the state.
    auto past_at = [&](int64_t u, int64_t ch) { return past ? past[ch * st + (st + u)] : 0.0f; };
    for (int64_t tok = 0; tok < s.seq; ++tok) {
      float* y = xc + (row * s.seq + tok) * c;
      for (int64_t ch = c0; ch < c1; ++ch) y[ch] = 0;
      for (int64_t j = 0; j < kk; ++j) {
        const int64_t u = tok + j - st;  // stream position tap j reads
        const float* w = t.conv_w_t + j * c;
        if (u >= 0) {
          const float* xu = x + u * xs;
          for (int64_t ch = c0; ch < c1; ++ch) y[ch] += w[ch] * xu[ch];
        } else {
          for (int64_t ch = c0; ch < c1; ++ch) y[ch] += w[ch] * past_at(u, ch);
        }
      }
      silu_loop(y + c0, n);
    }
    // present = the last K-1 values of the stream. Walking i upwards reads
    // state index seq + i >= i only, so updating in place is safe.
    float* present = t.conv_present + row * c * st;
    for (int64_t ch = c0; ch < c1; ++ch)
      for (int64_t i = 0; i < st; ++i) {
        const int64_t u = s.seq + i - st;
        present[ch * st + i] = u >= 0 ? x[u * xs + ch] : past_at(u, ch);
      }
  }
}

// softplus as torch computes it (linear above 20).
inline float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// 1/||x|| (0 for a zero vector, which LpNormalization leaves at zero).
inline float inverse_l2(const float* x, int64_t n) {
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += x[i] * x[i];
  return sum > 0 ? 1.0f / std::sqrt(sum) : 0.0f;
}

// How far ahead of the first pass over a head's state to prefetch (a pass
// reads 64 KiB per head from DRAM in Qwen3.5: 128 x 128 fp32). Same distance
// as the decode GEMV's (matmul_avx512.cpp); its effect was not measured apart
// from the rest of the 208 -> 107 µs change (docs/performance.md, 1.8).
constexpr int64_t kPrefetchFloats = 1024;

// One token of the gated delta rule on one head's state S [dk, dv]:
//   S <- decay S;  delta = beta (v - S^T k);  S += k (x) delta;  o = S^T q
// in two passes over S (the second needs all of delta). `cold`: S was last
// touched a whole decode step ago, so it comes from DRAM. `next` (the state
// the caller does next, or null) is prefetched during the second pass, which
// runs from cache, so that DRAM keeps streaming while this one computes: its
// first `next_rows` rows of dv floats (fewer than dk when it is fp16).
inline void delta_rule_loops(float* state, const float* q, const float* k, const float* v, float decay, float beta,
                             float* o, int64_t dk, int64_t dv, bool cold, const float* next, int64_t next_rows) {
  float kv[kMaxDeltaHeadDim], delta[kMaxDeltaHeadDim];
  for (int64_t j = 0; j < dv; ++j) kv[j] = 0;
  if (cold)  // start the first rows' lines
    for (int64_t f = 0; f < std::min<int64_t>(dk * dv, kPrefetchFloats); f += 16) __builtin_prefetch(state + f);
  for (int64_t i = 0; i < dk; ++i) {
    const float ki = k[i];
    const float* srow = state + i * dv;
    if (cold)  // and keep ~4 KiB ahead of the stream (into the next head's at the end)
      for (int64_t f = 0; f < dv; f += 16) __builtin_prefetch(srow + kPrefetchFloats + f);
    for (int64_t j = 0; j < dv; ++j) kv[j] += srow[j] * ki;
  }
  for (int64_t j = 0; j < dv; ++j) delta[j] = beta * (v[j] - decay * kv[j]);
  for (int64_t j = 0; j < dv; ++j) o[j] = 0;
  for (int64_t i = 0; i < dk; ++i) {
    const float ki = k[i], qi = q[i];
    float* srow = state + i * dv;
    if (next && i < next_rows)
      for (int64_t f = 0; f < dv; f += 16) __builtin_prefetch(next + i * dv + f);
    for (int64_t j = 0; j < dv; ++j) {
      const float updated = decay * srow[j] + ki * delta[j];
      srow[j] = updated;
      o[j] += updated * qi;
    }
  }
}

// An ISA's direct fp16 recurrence for one token (bool(uint16_t* state, q, k,
// v, decay, beta, o, dk, dv, const uint16_t* next)): false when it does not
// take these head dims. The portable one takes none.
inline bool no_direct_f16(uint16_t*, const float*, const float*, const float*, float, float, float*, int64_t, int64_t,
                          const uint16_t*) {
  return false;
}

// A block of consecutive tokens of one head, for an ISA's multi-token
// recurrence: q and k normalized (q scaled), [n, dk] each; token j's v at
// v + j * v_stride; o [n, dv] receives S^T q per token.
struct DeltaTokens {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  int64_t v_stride = 0;
  const float* decay = nullptr;
  const float* beta = nullptr;
  float* o = nullptr;
  int64_t n = 0;
};

// The portable recurrence has no multi-token form: tokens run one by one.
inline bool no_tokens(float*, const DeltaTokens&, int64_t, int64_t, bool, const float*, int64_t) { return false; }

// Tokens per block of the multi-token recurrence: their q, k and o stay in L1.
constexpr int64_t kDeltaTokenBlock = 16;

// `recurrence` is delta_rule_loops or an ISA's faster version with its
// arguments; `tokens` an ISA's multi-token form (or no_tokens), which must
// compute exactly what `recurrence` token by token does; `direct_f16` as
// above. `next`: the state of the head the caller does next (fp32 or fp16, as
// the states are), or null.
template <typename Recurrence, typename Tokens, typename DirectF16>
inline void gated_delta_head(const GatedDeltaHeadArgs& p, int64_t row, int64_t h, const void* next,
                             Recurrence recurrence, Tokens tokens, DirectF16 direct_f16) {
  const GatedDeltaShape& s = p.s;
  const int64_t dk = s.dk, dv = s.dv, c = s.conv_dim(), head_size = dk * dv;
  const int64_t kh = h / (s.nv / s.nk);
  const int64_t offset = (row * s.nv + h) * head_size;  // [dk, dv]: row i belongs to key dim i
  // An fp16 state runs directly when it is one token and the ISA has a direct
  // version; otherwise widened into a per-thread scratch (64 KiB for Qwen3.5,
  // in L2) for all tokens and rounded back once: the same arithmetic either way.
  thread_local std::vector<float> scratch;
  float* state = p.state ? p.state + offset : nullptr;
  bool widened = false;
  const int64_t next_rows = p.state_f16 ? (dk + 1) / 2 : dk;  // fp16: half-size rows, in fp32 rows' bytes
  thread_local std::vector<float> q_block, k_block, o_block;  // [kDeltaTokenBlock, dk or dv]
  if (int64_t(q_block.size()) < kDeltaTokenBlock * std::max(dk, dv)) {
    q_block.resize(size_t(kDeltaTokenBlock * std::max(dk, dv)));
    k_block.resize(q_block.size());
    o_block.resize(q_block.size());
  }
  float* const qs = q_block.data();
  float* const ks = k_block.data();
  float* const os = o_block.data();
  float decays[kDeltaTokenBlock], betas[kDeltaTokenBlock];
  for (int64_t t0 = 0; t0 < s.seq; t0 += kDeltaTokenBlock) {
    const int64_t n = std::min(kDeltaTokenBlock, s.seq - t0);
    for (int64_t j = 0; j < n; ++j) {
      const int64_t token = row * s.seq + t0 + j;
      const float* xc = p.xc + token * c;
      const float* q_in = xc + kh * dk;
      const float* k_in = xc + s.nk * dk + kh * dk;
      const float q_mul = p.scale * inverse_l2(q_in, dk), k_mul = inverse_l2(k_in, dk);
      for (int64_t i = 0; i < dk; ++i) qs[j * dk + i] = q_in[i] * q_mul;
      for (int64_t i = 0; i < dk; ++i) ks[j * dk + i] = k_in[i] * k_mul;
      decays[j] = std::exp(p.neg_exp_a[h] * softplus(p.a[token * p.ab_stride + h] + p.dt_bias[h]));
      betas[j] = 1.0f / (1.0f + std::exp(-p.b[token * p.ab_stride + h]));
    }
    const float* v0 = p.xc + (row * s.seq + t0) * c + 2 * s.nk * dk + h * dv;

    // Only the first token finds the state in DRAM, and prefetches the next one.
    const bool first = t0 == 0;
    if (!(p.state_f16 && s.seq == 1 &&
          direct_f16(p.state_f16 + offset, qs, ks, v0, decays[0], betas[0], os, dk, dv,
                     static_cast<const uint16_t*>(next)))) {
      if (p.state_f16 && !widened) {
        if (int64_t(scratch.size()) < head_size) scratch.resize(size_t(head_size));
        state = scratch.data();
        widen_f16(p.state_f16 + offset, state, head_size);
        widened = true;
      }
      const bool cold = first && !widened;
      const float* prefetch = first ? static_cast<const float*>(next) : nullptr;
      const DeltaTokens block{qs, ks, v0, c, decays, betas, os, n};
      if (n == 1 || !tokens(state, block, dk, dv, cold, prefetch, next_rows))
        for (int64_t j = 0; j < n; ++j)
          recurrence(state, qs + j * dk, ks + j * dk, v0 + j * c, decays[j], betas[j], os + j * dv, dk, dv,
                     cold && j == 0, j == 0 ? prefetch : nullptr, next_rows);
    }

    // GatedRMSNorm over each token's dv values.
    for (int64_t j = 0; j < n; ++j) {
      const int64_t token = row * s.seq + t0 + j;
      const float* o = os + j * dv;
      float sum = 0;
      for (int64_t i = 0; i < dv; ++i) sum += o[i] * o[i];
      const float r = 1.0f / std::sqrt(sum / float(dv) + p.epsilon);
      const float* gate = p.silu_z + token * s.nv * dv + h * dv;
      float* out = p.out + token * s.nv * dv + h * dv;
      for (int64_t i = 0; i < dv; ++i) out[i] = o[i] * r * p.norm_w[i] * gate[i];
    }
  }
  if (widened) narrow_f16(state, p.state_f16 + offset, head_size);
}

// Heads [h0, h1) of one batch row, in order, each prefetching the next's state.
template <typename Recurrence, typename Tokens, typename DirectF16>
inline void gated_delta_heads(const GatedDeltaHeadArgs& p, int64_t row, int64_t h0, int64_t h1,
                              Recurrence recurrence, Tokens tokens, DirectF16 direct_f16) {
  const int64_t head_size = p.s.dk * p.s.dv;
  for (int64_t h = h0; h < h1; ++h) {
    const int64_t next = (row * p.s.nv + h + 1) * head_size;
    const void* next_state = h + 1 >= h1 ? nullptr
                             : p.state_f16 ? static_cast<const void*>(p.state_f16 + next)
                                           : static_cast<const void*>(p.state + next);
    gated_delta_head(p, row, h, next_state, recurrence, tokens, direct_f16);
  }
}

inline void heads_with_loops(const GatedDeltaHeadArgs& args, int64_t row, int64_t h0, int64_t h1) {
  gated_delta_heads(args, row, h0, h1, delta_rule_loops, no_tokens, no_direct_f16);
}

}  // namespace
}  // namespace deltagen::kernels
