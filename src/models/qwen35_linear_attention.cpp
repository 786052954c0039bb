// The Gated DeltaNet (linear attention) layer of the Qwen3.5 graph.
//
//   x -> in_proj_qkv, in_proj_z, in_proj_b, in_proj_a   (one MatMul + Split when fused)
//   qkv -> CausalConvWithState (+SiLU) -> Split -> q, k, v
//   q, k -> per-head L2 norm (LpNormalization)
//   a, b -> LinearAttentionGate -> decay g = -exp(A_log) * softplus(a + dt_bias), beta = sigmoid(b)
//   LinearAttention(q, k, v, state, g, beta; scale = 1/sqrt(dk)) -> GatedRMSNorm(., w, z) -> out_proj
//
// The conv and LinearAttention kernels are float-only on the CPU EP and the
// state is fp32 (as in HF), so everything from the conv to LinearAttention
// runs in fp32: with fp16/bf16 activations, Casts sit only where the
// projections enter this island (qkv, a, b) and where its output leaves it.
#include <cmath>

#include "models/qwen35.h"
#include "models/qwen35_graph.h"
#include "deltagen/error.h"

namespace deltagen::qwen35 {

using graph::attr;
using graph::kFloat;
using graph::kMsDomain;

namespace {

// HF's l2norm in the Gated DeltaNet: x * rsqrt(sum(x^2) + 1e-6).
constexpr float kL2NormEps = 1e-6f;

}  // namespace

// ---- state I/O ----------------------------------------------------------------------

std::string Graph::state_in(const std::string& p, const std::string& input) {
  return cast(input, kFloat, p + "/" + input + "/Cast");
}

std::string Graph::state_out_name(const std::string& node, const std::string& output) {
  return plan_.state == kFloat ? output : node + "/output_1";
}

void Graph::state_out(const std::string& node, const std::string& fp32_value, const std::string& output) {
  if (plan_.state == kFloat) return;
  this->node("Cast", node + "/present/Cast", {fp32_value}, {attr("to", int64_t(plan_.state))}, "", {plan_.state},
             {output});
}

// ---- pieces -------------------------------------------------------------------------

// Depthwise causal conv + SiLU over the qkv channels [B, S, conv_dim]; the
// state keeps the last K-1 inputs. The kernel is channels-first unless
// channels_last is set, which saves the two Transposes.
std::string Graph::causal_conv(int64_t i, const std::string& p, const std::string& mixed) {
  const std::string w =  // [conv_dim, 1, K]
      weight(float_weight(ckpt_, ckpt_layer(i) + "linear_attn.conv1d.weight", weight_name_for(p), kFloat));
  std::string x = cast(mixed, kFloat, p + "/input/Cast");
  const bool last = opts_.conv_channels_last;
  const auto swap = attr("perm", std::vector<int64_t>{0, 2, 1});  // [B, S, C] <-> [B, C, S]
  if (!last) x = op("Transpose", p + "/Transpose_in", {x}, kFloat, {swap});
  std::vector<onnx::AttributeProto> attrs = {attr("ndim", 1), attr("activation", "silu")};
  if (last) attrs.push_back(attr("channels_last", 1));
  const std::string name = p + "/CausalConvWithState";
  const std::string present = io::present_conv_state(i);
  auto conv = node("CausalConvWithState", name, {x, w, "", state_in(p, io::past_conv_state(i))}, attrs, kMsDomain,
                   {kFloat, kFloat}, {name + "/output_0", state_out_name(name, present)});
  state_out(name, conv[1], present);
  return last ? conv[0] : op("Transpose", p + "/Transpose_out", {conv[0]}, kFloat, {swap});  // [B, S, C]
}

// x * 1/sqrt(sum(x^2) + eps) as upstream wrote it before #2127: Mul, ReduceSum,
// Add, Sqrt, Reciprocal, Mul (ONNX has no Rsqrt).
std::string Graph::l2_norm_decomposed(const std::string& path, const std::string& x4) {
  const std::string eps = b_.constant_f32_scalar(kL2NormEps);
  std::string sq = op("Mul", path + "/Mul", {x4, x4}, kFloat);
  std::string sum = op("ReduceSum", path + "/ReduceSum", {sq, b_.constant_i64({-1})}, kFloat, {attr("keepdims", 1)});
  std::string sum_eps = op("Add", path + "/Add", {sum, eps}, kFloat);
  std::string norm = op("Sqrt", path + "/Sqrt", {sum_eps}, kFloat);
  std::string inv = op("Reciprocal", path + "/Reciprocal", {norm}, kFloat);
  return op("Mul", path + "/Mul_1", {x4, inv}, kFloat);
}

// Per-head L2 normalization of q or k [B, S, nk*dk] (fp32).
std::string Graph::l2_norm_heads(const std::string& path, const std::string& x) {
  const int64_t nk = cfg_.linear_num_key_heads, dk = cfg_.linear_key_head_dim;
  std::string x4 = reshape(path + "/Reshape_in", x, {0, 0, nk, dk});  // [B, S, nk, dk]
  const auto lp = std::vector{attr("axis", -1), attr("p", 2)};
  std::string n;
  if (opts_.l2norm == L2Norm::Decomposed) {
    n = l2_norm_decomposed(path, x4);
  } else if (opts_.l2norm == L2Norm::LpNormEps) {
    // |[x, sqrt(eps)]| = sqrt(|x|^2 + eps): HF's l2norm eps, exactly.
    std::string padded = op("Pad", path + "/Pad",
                            {x4, b_.constant_i64({0, 1}), b_.constant_f32_scalar(std::sqrt(kL2NormEps)),
                             b_.constant_i64({-1})},
                            kFloat);  // [B, S, nk, dk + 1]
    std::string normed = op("LpNormalization", path + "/LpNormalization", {padded}, kFloat, lp);
    n = op("Slice", path + "/Slice", {normed, b_.constant_i64({0}), b_.constant_i64({dk}), b_.constant_i64({-1})},
           kFloat);
  } else {
    n = op("LpNormalization", path + "/LpNormalization", {x4}, kFloat, lp);
  }
  return reshape(path + "/Reshape_out", n, {0, 0, nk * dk});  // [B, S, nk*dk]
}

// decay g = -exp(A_log) * softplus(a + dt_bias) and beta = sigmoid(b), both
// [B, S, nv] in fp32; -exp(A_log) is folded at build time.
std::pair<std::string, std::string> Graph::decay_and_beta(int64_t i, const std::string& p, const std::string& a,
                                                          const std::string& b) {
  const std::string c = ckpt_layer(i) + "linear_attn.";
  const std::string prefix = "model.layers." + std::to_string(i) + ".linear_attn.";
  const std::string dt_bias = weight(float_weight(ckpt_, c + "dt_bias", prefix + "dt_bias", kFloat));
  const std::string neg_exp_a =
      weight(float_weight(ckpt_, c + "A_log", prefix + "neg_exp_A", kFloat, ValueMap::NegExp));
  std::string a32 = cast(a, kFloat, p + "/decay/input/Cast");
  std::string b32 = cast(b, kFloat, p + "/beta/input/Cast");
  if (opts_.linear_attention_gate) {
    const std::string name = p + "/gates/LinearAttentionGate";
    auto g = node("LinearAttentionGate", name, {a32, dt_bias, neg_exp_a, b32}, {}, kMsDomain, {kFloat, kFloat});
    return {g[0], g[1]};
  }
  std::string beta = op("Sigmoid", p + "/beta/Sigmoid", {b32}, kFloat);
  std::string a_biased = op("Add", p + "/decay/Add", {a32, dt_bias}, kFloat);
  std::string softplus = op("Softplus", p + "/decay/Softplus", {a_biased}, kFloat);
  return {op("Mul", p + "/decay/Mul", {softplus, neg_exp_a}, kFloat), beta};
}

// RMSNorm per value head with the plain weight, times silu(z): [B, S, nv*dv].
std::string Graph::gated_norm(int64_t i, const std::string& p, const std::string& o, const std::string& z) {
  const int64_t nv = cfg_.linear_num_value_heads, dv = cfg_.linear_value_head_dim;
  const std::string ckpt_weight = ckpt_layer(i) + "linear_attn.norm.weight";
  if (opts_.gated_rmsnorm) {
    // One node: normalizes each trailing group of dv (= the weight's length)
    // values, all in fp32 inside the kernel. Not an RMSNorm the old fp32-upcast
    // form touched (upstream's gated norm had its own Casts), so --norm-upcast
    // leaves it alone.
    const std::string name = p + "/GatedRMSNorm";
    const DataType dt = run_dtype("GatedRMSNorm");
    const std::string w = weight(norm_weight(ckpt_weight, p, ValueMap::Identity, dt));
    return op("GatedRMSNorm", name, {cast(o, dt, name + "/input_0/Cast"), w, cast(z, dt, name + "/input_2/Cast")}, dt,
              {attr("epsilon", cfg_.rms_norm_eps)}, kMsDomain);
  }
  std::string o4 = reshape(p + "/Reshape_in", o, {0, 0, nv, dv});  // [B, S, nv, dv]
  std::string normed = rms_norm(p + "/SimplifiedLayerNorm", o4, ckpt_weight, p, ValueMap::Identity);
  std::string normed3 = reshape(p + "/Reshape_out", normed, {0, 0, nv * dv});  // [B, S, nv*dv]
  return compute("Mul", p + "/Mul", {normed3, silu(p + "/z_act", z)});
}

// ---- the layer ----------------------------------------------------------------------

std::string Graph::linear_attention(int64_t i, const std::string& x) {
  const std::string p = layer_path(i) + "/linear_attn";
  const std::string c = ckpt_layer(i) + "linear_attn.";
  const int64_t nk = cfg_.linear_num_key_heads, nv = cfg_.linear_num_value_heads;
  const int64_t dk = cfg_.linear_key_head_dim, dv = cfg_.linear_value_head_dim;

  auto proj = projections(p + "/in_proj", x,
                          {{p + "/in_proj_qkv", c + "in_proj_qkv.weight"},  // [B, S, conv_dim]
                           {p + "/in_proj_z", c + "in_proj_z.weight"},      // [B, S, nv*dv]
                           {p + "/in_proj_b", c + "in_proj_b.weight"},      // [B, S, nv]
                           {p + "/in_proj_a", c + "in_proj_a.weight"}},     // [B, S, nv]
                          plan_.linear_attn);

  std::string conv_out = causal_conv(i, p + "/conv1d", proj[0]);  // [B, S, conv_dim] fp32
  auto qkv = node("Split", p + "/qkv/Split", {conv_out, b_.constant_i64({nk * dk, nk * dk, nv * dv})},
                  {attr("axis", -1)}, "", {kFloat, kFloat, kFloat});  // q, k [B, S, nk*dk]; v [B, S, nv*dv]
  std::string q = l2_norm_heads(p + "/q_norm", qkv[0]);
  std::string k = l2_norm_heads(p + "/k_norm", qkv[1]);
  auto [g, beta] = decay_and_beta(i, p, proj[3], proj[2]);

  // q/k have nk heads, v has nv >= nk: value head h reads key head h / (nv / nk),
  // which is ORT's inverse-GQA mapping and Qwen's repeat_interleave alike.
  // The 1/sqrt(dk) query scale is the op's `scale` (q enters only the readout),
  // or, in the old form, a Mul on q before it.
  const double q_scale = 1.0 / std::sqrt(double(dk));
  if (opts_.q_scale_mul)
    q = op("Mul", p + "/q_scale/Mul", {q, b_.constant_f32_scalar(float(q_scale))}, kFloat);
  const std::string name = p + "/LinearAttention";
  const std::string present = io::present_recurrent_state(i);
  auto la = node("LinearAttention", name, {q, k, qkv[2], state_in(p, io::past_recurrent_state(i)), g, beta},
                 {attr("q_num_heads", nk), attr("kv_num_heads", nv), attr("update_rule", "gated_delta"),
                  attr("scale", opts_.q_scale_mul ? 1.0 : q_scale)},
                 kMsDomain, {kFloat, kFloat}, {name + "/output_0", state_out_name(name, present)});
  state_out(name, la[1], present);

  std::string gated = gated_norm(i, p + "/norm", la[0], proj[1]);  // [B, S, nv*dv]
  return matmul(p + "/out_proj", gated, {c + "out_proj.weight"}, plan_.linear_attn);
}

}  // namespace deltagen::qwen35
