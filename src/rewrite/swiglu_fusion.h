// Load-time fusion of the MLP activation into down_proj: in an in-memory
// model whose MatMulNBits nodes already moved to deltagen,
//
//   gate_up -> Split(K, K) -> gate, up;   Mul(gate, Sigmoid(gate)) * up -> deltagen.MatMulNBits (down_proj)
//
// becomes one deltagen.MatMulNBits reading gate_up with the attribute
// deltagen_swiglu = 1 (deltagen_ops.h): 4 nodes fewer per layer. Other forms
// (fp16 casts, extra readers of an intermediate) are left as they are.
#pragma once
#include <cstdint>

#include <onnx/onnx_pb.h>

namespace deltagen::rewrite {

// Rewrites `graph` in place; returns the number of MatMulNBits nodes that took the activation.
int64_t fuse_swiglu_into_matmul(onnx::GraphProto& graph);

}  // namespace deltagen::rewrite
