// The contract between the load-time rewrite (this folder) and deltagen's
// ONNX Runtime kernels (src/ortext): the custom-op domain the rewritten nodes
// move to, and the attributes the fusions add to them. The ops read exactly
// these names; the ops include this header; the rewrite never includes the ops.
#pragma once

namespace deltagen::rewrite {

inline constexpr const char* kDeltagenDomain = "deltagen";
inline constexpr int kDeltagenOpsetVersion = 1;

// deltagen.MatMulNBits attribute set by the load-time rewrite
// (swiglu_fusion.h): A is the MLP's [gate | up], 2K wide, and the op
// computes silu(gate) * up before the product.
inline constexpr const char* kSwigluAttribute = "deltagen_swiglu";
// deltagen.MatMulNBits attributes set by the load-time rewrite
// (rmsnorm_fusion.h): A is the input of the (Skip)SimplifiedLayerNormalization
// that fed the op, which applies it first (kernels/rms_norm.h) with input 6
// the optional skip and input 7 the norm weight. kRmsNormAttribute: 1, or 2
// when the op also writes the residual sum A + skip as output 1.
inline constexpr const char* kRmsNormAttribute = "deltagen_rmsnorm";
inline constexpr const char* kRmsNormEpsilonAttribute = "deltagen_rmsnorm_epsilon";

// deltagen.GroupQueryAttention attributes set by the load-time rewrite
// (attention_fusion.h): input 0 is Qwen3.5's packed q_proj | k_proj | v_proj
// output (kernels/gated_qkv.h) with head dim kGatedQkvAttribute, inputs 1
// and 2 are absent, inputs 9 and 10 are the q and k norm weights, and output
// 0 is already multiplied by sigmoid(gate).
inline constexpr const char* kGatedQkvAttribute = "deltagen_gated_qkv_head_dim";
inline constexpr const char* kQNormEpsilonAttribute = "deltagen_q_norm_epsilon";
inline constexpr const char* kKNormEpsilonAttribute = "deltagen_k_norm_epsilon";

// Set to 1 by the load-time rewrite on a deltagen node whose constant weight
// inputs (MatMulNBits: B, scales, zero points; QMoE: fc1, fc2 and their
// scales) no other node reads and that
// are no graph output: once its kernel has packed its own copy it may give
// the originals' pages back (ortext/released_weights.h).
inline constexpr const char* kReleaseWeightsAttribute = "deltagen_release_weights";

}  // namespace deltagen::rewrite
