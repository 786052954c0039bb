// deltagen's own ONNX Runtime kernels, registered through ORT's custom-op
// interface under the domain "deltagen". The model file stays portable: it
// names com.microsoft ops, and fast_session.h switches nodes to this domain in
// memory at load time.
//
// deltagen.MatMulNBits: the inputs, outputs and attributes of
// com.microsoft.MatMulNBits (A float, B uint8, scales float, optional
// zero_points uint8, g_idx (must be absent), bias float), bits 4 only. Weights
// are repacked once when the session is created (src/kernels/packed_weights.h).
//
// deltagen.CausalConvWithState: com.microsoft.CausalConvWithState in float,
// ndim 1, channels first (causal_conv_op.h, src/kernels/causal_conv.h).
//
// deltagen.GroupQueryAttention: com.microsoft.GroupQueryAttention in float
// with a cache shared between past and present or growing, rotary not
// interleaved, no window or softcap (attention_op.h, src/kernels/attention.h).
//
// deltagen.GatedDeltaNet: no com.microsoft counterpart; the fusion of a
// linear-attention layer's conv ... GatedRMSNorm chain (gated_delta_net_op.h,
// gated_delta_fusion.h).
//
// Session config entries the kernels read (SessionOptions::AddConfigEntry):
//   deltagen.matmul.max_level      scalar|avx2|avx512|amx: cap the kernel family
//   deltagen.matmul.amx_min_rows   M from which the AMX path is taken
//   deltagen.matmul.compact_scales 0 to keep fp32 block scales (default 1: fp16
//                                  when lossless enough)
//   deltagen.matmul.huge_pages     0 to pack weights on ordinary 4 KiB pages
//                                  (default 1: transparent huge pages,
//                                  kernels/stream_memory.h)
//   deltagen.matmul.prefetch       l1:BYTES or l2:BYTES: the decode GEMV's
//                                  prefetch (default l2:8192, MatMulPrefetch)
#pragma once
#include <onnxruntime_cxx_api.h>

namespace deltagen::ortext {

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

inline constexpr const char* kConfigMaxLevel = "deltagen.matmul.max_level";
inline constexpr const char* kConfigAmxMinRows = "deltagen.matmul.amx_min_rows";
inline constexpr const char* kConfigCompactScales = "deltagen.matmul.compact_scales";
inline constexpr const char* kConfigHugePages = "deltagen.matmul.huge_pages";
inline constexpr const char* kConfigPrefetch = "deltagen.matmul.prefetch";

// Adds the "deltagen" custom-op domain to `options`. Call once per
// SessionOptions (registering twice makes session creation fail). The domain
// lives for the whole process, so sessions may outlive any caller object.
void register_deltagen_ops(Ort::SessionOptions& options);

}  // namespace deltagen::ortext
