// Causal attention with a KV cache shared between past and present, the
// semantics of com.microsoft.GroupQueryAttention as the builder uses it (float,
// BNSH cache of capacity `cap`, optional rotary inside, no window/softcap):
//
//   for row b, new token i < S at position p = seqlens_k[b] + 1 - S + i:
//     k_cache[b, g, p] = rope(k[b, i, g], p); v_cache[b, g, p] = v[b, i, g]      (g < kv_heads)
//     out[b, i, h] = sum_{j <= p} softmax_j(scale q'.k_cache[b, g, j]) v_cache[b, g, j]
//       with q' = rope(q[b, i, h], p), g = h / (heads / kv_heads)
//   rope(x, p) rotates the first `rotary_dim` dims as two halves (not interleaved):
//     x[d] cos - x[d + R/2] sin,  x[d + R/2] cos + x[d] sin,  cos/sin = cache[p][d], d < R/2.
//
// ORT 1.30's CPU kernel spends ~0.9 ms per layer on one decode step at a
// context of ~1000 (docs/performance.md); this one reads each cached key and
// value once per step for all the query heads that share it.
#pragma once
#include <cstdint>

#include "kernels/dispatch.h"
#include "kernels/parallel.h"

namespace deltagen::kernels {

struct AttentionShape {
  int64_t batch = 1, seq = 1;
  int64_t heads = 0, kv_heads = 0, head_dim = 0;
  int64_t capacity = 0;    // cache positions per (row, kv head)
  int64_t rotary_dim = 0;  // 0: no rotary inside
  int64_t rotary_positions = 0;  // rows of the cos/sin caches
};

struct AttentionTensors {
  const float* q = nullptr;  // [B, S, heads * head_dim]
  const float* k = nullptr;  // [B, S, kv_heads * head_dim]
  const float* v = nullptr;  // [B, S, kv_heads * head_dim]
  float* k_cache = nullptr;  // [B, kv_heads, capacity, head_dim], updated in place
  float* v_cache = nullptr;
  const int32_t* seqlens_k = nullptr;  // [B]: total length - 1 per row
  const float* cos = nullptr;  // [rotary_positions, rotary_dim / 2], with rotary
  const float* sin = nullptr;
  float* out = nullptr;  // [B, S, heads * head_dim]
};

// Throws Error for a position outside the cache or the rotary tables.
void attention(const AttentionShape& s, float scale, const AttentionTensors& t, const Parallel& parallel,
               KernelLevel level = default_level());

// The per-ISA core (attention_impl.h): query heads [h0, h1) of kv head g, row
// b, tokens [i0, i1), with the keys and values already in the cache.
struct AttentionTask {
  const AttentionShape* s;
  const AttentionTensors* t;
  float scale;
  int64_t b, g, i0, i1;
};
// The per-ISA table (dispatch.h).
struct AttentionKernels {
  KernelLevel isa;
  void (*attend)(const AttentionTask& task);
};
extern const AttentionKernels kAttentionScalar;  // attention.cpp (baseline x86-64)
extern const AttentionKernels kAttentionAvx2;    // attention_avx2.cpp
extern const AttentionKernels kAttentionAvx512;  // attention_avx512.cpp
extern const KernelFamily<AttentionKernels> kAttentionFamily;  // AMX: the AVX-512 table

}  // namespace deltagen::kernels
