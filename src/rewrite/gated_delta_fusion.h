// The load-time fusion behind deltagen.GatedDeltaNet (gated_delta_net_op.h):
// in an in-memory model, each linear-attention layer's chain
//
//   [Transpose] -> CausalConvWithState(silu) -> [Transpose] -> Split(q, k, v)
//   q, k -> Reshape -> LpNormalization(p 2, last axis) -> Reshape
//   LinearAttentionGate(a, dt_bias, -exp(A_log), b) -> decay, beta
//   LinearAttention(gated_delta) -> GatedRMSNorm(weight [dv], z)
//
// becomes one node with the same graph inputs and outputs (the states keep
// their names, so binding them in place still works). 13 nodes per layer are
// one; a chain in any other form (--l2norm decomposed, --no-gated-rmsnorm,
// fp16 casts, a q scale Mul, extra consumers of an intermediate) is left as
// it is, on ORT's kernels.
#pragma once
#include <cstdint>

#include <onnx/onnx_pb.h>

namespace deltagen::rewrite {

// Rewrites `graph` in place; returns the number of layers fused.
int64_t fuse_gated_delta_net(onnx::GraphProto& graph);

}  // namespace deltagen::rewrite
