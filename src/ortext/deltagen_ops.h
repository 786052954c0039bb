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
// deltagen.QMoE: com.microsoft.QMoE with float activations, int4 experts
// (block-wise float scales, no zero points) and Qwen's SwiGLU, no biases or
// fc3; the experts are repacked once, like MatMulNBits' weights (moe_op.h,
// src/kernels/moe_experts.h).
//
// deltagen.GatedDeltaNet: no com.microsoft counterpart; the fusion of a
// linear-attention layer's conv ... GatedRMSNorm chain (gated_delta_net_op.h,
// gated_delta_fusion.h).
//
// Session config entries the kernels read (SessionOptions::AddConfigEntry;
// deltagen.MatMulNBits and deltagen.QMoE both read the matmul ones):
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

#include "rewrite/deltagen_domain.h"

namespace deltagen::ortext {

// What the load-time rewrite writes into the graph and these ops read.
using rewrite::kDeltagenDomain;
using rewrite::kDeltagenOpsetVersion;
using rewrite::kGatedQkvAttribute;
using rewrite::kKNormEpsilonAttribute;
using rewrite::kQNormEpsilonAttribute;
using rewrite::kRmsNormAttribute;
using rewrite::kRmsNormEpsilonAttribute;
using rewrite::kReleaseWeightsAttribute;
using rewrite::kSwigluAttribute;

inline constexpr const char* kConfigMaxLevel = "deltagen.matmul.max_level";
inline constexpr const char* kConfigAmxMinRows = "deltagen.matmul.amx_min_rows";
inline constexpr const char* kConfigCompactScales = "deltagen.matmul.compact_scales";
inline constexpr const char* kConfigHugePages = "deltagen.matmul.huge_pages";
// "0": keep the original weights resident after packing (the load-time
// rewrite's release_weights off; ortext/released_weights.h), to measure what releasing saves.
inline constexpr const char* kConfigReleaseWeights = "deltagen.release_weights";
inline constexpr const char* kConfigPrefetch = "deltagen.matmul.prefetch";
// "0": the AVX2 tables' multi-row tiles without AVX-VNNI (VPMADDUBSW), to
// measure an AVX2-only CPU on one that has AVX-VNNI.
inline constexpr const char* kConfigAvxVnni = "deltagen.matmul.avx_vnni";

// Adds the "deltagen" custom-op domain to `options`. Call once per
// SessionOptions (registering twice makes session creation fail). The domain
// lives for the whole process, so sessions may outlive any caller object.
void register_deltagen_ops(Ort::SessionOptions& options);

}  // namespace deltagen::ortext
