// Load-time fusion around Qwen3.5's gated full attention. In an in-memory
// model whose GroupQueryAttention nodes already moved to deltagen:
//
//   qkv -> Split -> q_gate, k, v
//   q_gate -> Reshape [.., nh, 2hd] -> Split -> q4, gate4
//   q4 -> SimplifiedLayerNormalization (q_norm) -> Reshape -> query
//   k -> Reshape [.., nkv, hd] -> SimplifiedLayerNormalization (k_norm) -> Reshape -> key
//   GroupQueryAttention(query, key, v, ...) * Sigmoid(Reshape(gate4)) -> o_proj
//
// becomes one deltagen.GroupQueryAttention reading qkv itself, with the
// attributes and norm-weight inputs of deltagen_ops.h (kGatedQkvAttribute):
// eleven nodes fewer per full-attention layer. The norms need float weights of
// hd values on the last axis; rotary must be inside the attention (explicit
// RotaryEmbedding nodes leave the chain as it is).
#pragma once
#include <cstdint>

#include <onnx/onnx_pb.h>

namespace deltagen::rewrite {

// Returns how many attention nodes took their projection's split, norms and gate.
int64_t fuse_gated_attention(onnx::GraphProto& graph);

}  // namespace deltagen::rewrite
