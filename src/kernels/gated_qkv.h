// The work around Qwen3.5's full attention that the builder emits as eleven
// small ONNX nodes per layer (Split, Reshapes, the per-head q/k RMSNorms, the
// output gate's Sigmoid and Mul), for deltagen.GroupQueryAttention when the
// load-time rewrite folded them into it (attention_fusion.h):
//
//   qkv [rows, nh*2*hd + 2*nkv*hd]: per query head h, q_h then gate_h (hd each),
//   then the nkv key heads, then the nkv value heads (q_proj | k_proj | v_proj);
//   q_h <- rmsnorm(q_h) * q_w,  k_g <- rmsnorm(k_g) * k_w   over hd, as
//   SimplifiedLayerNormalization;  after attention: out *= sigmoid(gate).
#pragma once
#include <cstdint>

#include "kernels/parallel.h"

namespace deltagen::kernels {

struct GatedQkvShape {
  int64_t rows = 0, heads = 0, kv_heads = 0, head_dim = 0;
  int64_t width() const { return heads * 2 * head_dim + 2 * kv_heads * head_dim; }
};

// Splits qkv into q and gate [rows, nh*hd] and k, v [rows, nkv*hd], q and k
// normalized; a prompt's rows spread over threads.
void split_gated_qkv(const GatedQkvShape& s, const float* qkv, const float* q_weight, float q_epsilon,
                     const float* k_weight, float k_epsilon, float* q, float* gate, float* k, float* v,
                     const Parallel& parallel);

// out *= sigmoid(gate), both [rows, width] (mul_sigmoid, vector_math.h).
void apply_sigmoid_gate(float* out, const float* gate, int64_t rows, int64_t width, const Parallel& parallel);

}  // namespace deltagen::kernels
