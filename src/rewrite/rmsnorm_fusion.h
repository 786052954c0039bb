// Load-time fusion: a SimplifiedLayerNormalization or com.microsoft
// SkipSimplifiedLayerNormalization whose output only a deltagen.MatMulNBits
// reads (every input_layernorm, post_attention_layernorm and the final norm of
// Qwen3.5, in front of in_proj / qkv_proj / gate_up_proj / lm_head) is folded
// into that node, which normalizes its A itself (deltagen_ops.h,
// kernels/rms_norm.h). The residual sum the skip form also returns becomes the
// MatMulNBits node's output 1. Taken: float norm weight of K values, last
// axis, no bias, no mean / inverse-std outputs in use.
#pragma once
#include <cstdint>

#include <onnx/onnx_pb.h>

namespace deltagen::rewrite {

// Returns how many norms were folded.
int64_t fuse_rmsnorm_into_matmul(onnx::GraphProto& graph);

}  // namespace deltagen::rewrite
