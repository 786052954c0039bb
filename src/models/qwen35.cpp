// Qwen3.5 text model -> ONNX graph (fp32).
//
// Layout, per onnxruntime-genai's Qwen35TextModel (text-only mode), with the
// math of HF modeling_qwen3_5.py:
//   input_ids -> Gather(embed_tokens)
//   per layer: RMSNorm (SimplifiedLayerNormalization for layer 0, then
//     com.microsoft.SkipSimplifiedLayerNormalization which also adds the
//     residual) -> mixer -> Skip RMSNorm -> SwiGLU MLP
//   mixer = gated full attention (GroupQueryAttention) or Gated DeltaNet
//     (CausalConvWithState + LinearAttention)
//   final Skip RMSNorm -> lm_head -> logits
// Offset RMSNorms (x * rsqrt(mean x^2 + eps) * (1 + w)) get 1 + w folded into
// their weight at build time; the gated norm inside linear attention uses w.
#include "models/qwen35.h"

#include <cmath>

#include "models/weights.h"
#include "util/error.h"

namespace deltagen {

using graph::attr;
using graph::Dim;
using graph::GraphBuilder;
using graph::kMsDomain;

namespace {

// HF's l2norm in the Gated DeltaNet: x * rsqrt(sum(x^2) + 1e-6).
constexpr float kL2NormEps = 1e-6f;

const Dim kBatch = std::string("batch_size");
const Dim kSeq = std::string("sequence_length");
const Dim kPast = std::string("past_sequence_length");
const Dim kTotal = std::string("total_sequence_length");

std::string layer_path(int64_t i) { return "/model/layers." + std::to_string(i); }
std::string ckpt_layer(int64_t i) { return "layers." + std::to_string(i) + "."; }

// "/model/layers.3/attn/q_proj/MatMul" -> "model.layers.3.attn.q_proj.MatMul.weight":
// the initializer is named after the node that uses it, as upstream does.
std::string weight_name_for(const std::string& node) {
  std::string n = node.substr(node[0] == '/' ? 1 : 0);
  for (char& c : n)
    if (c == '/') c = '.';
  return n + ".weight";
}

class Qwen35Graph {
 public:
  Qwen35Graph(const Checkpoint& ckpt, const BuildOptions& opts, int64_t context_length, GraphBuilder& b)
      : ckpt_(ckpt), cfg_(ckpt.config()), opts_(opts), context_length_(context_length), b_(b) {}

  void build() {
    declare_inputs();
    attention_mask_to_gqa_inputs();
    if (cfg_.num_full_layers() > 0) rotary_caches();

    std::string x = embed_tokens();
    std::string residual = x;
    std::string normed = input_norm_layer0(x);
    for (int64_t i = 0; i < cfg_.num_hidden_layers; ++i) {
      std::string mixed = cfg_.is_full(i) ? full_attention(i, normed) : linear_attention(i, normed);
      auto [post_normed, sum] = skip_norm(layer_path(i) + "/post_attention_layernorm/SkipLayerNorm", mixed,
                                          residual, ckpt_layer(i) + "post_attention_layernorm.weight");
      residual = sum;
      std::string mlp_out = mlp(i, post_normed);
      if (i + 1 < cfg_.num_hidden_layers) {
        auto [next_normed, next_sum] = skip_norm(layer_path(i + 1) + "/input_layernorm/SkipLayerNorm", mlp_out,
                                                 residual, ckpt_layer(i + 1) + "input_layernorm.weight");
        normed = next_normed;
        residual = next_sum;
      } else {
        normed = final_norm(mlp_out, residual);
      }
    }
    lm_head(normed);
  }

 private:
  // ---- graph I/O ------------------------------------------------------------------

  void declare_inputs() {
    b_.input(io::kInputIds, graph::kInt64, {kBatch, kSeq});
    b_.input(io::kAttentionMask, graph::kInt64, {kBatch, kTotal});
    b_.input(io::kPositionIds, graph::kInt64, {kBatch, kSeq});
    b_.output(io::kLogits, graph::kFloat, {kBatch, kSeq, cfg_.vocab_size});
    for (int64_t i = 0; i < cfg_.num_hidden_layers; ++i) {
      if (cfg_.is_full(i)) {
        const std::vector<Dim> past = {kBatch, cfg_.num_key_value_heads, kPast, cfg_.head_dim};
        const std::vector<Dim> present = {kBatch, cfg_.num_key_value_heads, kTotal, cfg_.head_dim};
        b_.input(io::past_key(i), graph::kFloat, past);
        b_.input(io::past_value(i), graph::kFloat, past);
        b_.output(io::present_key(i), graph::kFloat, present);
        b_.output(io::present_value(i), graph::kFloat, present);
      } else {
        const std::vector<Dim> conv = {kBatch, cfg_.conv_dim(), cfg_.linear_conv_kernel_dim - 1};
        const std::vector<Dim> rec = {kBatch, cfg_.linear_num_value_heads, cfg_.linear_key_head_dim,
                                      cfg_.linear_value_head_dim};
        b_.input(io::past_conv_state(i), graph::kFloat, conv);
        b_.input(io::past_recurrent_state(i), graph::kFloat, rec);
        b_.output(io::present_conv_state(i), graph::kFloat, conv);
        b_.output(io::present_recurrent_state(i), graph::kFloat, rec);
      }
    }
  }

  // GroupQueryAttention wants seqlens_k = (tokens so far) - 1 per batch row
  // and the total length as int32; both come from attention_mask [B, total].
  void attention_mask_to_gqa_inputs() {
    const std::string p = "/model/attn_mask_reformat/attn_mask_subgraph";
    std::string sum = b_.op("ReduceSum", p + "/ReduceSum", {io::kAttentionMask, b_.constant_i64({1})},
                            {attr("keepdims", 0)});  // [B]
    std::string minus_one = b_.op("Sub", p + "/Sub", {sum, b_.constant_i64_scalar(1)});
    seqlens_k_ = b_.op("Cast", p + "/Sub/Cast", {minus_one}, {attr("to", int64_t(graph::kInt32))});
    std::string shape = b_.op("Shape", p + "/Shape", {io::kAttentionMask});  // [2]
    std::string total = b_.op("Gather", p + "/Gather", {shape, b_.constant_i64_scalar(1)}, {attr("axis", 0)});
    total_seq_len_ = b_.op("Cast", p + "/Gather/Cast", {total}, {attr("to", int64_t(graph::kInt32))});
  }

  // cos/sin [context_length, rotary_dim / 2] for rotate-half RoPE:
  // inv_freq[i] = theta^(-2i / rotary_dim). Text tokens have equal T/H/W
  // positions, so Qwen3.5's interleaved mRoPE reduces to this plain RoPE.
  void rotary_caches() {
    const int64_t half = cfg_.rotary_dim() / 2;
    std::vector<float> cos_v(size_t(context_length_ * half)), sin_v(cos_v.size());
    for (int64_t i = 0; i < half; ++i) {
      const double inv_freq = std::pow(cfg_.rope_theta, -2.0 * double(i) / double(cfg_.rotary_dim()));
      for (int64_t pos = 0; pos < context_length_; ++pos) {
        const double angle = double(pos) * inv_freq;
        cos_v[size_t(pos * half + i)] = float(std::cos(angle));
        sin_v[size_t(pos * half + i)] = float(std::sin(angle));
      }
    }
    cos_cache_ = b_.initializer_f32("model.rotary_emb.cos_cache", {context_length_, half}, std::move(cos_v));
    sin_cache_ = b_.initializer_f32("model.rotary_emb.sin_cache", {context_length_, half}, std::move(sin_v));
  }

  // ---- building blocks ------------------------------------------------------------

  std::string matmul(const std::string& path, const std::string& x, const std::string& ckpt_weight) {
    const std::string node = path + "/MatMul";
    const std::string& w = b_.initializer(weight_transposed(ckpt_, ckpt_weight, weight_name_for(node)));
    return b_.op("MatMul", node, {x, w});
  }

  // Reshape to `shape`; a 0 keeps that input dim (batch, sequence stay symbolic).
  std::string reshape(const std::string& name, const std::string& x, const std::vector<int64_t>& shape) {
    return b_.op("Reshape", name, {x, b_.constant_i64(shape)});
  }

  std::string rms_norm(const std::string& name, const std::string& x, const std::string& weight) {
    return b_.op("SimplifiedLayerNormalization", name, {x, weight},
                 {attr("axis", -1), attr("epsilon", cfg_.rms_norm_eps), attr("stash_type", 1)});
  }

  std::string offset_norm_weight(const std::string& ckpt_weight, const std::string& name) {
    return b_.initializer(weight_plus_one(ckpt_, ckpt_weight, name));
  }

  // (normalized(x + skip), x + skip)
  std::pair<std::string, std::string> skip_norm(const std::string& name, const std::string& x,
                                                const std::string& skip, const std::string& ckpt_weight) {
    std::string w = offset_norm_weight(ckpt_weight, weight_name_for(name));
    auto outs = b_.node("SkipSimplifiedLayerNormalization", name, {x, skip, w}, {attr("epsilon", cfg_.rms_norm_eps)},
                        kMsDomain, 0, {name + "/output_0", "", "", name + "/output_3"});
    return {outs[0], outs[3]};
  }

  std::string silu(const std::string& path, const std::string& x) {
    std::string sig = b_.op("Sigmoid", path + "/Sigmoid", {x});
    return b_.op("Mul", path + "/Mul", {x, sig});
  }

  // ---- embeddings, norms, head ----------------------------------------------------

  std::string embed_tokens() {
    embed_weight_ = b_.initializer(weight_as_is(ckpt_, "embed_tokens.weight", "model.embed_tokens.weight"));
    return b_.op("Gather", "/model/embed_tokens/Gather", {embed_weight_, io::kInputIds});  // [B,S,H]
  }

  std::string input_norm_layer0(const std::string& x) {
    const std::string name = layer_path(0) + "/input_layernorm/LayerNorm";
    return rms_norm(name, x, offset_norm_weight(ckpt_layer(0) + "input_layernorm.weight", weight_name_for(name)));
  }

  std::string final_norm(const std::string& x, const std::string& residual) {
    const std::string name = layer_path(cfg_.num_hidden_layers) + "/final_norm_layernorm/SkipLayerNorm";
    std::string w = offset_norm_weight("norm.weight", weight_name_for(name));
    return b_.node("SkipSimplifiedLayerNormalization", name, {x, residual, w}, {attr("epsilon", cfg_.rms_norm_eps)},
                   kMsDomain, 1)
        .front();
  }

  void lm_head(const std::string& x) {
    if (ckpt_.lm_head_name() == "embed_tokens.weight") {
      // Tied: multiply by the embedding table [V, H] itself (transB), so the
      // largest tensor is stored once.
      b_.node("FusedMatMul", "/lm_head/FusedMatMul", {x, embed_weight_},
              {attr("transA", 0), attr("transB", 1), attr("alpha", 1.0f)}, kMsDomain, 1, {io::kLogits});
    } else {
      const std::string node = "/lm_head/MatMul";
      const std::string& w = b_.initializer(weight_transposed(ckpt_, "lm_head.weight", weight_name_for(node)));
      b_.node("MatMul", node, {x, w}, {}, "", 1, {io::kLogits});
    }
  }

  // ---- gated full attention -------------------------------------------------------

  // q/k norm over head_dim: x4 is [B, S, heads, head_dim].
  std::string head_norm(const std::string& path, const std::string& x4, const std::string& ckpt_weight,
                        int64_t heads) {
    const std::string name = path + "/SimplifiedLayerNorm";
    std::string w = offset_norm_weight(ckpt_weight, weight_name_for(path + "/layernorm"));
    std::string normed = rms_norm(name, x4, w);
    return reshape(path + "/Reshape", normed, {0, 0, heads * cfg_.head_dim});  // [B, S, heads*hd]
  }

  // Partial rotate-half RoPE on the first rotary_dim dims of each head.
  std::string rotary(const std::string& path, const std::string& x, int64_t heads) {
    return b_.op("RotaryEmbedding", path + "/RotaryEmbedding", {x, io::kPositionIds, cos_cache_, sin_cache_},
                 {attr("interleaved", 0), attr("num_heads", heads), attr("rotary_embedding_dim", cfg_.rotary_dim())},
                 kMsDomain);
  }

  std::string full_attention(int64_t i, const std::string& x) {
    const std::string p = layer_path(i) + "/attn";
    const std::string c = ckpt_layer(i) + "self_attn.";
    const int64_t nh = cfg_.num_attention_heads, nkv = cfg_.num_key_value_heads, hd = cfg_.head_dim;

    std::string q_gate = matmul(p + "/q_proj", x, c + "q_proj.weight");  // [B, S, nh*2*hd]
    std::string k = matmul(p + "/k_proj", x, c + "k_proj.weight");       // [B, S, nkv*hd]
    std::string v = matmul(p + "/v_proj", x, c + "v_proj.weight");       // [B, S, nkv*hd]

    // q_proj rows are interleaved per head: [q_h0 | gate_h0 | q_h1 | gate_h1 ...].
    std::string q_gate4 = reshape(p + "/q_gate/Reshape", q_gate, {0, 0, nh, 2 * hd});  // [B, S, nh, 2*hd]
    auto split = b_.node("Split", p + "/q_gate/Split", {q_gate4, b_.constant_i64({hd, hd})}, {attr("axis", -1)}, "",
                         2);  // 2 x [B, S, nh, hd]
    std::string gate = reshape(p + "/gate/Reshape", split[1], {0, 0, nh * hd});  // [B, S, nh*hd]

    std::string q = head_norm(p + "/q_norm", split[0], c + "q_norm.weight", nh);
    std::string k4 = reshape(p + "/k_norm/Reshape_in", k, {0, 0, nkv, hd});  // [B, S, nkv, hd]
    k = head_norm(p + "/k_norm", k4, c + "k_norm.weight", nkv);
    q = rotary(p + "/q_rotary", q, nh);
    k = rotary(p + "/k_rotary", k, nkv);

    auto gqa = b_.node("GroupQueryAttention", p + "/GroupQueryAttention",
                       {q, k, v, io::past_key(i), io::past_value(i), seqlens_k_, total_seq_len_},
                       {attr("num_heads", nh), attr("kv_num_heads", nkv), attr("scale", 1.0 / std::sqrt(double(hd))),
                        attr("local_window_size", -1), attr("do_rotary", 0), attr("rotary_interleaved", 0),
                        attr("softcap", 0.0f)},
                       kMsDomain, 0,
                       {p + "/GroupQueryAttention/output_0", io::present_key(i), io::present_value(i)});

    std::string gate_sig = b_.op("Sigmoid", p + "/gate/Sigmoid", {gate});
    std::string gated = b_.op("Mul", p + "/gate/Mul", {gqa[0], gate_sig});
    return matmul(p + "/o_proj", gated, c + "o_proj.weight");
  }

  // ---- Gated DeltaNet -------------------------------------------------------------

  // Per-head L2 normalization of q or k [B, S, nk*dk]: one LpNormalization.
  std::string l2_norm_heads(const std::string& path, const std::string& x) {
    const int64_t nk = cfg_.linear_num_key_heads, dk = cfg_.linear_key_head_dim;
    std::string x4 = reshape(path + "/Reshape_in", x, {0, 0, nk, dk});  // [B, S, nk, dk]
    if (opts_.exact_l2norm_eps) {
      // |[x, sqrt(eps)]| = sqrt(|x|^2 + eps): HF's l2norm eps, exactly.
      x4 = b_.op("Pad", path + "/Pad", {x4, b_.constant_i64({0, 1}), b_.constant_f32_scalar(std::sqrt(kL2NormEps)),
                                        b_.constant_i64({-1})});  // [B, S, nk, dk + 1]
    }
    std::string n = b_.op("LpNormalization", path + "/LpNormalization", {x4}, {attr("axis", -1), attr("p", 2)});
    if (opts_.exact_l2norm_eps) {
      n = b_.op("Slice", path + "/Slice", {n, b_.constant_i64({0}), b_.constant_i64({dk}), b_.constant_i64({-1})});
    }
    return reshape(path + "/Reshape_out", n, {0, 0, nk * dk});  // [B, S, nk*dk]
  }

  // [B, S, C] <-> [B, C, S]
  std::string swap_last_two(const std::string& name, const std::string& x) {
    return b_.op("Transpose", name, {x}, {attr("perm", std::vector<int64_t>{0, 2, 1})});
  }

  // Depthwise causal conv + SiLU over the qkv channels [B, S, conv_dim]; the
  // state keeps the last K-1 inputs.
  std::string causal_conv(int64_t i, const std::string& p, const std::string& mixed) {
    const std::string& weight =  // [conv_dim, 1, K]
        b_.initializer(weight_as_is(ckpt_, ckpt_layer(i) + "linear_attn.conv1d.weight", weight_name_for(p)));
    std::string channels_first = swap_last_two(p + "/Transpose_in", mixed);  // [B, C, S]
    auto conv = b_.node("CausalConvWithState", p + "/CausalConvWithState",
                        {channels_first, weight, "", io::past_conv_state(i)},
                        {attr("ndim", 1), attr("activation", "silu")}, kMsDomain, 0,
                        {p + "/CausalConvWithState/output_0", io::present_conv_state(i)});
    return swap_last_two(p + "/Transpose_out", conv[0]);  // [B, S, C]
  }

  // decay g = -exp(A_log) * softplus(a + dt_bias), [B, S, nv]; -exp(A_log) is folded at build time.
  std::string decay(int64_t i, const std::string& p, const std::string& a) {
    const std::string c = ckpt_layer(i) + "linear_attn.";
    const std::string prefix = "model.layers." + std::to_string(i) + ".linear_attn.";
    const std::string& dt_bias = b_.initializer(weight_as_is(ckpt_, c + "dt_bias", prefix + "dt_bias"));
    const std::string& neg_exp_a = b_.initializer(weight_neg_exp(ckpt_, c + "A_log", prefix + "neg_exp_A"));
    std::string a_biased = b_.op("Add", p + "/Add", {a, dt_bias});
    std::string softplus = b_.op("Softplus", p + "/Softplus", {a_biased});
    return b_.op("Mul", p + "/Mul", {softplus, neg_exp_a});
  }

  // RMSNorm per value head with the plain weight, times silu(z): [B, S, nv*dv].
  std::string gated_norm(int64_t i, const std::string& p, const std::string& o, const std::string& z) {
    const int64_t nv = cfg_.linear_num_value_heads, dv = cfg_.linear_value_head_dim;
    const std::string& w =
        b_.initializer(weight_as_is(ckpt_, ckpt_layer(i) + "linear_attn.norm.weight", weight_name_for(p)));
    std::string o4 = reshape(p + "/Reshape_in", o, {0, 0, nv, dv});  // [B, S, nv, dv]
    std::string normed = rms_norm(p + "/SimplifiedLayerNorm", o4, w);
    std::string normed3 = reshape(p + "/Reshape_out", normed, {0, 0, nv * dv});  // [B, S, nv*dv]
    return b_.op("Mul", p + "/Mul", {normed3, silu(p + "/z_act", z)});
  }

  std::string linear_attention(int64_t i, const std::string& x) {
    const std::string p = layer_path(i) + "/linear_attn";
    const std::string c = ckpt_layer(i) + "linear_attn.";
    const int64_t nk = cfg_.linear_num_key_heads, nv = cfg_.linear_num_value_heads;
    const int64_t dk = cfg_.linear_key_head_dim, dv = cfg_.linear_value_head_dim;

    std::string mixed = matmul(p + "/in_proj_qkv", x, c + "in_proj_qkv.weight");  // [B, S, conv_dim]
    std::string z = matmul(p + "/in_proj_z", x, c + "in_proj_z.weight");           // [B, S, nv*dv]
    std::string b = matmul(p + "/in_proj_b", x, c + "in_proj_b.weight");           // [B, S, nv]
    std::string a = matmul(p + "/in_proj_a", x, c + "in_proj_a.weight");           // [B, S, nv]

    std::string conv_out = causal_conv(i, p + "/conv1d", mixed);  // [B, S, conv_dim]
    auto qkv = b_.node("Split", p + "/qkv/Split", {conv_out, b_.constant_i64({nk * dk, nk * dk, nv * dv})},
                       {attr("axis", -1)}, "", 3);  // q, k [B, S, nk*dk]; v [B, S, nv*dv]
    std::string q = l2_norm_heads(p + "/q_norm", qkv[0]);
    std::string k = l2_norm_heads(p + "/k_norm", qkv[1]);
    std::string beta = b_.op("Sigmoid", p + "/beta/Sigmoid", {b});  // [B, S, nv]
    std::string g = decay(i, p + "/decay", a);                      // [B, S, nv]

    // q/k have nk heads, v has nv >= nk: value head h reads key head h / (nv / nk),
    // which is ORT's inverse-GQA mapping and Qwen's repeat_interleave alike.
    // The 1/sqrt(dk) query scale is applied by the op (q enters only the readout).
    auto la = b_.node("LinearAttention", p + "/LinearAttention", {q, k, qkv[2], io::past_recurrent_state(i), g, beta},
                      {attr("q_num_heads", nk), attr("kv_num_heads", nv), attr("update_rule", "gated_delta"),
                       attr("scale", 1.0 / std::sqrt(double(dk)))},
                      kMsDomain, 0, {p + "/LinearAttention/output_0", io::present_recurrent_state(i)});

    std::string gated = gated_norm(i, p + "/norm", la[0], z);  // [B, S, nv*dv]
    return matmul(p + "/out_proj", gated, c + "out_proj.weight");
  }

  // ---- MLP ------------------------------------------------------------------------

  std::string mlp(int64_t i, const std::string& x) {
    const std::string p = layer_path(i) + "/mlp";
    const std::string c = ckpt_layer(i) + "mlp.";
    std::string gate = matmul(p + "/gate_proj", x, c + "gate_proj.weight");
    std::string up = matmul(p + "/up_proj", x, c + "up_proj.weight");
    std::string act = silu(p + "/act_fn", gate);
    std::string prod = b_.op("Mul", p + "/Mul", {act, up});
    return matmul(p + "/down_proj", prod, c + "down_proj.weight");
  }

  const Checkpoint& ckpt_;
  const ModelConfig& cfg_;
  const BuildOptions& opts_;
  const int64_t context_length_;
  GraphBuilder& b_;
  std::string seqlens_k_, total_seq_len_, cos_cache_, sin_cache_, embed_weight_;
};

}  // namespace

void build_qwen35_graph(const Checkpoint& ckpt, const BuildOptions& opts, int64_t context_length,
                        GraphBuilder& b) {
  const ModelConfig& cfg = ckpt.config();
  if (cfg.rotary_dim() % 2 != 0 || cfg.rotary_dim() <= 0)
    fail("config.json", "rotary_dim " + std::to_string(cfg.rotary_dim()) + " must be even and positive");
  if (context_length <= 0) fail("build", "context length must be positive");
  Qwen35Graph(ckpt, opts, context_length, b).build();
}

}  // namespace deltagen
