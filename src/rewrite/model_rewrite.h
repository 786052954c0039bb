// The load-time rewrite, in an in-memory copy of the model: each
// linear-attention layer's chain from the conv to GatedRMSNorm becomes one
// deltagen.GatedDeltaNet node, and the com.microsoft.MatMulNBits,
// CausalConvWithState, GroupQueryAttention and QMoE nodes that deltagen's
// kernels support move to the "deltagen" domain (same inputs, outputs and
// attributes); then each MLP's SwiGLU is folded into its down_proj, each
// RMSNorm into the projection it feeds, and the full-attention layers' small
// nodes into their attention.
// The file on disk is never changed, so stock ONNX Runtime keeps running it.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include <onnx/onnx_pb.h>

namespace deltagen::rewrite {

struct RewriteOptions {
  // deltagen's kernel computes with int8 (decode) or bf16 (prefill)
  // activations, which is what accuracy_level 4 allows. Nodes asking for more
  // precision (0 = unset: fp32, 1 fp32, 2 fp16, 3 bf16) keep ORT's kernel
  // unless this is set.
  bool any_accuracy_level = false;
  // com.microsoft.CausalConvWithState (float, ndim 1, channels first,
  // dilation 1) -> deltagen.CausalConvWithState.
  bool causal_conv = true;
  // com.microsoft.GroupQueryAttention (float KV cache, no window or softcap,
  // rotary not interleaved) -> deltagen.GroupQueryAttention.
  bool attention = true;
  // com.microsoft.QMoE (float activations, int4 experts with float block
  // scales, Qwen's SwiGLU, no biases, fc3, zero points or router_weights)
  // -> deltagen.QMoE. Its activations are int8 (decode) or bf16 (prefill),
  // as deltagen.MatMulNBits'; QMoE has no accuracy_level attribute, so this
  // switch is what keeps ORT's fp32 experts.
  bool moe = true;
  // Fusions (need the kernels above): each linear-attention layer's conv ...
  // GatedRMSNorm chain -> one deltagen.GatedDeltaNet node
  // (gated_delta_fusion.h); each MLP's SwiGLU into its down_proj
  // (swiglu_fusion.h); each RMSNorm in front of a projection into it
  // (rmsnorm_fusion.h); each full-attention layer's split, q/k norms and
  // output gate into its attention node (attention_fusion.h).
  bool fusions = true;
  // Let deltagen's kernels give back the pages of weights they packed and
  // nothing else reads (kReleaseWeightsAttribute), and read Reshapes of file
  // weights in place (weight_reshapes.h): a session then holds the packed
  // copy, not the originals too.
  bool release_weights = true;
};

struct RewriteSummary {
  int64_t matmul_nbits = 0;  // com.microsoft.MatMulNBits nodes seen (top-level graph)
  int64_t rewritten = 0;     // MatMulNBits nodes moved to deltagen
  int64_t causal_conv = 0;   // CausalConvWithState nodes moved to deltagen
  int64_t attention = 0;     // GroupQueryAttention nodes moved to deltagen
  int64_t gated_delta_net = 0;  // linear-attention layers fused into one deltagen.GatedDeltaNet
  int64_t swiglu = 0;           // down_proj MatMulNBits nodes that took the MLP activation
  int64_t rmsnorm = 0;          // (Skip)SimplifiedLayerNormalization nodes folded into the MatMulNBits they feed
  int64_t gated_attention = 0;  // attention nodes that took their projection's split, q/k norms and output gate
  int64_t moe = 0;              // QMoE nodes moved to deltagen
  int64_t released = 0;         // deltagen nodes allowed to release their original weights
  int64_t aliased_reshapes = 0;  // Reshapes of file weights replaced by the same bytes, reshaped (weight_reshapes.h)
  // reason -> count, for MatMulNBits and QMoE nodes left on ORT's kernel
  // (a QMoE node's reason starts with "QMoE ")
  std::map<std::string, int64_t> kept;

  int64_t deltagen_nodes() const { return rewritten + causal_conv + attention + gated_delta_net + moe; }
};

// Rewrites `model` in place (the fusion, then MatMulNBits, CausalConvWithState,
// GroupQueryAttention and QMoE, as `options` allow); adds the "deltagen"
// opset import when a node moved.
RewriteSummary use_deltagen_kernels(onnx::ModelProto& model, const RewriteOptions& options = {});

}  // namespace deltagen::rewrite
