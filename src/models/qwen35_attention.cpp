// Gated full attention and the SwiGLU MLP of the Qwen3.5 graph.
//
//   x -> q_proj, k_proj, v_proj            (one MatMul + Split when fused)
//   q_proj -> Reshape [B,S,nh,2hd] -> Split -> q4, gate4 (rows interleaved per head)
//   q4 -> q_norm -> (RotaryEmbedding) --+
//   k  -> k_norm -> (RotaryEmbedding) --+-> GroupQueryAttention (rotary inside when it can)
//   v  ---------------------------------+      -> * sigmoid(gate) -> o_proj
#include <cmath>

#include "models/qwen35.h"
#include "models/qwen35_graph.h"

namespace deltagen::qwen35 {

using graph::attr;
using graph::kMsDomain;

// GroupQueryAttention's CPU kernel applies a partial rotary when its cos
// cache width (rotary_dim / 2) is a multiple of 8 and at most head_dim / 2:
// bit-identical to the explicit RotaryEmbedding nodes (measured), 2 nodes fewer per layer.
bool Graph::rotary_inside_attention() const {
  const int64_t rot = cfg_.rotary_dim();
  return opts_.rotary_in_attention && !mrope() && rot % 16 == 0 && rot <= cfg_.head_dim && cfg_.head_dim % 16 == 0;
}

// q/k norm over head_dim: x4 is [B, S, heads, head_dim].
std::string Graph::head_norm(const std::string& path, const std::string& x4, const std::string& ckpt_weight,
                             int64_t heads) {
  std::string normed = rms_norm(path + "/SimplifiedLayerNorm", x4, ckpt_weight, path + "/layernorm", ValueMap::PlusOne);
  return reshape(path + "/Reshape", normed, {0, 0, heads * cfg_.head_dim});  // [B, S, heads*hd]
}

// Partial rotate-half RoPE on the first rotary_dim dims of each head.
std::string Graph::rotary(const std::string& path, const std::string& x, int64_t heads) {
  return compute("RotaryEmbedding", path + "/RotaryEmbedding", {x, rope_positions_, cos_cache_, sin_cache_},
                 {attr("interleaved", 0), attr("num_heads", heads), attr("rotary_embedding_dim", cfg_.rotary_dim())},
                 kMsDomain);
}

std::string Graph::full_attention(int64_t i, const std::string& x) {
  const std::string p = layer_path(i) + "/attn";
  const std::string c = ckpt_layer(i) + "self_attn.";
  const int64_t nh = cfg_.num_attention_heads, nkv = cfg_.num_key_value_heads, hd = cfg_.head_dim;

  auto qkv = projections(p + "/qkv_proj", x,
                         {{p + "/q_proj", c + "q_proj.weight"},   // [B, S, nh*2*hd]
                          {p + "/k_proj", c + "k_proj.weight"},   // [B, S, nkv*hd]
                          {p + "/v_proj", c + "v_proj.weight"}},  // [B, S, nkv*hd]
                         plan_.layers);

  // q_proj rows are interleaved per head: [q_h0 | gate_h0 | q_h1 | gate_h1 ...].
  std::string q_gate4 = reshape(p + "/q_gate/Reshape", qkv[0], {0, 0, nh, 2 * hd});  // [B, S, nh, 2*hd]
  const DataType qdt = dtype_of(q_gate4);
  auto split = node("Split", p + "/q_gate/Split", {q_gate4, b_.constant_i64({hd, hd})}, {attr("axis", -1)}, "",
                    {qdt, qdt});                                              // 2 x [B, S, nh, hd]
  std::string gate = reshape(p + "/gate/Reshape", split[1], {0, 0, nh * hd});  // [B, S, nh*hd]

  std::string q = head_norm(p + "/q_norm", split[0], c + "q_norm.weight", nh);
  std::string k4 = reshape(p + "/k_norm/Reshape_in", qkv[1], {0, 0, nkv, hd});  // [B, S, nkv, hd]
  std::string k = head_norm(p + "/k_norm", k4, c + "k_norm.weight", nkv);

  const bool inside = rotary_inside_attention();
  if (!inside) {
    q = rotary(p + "/q_rotary", q, nh);
    k = rotary(p + "/k_rotary", k, nkv);
  }
  const DataType dt = run_dtype("GroupQueryAttention");
  const std::string gqa_name = p + "/GroupQueryAttention";
  std::vector<std::string> inputs = {cast(q, dt, gqa_name + "/query/Cast"), cast(k, dt, gqa_name + "/key/Cast"),
                                     cast(qkv[2], dt, gqa_name + "/value/Cast"), io::past_key(cache_index(i)),
                                     io::past_value(cache_index(i)),
                                     seqlens_k_, total_seq_len_};
  if (inside) {
    inputs.push_back(cos_cache_);
    inputs.push_back(sin_cache_);
  }
  auto gqa = node("GroupQueryAttention", gqa_name, inputs,
                  {attr("num_heads", nh), attr("kv_num_heads", nkv), attr("scale", 1.0 / std::sqrt(double(hd))),
                   attr("local_window_size", -1), attr("do_rotary", int64_t(inside)), attr("rotary_interleaved", 0),
                   attr("softcap", 0.0f)},
                  kMsDomain, {dt, dt, dt},
                  {gqa_name + "/output_0", io::present_key(cache_index(i)), io::present_value(cache_index(i))});

  std::string gate_sig = compute("Sigmoid", p + "/gate/Sigmoid", {gate});
  std::string gated = compute("Mul", p + "/gate/Mul", {gqa[0], gate_sig});
  return matmul(p + "/o_proj", gated, {c + "o_proj.weight"}, plan_.layers);
}

// SwiGLU: down(silu(gate(x)) * up(x)).
std::string Graph::mlp(int64_t i, const std::string& x) {
  const std::string p = layer_path(i) + "/mlp";
  const std::string c = ckpt_layer(i) + "mlp.";
  auto gate_up = projections(p + "/gate_up_proj", x,
                             {{p + "/gate_proj", c + "gate_proj.weight"}, {p + "/up_proj", c + "up_proj.weight"}},
                             plan_.layers);
  std::string act = silu(p + "/act_fn", gate_up[0]);
  std::string prod = compute("Mul", p + "/Mul", {act, gate_up[1]});
  return matmul(p + "/down_proj", prod, {c + "down_proj.weight"}, plan_.layers);
}

}  // namespace deltagen::qwen35
