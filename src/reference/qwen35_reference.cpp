#include "reference/qwen35_reference.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "deltagen/error.h"
#include "kernels/gemm_f32.h"
#include "quant/parallel.h"
#include "reference/qwen35_ops.h"
#include "util/mapped_pages.h"

namespace deltagen {
namespace {

// ---- loading --------------------------------------------------------------------

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

// Loads `name` as fp64 and checks that it holds exactly `expected` elements
// (the shape itself was validated when the checkpoint was opened, but the
// reference must never read past a buffer whatever the loader lets through).
std::vector<double> load_vector(const Checkpoint& ck, const std::string& name, int64_t expected) {
  std::vector<double> v = ck.load_f64(name);
  if (int64_t(v.size()) != expected)
    fail(name, "has " + std::to_string(v.size()) + " elements, the config implies " + std::to_string(expected));
  return v;
}

Matrix64 load_matrix(const Checkpoint& ck, const std::string& name, int64_t rows, int64_t cols) {
  std::vector<double> v = ck.load_f64(name);
  // Copied: the mapping's pages can go (a streamed model reads a larger
  // checkpoint than memory, one layer at a time).
  drop_mapped_pages(ck.info(name).data, ck.info(name).nbytes);
  if (int64_t(v.size()) != rows * cols)
    fail(name, "has shape " + shape_text(ck.info(name).shape) + ", the config implies " +
                   shape_text({rows, cols}));
  Matrix64 m;
  m.rows = rows;
  m.cols = cols;
  m.data = std::move(v);
  return m;
}

// ---- helpers on whole matrices (the per-row math is in qwen35_ops.h) ----------------

// A Linear layer without bias: x [T][in], w [out][in] -> [T][out]. Large
// ones are split over threads by output rows: each value is the same dot
// product whatever the split.
Matrix64 linear_f64(const Matrix64& x, const Matrix64& w) {
  Matrix64 y(x.rows, w.rows);
  const int threads = x.rows * w.rows * w.cols >= (int64_t(1) << 22) ? 0 : 1;
  quant::parallel_for(w.rows, threads, 64, [&](int64_t begin, int64_t end) {
    for (int64_t t = 0; t < x.rows; ++t)
      for (int64_t o = begin; o < end; ++o) y.row(t)[o] = ref::dot(x.row(t), w.row(o), w.cols);
  });
  return y;
}

// The same in fp32: inputs rounded to fp32, w32 the weight in fp32, fp32 sums (gemm_f32.h).
Matrix64 linear_f32(const Matrix64& x, const std::vector<float>& w32, int64_t out) {
  const std::vector<float> xf(x.data.begin(), x.data.end());
  std::vector<float> yf(static_cast<size_t>(x.rows * out));
  kernels::gemm_nt_f32(xf.data(), w32.data(), yf.data(), {x.rows, out, x.cols}, false, 0);
  Matrix64 y;
  y.rows = x.rows;
  y.cols = out;
  y.data.assign(yf.begin(), yf.end());
  return y;
}

// Reports a Linear layer's input to the observer, if any, with its weights' names.
void observe_input(const LinearInputObserver* observe, const std::string& prefix,
                   std::initializer_list<const char*> weights, const Matrix64& x) {
  if (!observe || !*observe) return;
  std::vector<std::string> names;
  for (const char* w : weights) names.push_back(prefix + w + ".weight");
  (*observe)(names, x);
}

// Offset RMSNorm applied to every row of x (all norms of the residual stream).
Matrix64 rms_norm_rows(const Matrix64& x, const std::vector<double>& w, double eps) {
  Matrix64 y = x;
  for (int64_t t = 0; t < y.rows; ++t) ref::offset_rms_norm(y.row(t), w.data(), y.cols, eps);
  return y;
}

Matrix64 expert_matrix(const Checkpoint& ck, int64_t layer, int64_t e, ExpertPart part) {
  const ExpertMatrix m = ck.expert_matrix(layer, e, part);
  Matrix64 out(m.rows, m.cols);
  convert_to_f64(m.dtype, m.data, out.data.size(), out.data.data());
  return out;
}

// ---- state ------------------------------------------------------------------------

// A full-attention layer's empty cache: no token yet, one list per KV head.
KvCache empty_kv_cache(int64_t kv_heads) {
  KvCache kv;
  kv.k.assign(size_t(kv_heads), {});
  kv.v.assign(size_t(kv_heads), {});
  return kv;
}

// Text positions: all three rotary streams of token t are first + t.
MropePositions text_positions(int64_t first, int64_t count) {
  MropePositions pos;
  for (int64_t t = 0; t < count; ++t) {
    pos.t.push_back(first + t);
    pos.h.push_back(first + t);
    pos.w.push_back(first + t);
  }
  return pos;
}

}  // namespace

ReferenceModel::ExpertWeights ReferenceModel::load_swiglu(const Checkpoint& ck, const std::string& prefix, int64_t I,
                                                          int64_t H) {
  ExpertWeights w;
  w.gate_proj = load_matrix(ck, prefix + "gate_proj.weight", I, H);
  w.up_proj = load_matrix(ck, prefix + "up_proj.weight", I, H);
  w.down_proj = load_matrix(ck, prefix + "down_proj.weight", H, I);
  return w;
}

ReferenceModel::MoeWeights ReferenceModel::load_moe(const Checkpoint& ck, const std::string& p, int64_t layer) const {
  const ModelConfig& c = cfg_;
  const int64_t H = c.hidden_size;
  const std::string m = p + "mlp.";
  MoeWeights w;
  w.router = load_matrix(ck, m + "gate.weight", c.num_experts, H);
  for (int64_t e = 0; e < c.num_experts; ++e)
    w.experts.push_back({expert_matrix(ck, layer, e, ExpertPart::Gate), expert_matrix(ck, layer, e, ExpertPart::Up),
                         expert_matrix(ck, layer, e, ExpertPart::Down)});
  w.shared = load_swiglu(ck, m + "shared_expert.", c.shared_expert_intermediate_size, H);
  w.shared_gate = load_matrix(ck, m + "shared_expert_gate.weight", 1, H);
  return w;
}

// ---- construction -------------------------------------------------------------------

ReferenceModel::LayerWeights ReferenceModel::load_layer(const Checkpoint& ck, const std::string& p, bool full,
                                                       int64_t moe_layer) const {
  const ModelConfig& c = cfg_;
  const int64_t H = c.hidden_size;
  LayerWeights w;
  w.prefix = p;
  w.full = full;
  w.input_norm = load_vector(ck, p + "input_layernorm.weight", H);
  w.post_norm = load_vector(ck, p + "post_attention_layernorm.weight", H);
  if (w.full) {
    const int64_t nh = c.num_attention_heads, nkv = c.num_key_value_heads, hd = c.head_dim;
    const std::string a = p + "self_attn.";
    w.attn.q_proj = load_matrix(ck, a + "q_proj.weight", nh * 2 * hd, H);
    w.attn.k_proj = load_matrix(ck, a + "k_proj.weight", nkv * hd, H);
    w.attn.v_proj = load_matrix(ck, a + "v_proj.weight", nkv * hd, H);
    w.attn.o_proj = load_matrix(ck, a + "o_proj.weight", H, nh * hd);
    w.attn.q_norm = load_vector(ck, a + "q_norm.weight", hd);
    w.attn.k_norm = load_vector(ck, a + "k_norm.weight", hd);
  } else {
    const int64_t nv = c.linear_num_value_heads;
    const std::string l = p + "linear_attn.";
    w.lin.in_proj_qkv = load_matrix(ck, l + "in_proj_qkv.weight", c.conv_dim(), H);
    w.lin.in_proj_z = load_matrix(ck, l + "in_proj_z.weight", c.linear_value_dim(), H);
    w.lin.in_proj_b = load_matrix(ck, l + "in_proj_b.weight", nv, H);
    w.lin.in_proj_a = load_matrix(ck, l + "in_proj_a.weight", nv, H);
    w.lin.conv = load_matrix(ck, l + "conv1d.weight", c.conv_dim(), c.linear_conv_kernel_dim);
    w.lin.A_log = load_vector(ck, l + "A_log", nv);
    w.lin.dt_bias = load_vector(ck, l + "dt_bias", nv);
    w.lin.norm = load_vector(ck, l + "norm.weight", c.linear_value_head_dim);
    w.lin.out_proj = load_matrix(ck, l + "out_proj.weight", H, c.linear_value_dim());
  }
  if (c.is_moe()) w.moe = load_moe(ck, p, moe_layer);
  else w.mlp = load_swiglu(ck, p + "mlp.", c.intermediate_size, H);
  return w;
}

Matrix64 ReferenceModel::linear(const Matrix64& x, const Matrix64& w) const {
  if (w.rows * w.cols != int64_t(w.data.size()) || w.cols != x.cols)
    fail("reference", "a Linear weight is not loaded (a streamed model runs only the layers it loaded)");
  if (!options_.fp32_linear) return linear_f64(x, w);
  std::vector<float>& w32 = fp32_weights_[w.data.data()];
  if (w32.empty()) w32.assign(w.data.begin(), w.data.end());
  return linear_f32(x, w32, w.rows);
}

ReferenceModel::ReferenceModel(const Checkpoint& ck, ReferenceOptions options)
    : cfg_(ck.config()), options_(options) {
  const ModelConfig& c = cfg_;
  const int64_t H = c.hidden_size;
  if (c.num_attention_heads <= 0 || c.num_key_value_heads <= 0 || c.linear_num_key_heads <= 0 ||
      c.linear_num_value_heads <= 0 || c.num_attention_heads % c.num_key_value_heads != 0 ||
      c.linear_num_value_heads % c.linear_num_key_heads != 0 || c.rotary_dim() % 2 != 0 ||
      c.rotary_dim() > c.head_dim || c.linear_conv_kernel_dim <= 0 ||
      int64_t(c.layer_types.size()) != c.num_hidden_layers)
    fail(ck.dir().string(), "config not supported by the reference (head counts, rotary_dim or layer_types)");

  final_norm_ = load_vector(ck, "norm.weight", H);
  lm_head_name_ = ck.lm_head_name();
  inv_freq_ = ref::rope_inv_freq(c.rope_theta, c.rotary_dim());
  for (int i = 0; i < 3; ++i) mrope_section_[i] = c.mrope_section[size_t(i)];
  if (options_.streamed) {
    streamed_from_ = &ck;
    const TensorInfo& e = ck.info("embed_tokens.weight");
    if (e.shape != std::vector<int64_t>{c.vocab_size, H})
      fail("embed_tokens.weight", "has shape " + shape_text(e.shape) + ", the config implies " +
                                      shape_text({c.vocab_size, H}));
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      layers_.emplace_back();
      layers_.back().prefix = "layers." + std::to_string(i) + ".";
      layers_.back().full = c.is_full(i);
    }
    loaded_.assign(size_t(c.num_hidden_layers), false);
    return;
  }
  embed_ = load_matrix(ck, "embed_tokens.weight", c.vocab_size, H);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i)
    layers_.push_back(load_layer(ck, "layers." + std::to_string(i) + ".", c.is_full(i), i));
  loaded_.assign(size_t(c.num_hidden_layers), true);
  if (lm_head_name_ != "embed_tokens.weight") lm_head_ = load_matrix(ck, lm_head_name_, c.vocab_size, H);

  if (ck.has_mtp()) {  // a MoE model's head has a MoE MLP, like its layers
    MtpWeights m;
    m.fc = load_matrix(ck, "mtp.fc.weight", H, 2 * H);
    m.norm_embedding = load_vector(ck, "mtp.pre_fc_norm_embedding.weight", H);
    m.norm_hidden = load_vector(ck, "mtp.pre_fc_norm_hidden.weight", H);
    for (int64_t i = 0; i < c.mtp_num_hidden_layers; ++i)
      m.layers.push_back(load_layer(ck, "mtp.layers." + std::to_string(i) + ".", /*full=*/true, c.num_hidden_layers + i));
    m.norm = load_vector(ck, "mtp.norm.weight", H);
    mtp_ = std::move(m);
  }
}

void ReferenceModel::load_layer(int64_t layer) {
  if (layer < 0 || layer >= cfg_.num_hidden_layers) throw std::logic_error("load_layer: no such layer");
  if (loaded_[size_t(layer)]) return;
  LayerWeights& w = layers_[size_t(layer)];
  w = load_layer(*streamed_from_, w.prefix, w.full, layer);
  loaded_[size_t(layer)] = true;
}

void ReferenceModel::release_layer(int64_t layer) {
  if (layer < 0 || layer >= cfg_.num_hidden_layers) throw std::logic_error("release_layer: no such layer");
  if (!options_.streamed || !loaded_[size_t(layer)]) return;
  fp32_weights_.clear();  // only this layer's: layers run one at a time
  LayerWeights& w = layers_[size_t(layer)];
  LayerWeights empty;
  empty.prefix = w.prefix;
  empty.full = w.full;
  w = std::move(empty);
  loaded_[size_t(layer)] = false;
}


ReferenceState ReferenceModel::new_state() const {
  const ModelConfig& c = cfg_;
  ReferenceState s;
  s.kv.resize(size_t(c.num_hidden_layers));
  s.deltanet.resize(size_t(c.num_hidden_layers));
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    if (c.is_full(i)) {
      s.kv[size_t(i)] = empty_kv_cache(c.num_key_value_heads);
    } else {
      s.deltanet[size_t(i)].conv.assign(size_t(c.conv_dim() * c.linear_conv_kernel_dim), 0.0);
      s.deltanet[size_t(i)].recurrent.assign(
          size_t(c.linear_num_value_heads * c.linear_key_head_dim * c.linear_value_head_dim), 0.0);
    }
  }
  return s;
}

// ---- the mixers --------------------------------------------------------------------------

// Gated full attention over x [T][hidden] (already input-normed), token t at
// rotary positions (pos.t[t], pos.h[t], pos.w[t]); appends their keys/values
// to the cache.
Matrix64 ReferenceModel::full_attention(const LayerWeights& w, const Matrix64& x, const MropePositions& pos,
                                        KvCache& cache, const LinearInputObserver* observe) const {
  const ModelConfig& c = cfg_;
  const int64_t T = x.rows, nh = c.num_attention_heads, nkv = c.num_key_value_heads, hd = c.head_dim;
  const double eps = c.rms_norm_eps;

  observe_input(observe, w.prefix + "self_attn.", {"q_proj", "k_proj", "v_proj"}, x);
  Matrix64 qg = linear(x, w.attn.q_proj);  // [T][nh * 2hd]: per head [query(hd) | gate(hd)]
  Matrix64 k = linear(x, w.attn.k_proj);   // [T][nkv * hd]
  Matrix64 v = linear(x, w.attn.v_proj);   // [T][nkv * hd]

  // Split the interleaved q_proj output into queries and gates, both [T][nh * hd].
  Matrix64 q(T, nh * hd), gate(T, nh * hd);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < nh; ++h) {
      const double* src = qg.row(t) + h * 2 * hd;
      std::copy(src, src + hd, q.row(t) + h * hd);
      std::copy(src + hd, src + 2 * hd, gate.row(t) + h * hd);
    }

  // Per-head q_norm / k_norm (offset RMSNorm over head_dim), then
  // (M-)RoPE; for text all three position streams are equal and it is RoPE.
  for (int64_t t = 0; t < T; ++t) {
    const size_t i = size_t(t);
    for (int64_t h = 0; h < nh; ++h) {
      ref::offset_rms_norm(q.row(t) + h * hd, w.attn.q_norm.data(), hd, eps);
      ref::mrope(q.row(t) + h * hd, inv_freq_, mrope_section_, pos.t[i], pos.h[i], pos.w[i]);
    }
    for (int64_t h = 0; h < nkv; ++h) {
      ref::offset_rms_norm(k.row(t) + h * hd, w.attn.k_norm.data(), hd, eps);
      ref::mrope(k.row(t) + h * hd, inv_freq_, mrope_section_, pos.t[i], pos.h[i], pos.w[i]);
    }
  }

  // Append to the cache [nkv][len][hd]: the new tokens see themselves and all before.
  for (int64_t h = 0; h < nkv; ++h)
    for (int64_t t = 0; t < T; ++t) {
      cache.k[size_t(h)].insert(cache.k[size_t(h)].end(), k.row(t) + h * hd, k.row(t) + (h + 1) * hd);
      cache.v[size_t(h)].insert(cache.v[size_t(h)].end(), v.row(t) + h * hd, v.row(t) + (h + 1) * hd);
    }
  const int64_t past = cache.len;
  cache.len += T;

  // Causal softmax attention; query head h reads kv head h / (nh / nkv) (GQA).
  const double scale = 1.0 / std::sqrt(double(hd));
  Matrix64 out(T, nh * hd);
  for (int64_t t = 0; t < T; ++t) {
    const int64_t visible = past + t + 1;  // cache rows 0 .. past + t
    for (int64_t h = 0; h < nh; ++h) {
      const size_t kvh = size_t(h / (nh / nkv));
      ref::attend(q.row(t) + h * hd, cache.k[kvh].data(), cache.v[kvh].data(), visible, hd, scale, out.row(t) + h * hd);
    }
    ref::sigmoid_gate(out.row(t), gate.row(t), nh * hd);  // the gate in head order
  }
  observe_input(observe, w.prefix + "self_attn.", {"o_proj"}, out);
  return linear(out, w.attn.o_proj);  // [T][hidden]
}

// Gated DeltaNet over x [T][hidden] (already input-normed), one token at a
// time: the per-token recurrence is mathematically identical to HF's chunked
// prefill and is what HF itself runs for decode.
Matrix64 ReferenceModel::gated_delta_net(const LayerWeights& w, const Matrix64& x, DeltaNetState& st,
                                         const LinearInputObserver* observe) const {
  const ModelConfig& c = cfg_;
  const int64_t T = x.rows, K = c.linear_conv_kernel_dim, C = c.conv_dim();
  const int64_t nk = c.linear_num_key_heads, nv = c.linear_num_value_heads;
  const int64_t dk = c.linear_key_head_dim, dv = c.linear_value_head_dim;
  const DeltaNetWeights& lw = w.lin;

  observe_input(observe, w.prefix + "linear_attn.", {"in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a"}, x);
  Matrix64 mixed = linear(x, lw.in_proj_qkv);  // [T][conv_dim]: [q (nk*dk) | k (nk*dk) | v (nv*dv)]
  Matrix64 z = linear(x, lw.in_proj_z);        // [T][nv * dv]
  Matrix64 b = linear(x, lw.in_proj_b);        // [T][nv]
  Matrix64 a = linear(x, lw.in_proj_a);        // [T][nv]

  Matrix64 core(T, nv * dv);  // delta-rule outputs before the gated norm
  std::vector<double> conv_out(static_cast<size_t>(C)), q(static_cast<size_t>(dk)), k(static_cast<size_t>(dk));
  for (int64_t t = 0; t < T; ++t) {
    // Causal depthwise conv over the carried window, no bias, SiLU after it.
    for (int64_t ch = 0; ch < C; ++ch)
      conv_out[size_t(ch)] = ref::silu(ref::causal_conv_step(st.conv.data() + ch * K, lw.conv.row(ch), K, mixed.row(t)[ch]));
    const double* qs = conv_out.data();                // [nk][dk]
    const double* ks = conv_out.data() + nk * dk;      // [nk][dk]
    const double* vs = conv_out.data() + 2 * nk * dk;  // [nv][dv]

    for (int64_t h = 0; h < nv; ++h) {
      // Value head h uses key head h / (nv / nk) (repeat_interleave, not tile).
      const int64_t kh = h / (nv / nk);
      std::copy(qs + kh * dk, qs + (kh + 1) * dk, q.begin());
      std::copy(ks + kh * dk, ks + (kh + 1) * dk, k.begin());
      ref::l2_normalize(q.data(), dk, 1e-6);
      ref::l2_normalize(k.data(), dk, 1e-6);
      for (auto& e : q) e /= std::sqrt(double(dk));

      const double beta = ref::sigmoid(b.row(t)[h]);
      const double decay = ref::delta_decay(-std::exp(lw.A_log[size_t(h)]), a.row(t)[h], lw.dt_bias[size_t(h)]);
      double* o = core.row(t) + h * dv;
      ref::delta_rule_step(st.recurrent.data() + h * dk * dv, q.data(), k.data(), vs + h * dv, beta, decay, dk, dv, o);
      ref::gated_rms_norm(o, z.row(t) + h * dv, lw.norm.data(), dv, c.rms_norm_eps);
    }
  }
  observe_input(observe, w.prefix + "linear_attn.", {"out_proj"}, core);
  return linear(core, lw.out_proj);  // [T][hidden]
}

// SwiGLU MLP: down(silu(gate(x)) * up(x)).
Matrix64 ReferenceModel::mlp(const LayerWeights& w, const Matrix64& x, const LinearInputObserver* observe) const {
  observe_input(observe, w.prefix + "mlp.", {"gate_proj", "up_proj"}, x);
  Matrix64 g = linear(x, w.mlp.gate_proj), u = linear(x, w.mlp.up_proj);  // [T][intermediate]
  for (size_t i = 0; i < g.data.size(); ++i) g.data[i] = ref::silu(g.data[i]) * u.data[i];
  observe_input(observe, w.prefix + "mlp.", {"down_proj"}, g);
  return linear(g, w.mlp.down_proj);  // [T][hidden]
}

// The MoE block, in Hugging Face's order: router logits, softmax over all
// experts, the k most probable (ties: lower id), their probabilities
// renormalised to sum to 1; each chosen expert's SwiGLU output times its
// weight, summed in ascending expert id; plus the shared expert scaled by
// sigmoid(shared_expert_gate . x).
Matrix64 ReferenceModel::moe(const LayerWeights& w, const Matrix64& x, const LinearInputObserver* observe,
                             RouterTrace* routing) const {
  const ModelConfig& c = cfg_;
  const int64_t T = x.rows, H = x.cols, E = c.num_experts, k = c.num_experts_per_tok;
  const MoeWeights& mw = w.moe;
  observe_input(observe, w.prefix + "mlp.", {"gate", "shared_expert.gate_proj", "shared_expert.up_proj",
                                            "shared_expert_gate"}, x);
  Matrix64 logits = linear(x, mw.router);  // [T][E]
  Matrix64 out(T, H);
  std::vector<int64_t> chosen_all;
  std::vector<double> weights_all;
  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> p(logits.row(t), logits.row(t) + E);
    ref::softmax(p.data(), E);
    std::vector<int64_t> order(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e) order[size_t(e)] = e;
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[size_t(a)] > p[size_t(b)]; });
    order.resize(size_t(k));
    double sum = 0;
    for (int64_t e : order) sum += p[size_t(e)];
    std::vector<std::pair<int64_t, double>> picked;  // (expert, weight)
    for (int64_t e : order) {
      picked.push_back({e, p[size_t(e)] / sum});
      chosen_all.push_back(e);
      weights_all.push_back(p[size_t(e)] / sum);
    }
    std::sort(picked.begin(), picked.end());  // ascending expert id, as HF accumulates
    Matrix64 xt(1, H);
    std::copy(x.row(t), x.row(t) + H, xt.row(0));
    for (const auto& [e, weight] : picked) {
      const ExpertWeights& ew = mw.experts[size_t(e)];
      Matrix64 g = linear(xt, ew.gate_proj), u = linear(xt, ew.up_proj);
      for (size_t i = 0; i < g.data.size(); ++i) g.data[i] = ref::silu(g.data[i]) * u.data[i];
      Matrix64 y = linear(g, ew.down_proj);
      for (int64_t o = 0; o < H; ++o) out.row(t)[o] += weight * y.row(0)[o];
    }
  }
  Matrix64 sg = linear(x, mw.shared.gate_proj), su = linear(x, mw.shared.up_proj);
  for (size_t i = 0; i < sg.data.size(); ++i) sg.data[i] = ref::silu(sg.data[i]) * su.data[i];
  observe_input(observe, w.prefix + "mlp.", {"shared_expert.down_proj"}, sg);
  Matrix64 shared = linear(sg, mw.shared.down_proj);
  Matrix64 gate = linear(x, mw.shared_gate);  // [T][1]
  for (int64_t t = 0; t < T; ++t)
    for (int64_t o = 0; o < H; ++o) out.row(t)[o] += ref::sigmoid(gate.row(t)[0]) * shared.row(t)[o];
  if (routing) *routing = RouterTrace{std::move(logits), std::move(chosen_all), std::move(weights_all)};
  return out;
}

// ---- the model -----------------------------------------------------------------------------

Matrix64 ReferenceModel::forward(const std::vector<int64_t>& ids, ReferenceState& state,
                                 ReferenceTrace* trace) const {
  Matrix64 h = embed(ids);
  if (trace) trace->hidden.assign(1, h);
  run_layers(0, h, state, trace);
  return logits_of(h, trace);
}

Matrix64 ReferenceModel::forward_embeds(const Matrix64& embeds, const MropePositions& pos, ReferenceState& state,
                                        ReferenceTrace* trace) const {
  if (embeds.cols != cfg_.hidden_size || int64_t(embeds.data.size()) != embeds.rows * embeds.cols)
    fail("reference", "input embeddings are " + std::to_string(embeds.cols) + " wide, the model's hidden size is " +
                          std::to_string(cfg_.hidden_size));
  if (pos.size() != embeds.rows || int64_t(pos.h.size()) != embeds.rows || int64_t(pos.w.size()) != embeds.rows)
    fail("reference", std::to_string(pos.size()) + " rotary positions for " + std::to_string(embeds.rows) +
                          " input embeddings");
  Matrix64 h = embeds;
  if (trace) trace->hidden.assign(1, h);
  run_layers_at(0, cfg_.num_hidden_layers, h, state, pos, trace);
  state.rope_delta += pos.rope_delta;
  return logits_of(h, trace);
}

Matrix64 ReferenceModel::logits_of(const Matrix64& h, ReferenceTrace* trace) const {
  Matrix64 normed = final_norm(h);
  if (trace && trace->linear_inputs) trace->linear_inputs({lm_head_name_}, normed);
  return linear(normed, logits_weight());
}

Matrix64 ReferenceModel::embed(const std::vector<int64_t>& ids) const {
  const ModelConfig& c = cfg_;
  const int64_t T = int64_t(ids.size()), H = c.hidden_size;
  for (int64_t id : ids)
    if (id < 0 || id >= c.vocab_size)
      fail("reference", "token id " + std::to_string(id) + " outside the vocabulary [0, " +
                            std::to_string(c.vocab_size) + ")");
  // Embedding lookup, no scaling.
  Matrix64 h(T, H);
  if (streamed_from_) {  // the rows straight from the checkpoint's mapping
    const TensorInfo& e = streamed_from_->info("embed_tokens.weight");
    const size_t row_bytes = size_t(H) * dtype_size(e.dtype);
    for (int64_t t = 0; t < T; ++t) convert_to_f64(e.dtype, e.data + size_t(ids[size_t(t)]) * row_bytes, size_t(H), h.row(t));
    return h;
  }
  for (int64_t t = 0; t < T; ++t) std::copy(embed_.row(ids[size_t(t)]), embed_.row(ids[size_t(t)]) + H, h.row(t));
  return h;
}

Matrix64 ReferenceModel::embed_with_images(const std::vector<int64_t>& ids, const Matrix64& image_features) const {
  const int64_t H = cfg_.hidden_size;
  Matrix64 h = embed(ids);
  const int64_t pads = cfg_.image_token_id < 0 ? 0 : std::count(ids.begin(), ids.end(), cfg_.image_token_id);
  if (pads != image_features.rows)
    fail("reference", "the ids hold " + std::to_string(pads) + " image tokens (id " +
                          std::to_string(cfg_.image_token_id) + ") for " + std::to_string(image_features.rows) +
                          " image feature rows");
  if (image_features.rows > 0 && image_features.cols != H)
    fail("reference", "image features are " + std::to_string(image_features.cols) +
                          " wide, the model's hidden size is " + std::to_string(H));
  // The k-th image token, in sequence order, takes feature row k.
  int64_t k = 0;
  for (int64_t t = 0; t < h.rows; ++t)
    if (ids[size_t(t)] == cfg_.image_token_id) {
      std::copy(image_features.row(k), image_features.row(k) + H, h.row(t));
      ++k;
    }
  return h;
}

void ReferenceModel::run_layers(int64_t first, Matrix64& h, ReferenceState& state, ReferenceTrace* trace) const {
  run_layers(first, cfg_.num_hidden_layers, h, state, trace);
}

void ReferenceModel::run_layers(int64_t first, int64_t end, Matrix64& h, ReferenceState& state,
                                ReferenceTrace* trace) const {
  // Text: every token's three rotary positions are its index plus the delta.
  run_layers_at(first, end, h, state, text_positions(state.position + state.rope_delta, h.rows), trace);
}

void ReferenceModel::run_layers_at(int64_t first, int64_t end, Matrix64& h, ReferenceState& state,
                                   const MropePositions& pos, ReferenceTrace* trace) const {
  const ModelConfig& c = cfg_;
  if (int64_t(state.kv.size()) != c.num_hidden_layers || int64_t(state.deltanet.size()) != c.num_hidden_layers)
    fail("reference", "state does not belong to this model (use new_state())");
  if (first < 0 || first > end || end > c.num_hidden_layers || h.cols != c.hidden_size)
    throw std::logic_error("run_layers: layer or width out of range");
  const LinearInputObserver* observe = trace ? &trace->linear_inputs : nullptr;
  for (int64_t i = first; i < end; ++i) {
    if (!loaded_[size_t(i)]) fail("reference", "layer " + std::to_string(i) + " is not loaded (streamed model)");
    RouterTrace* routing = nullptr;
    if (trace && c.is_moe()) {
      trace->routing.resize(size_t(c.num_hidden_layers));
      routing = &trace->routing[size_t(i)];
    }
    run_layer(layers_[size_t(i)], h, pos, &state.kv[size_t(i)], &state.deltanet[size_t(i)], observe, routing);
    if (trace) trace->hidden.push_back(h);
  }
  if (end == c.num_hidden_layers) state.position += h.rows;
}

// One pre-norm residual block over h (updated in place): x += mixer(norm(x));
// x += mlp(norm(x)). The mixer reads and extends `kv` (full attention) or
// `deltanet` (linear).
void ReferenceModel::run_layer(const LayerWeights& w, Matrix64& h, const MropePositions& pos, KvCache* kv,
                               DeltaNetState* deltanet, const LinearInputObserver* observe,
                               RouterTrace* routing) const {
  const ModelConfig& c = cfg_;
  Matrix64 normed = rms_norm_rows(h, w.input_norm, c.rms_norm_eps);
  Matrix64 mixed = w.full ? full_attention(w, normed, pos, *kv, observe) : gated_delta_net(w, normed, *deltanet, observe);
  for (size_t e = 0; e < h.data.size(); ++e) h.data[e] += mixed.data[e];
  Matrix64 post = rms_norm_rows(h, w.post_norm, c.rms_norm_eps);
  Matrix64 m = c.is_moe() ? moe(w, post, observe, routing) : mlp(w, post, observe);
  for (size_t e = 0; e < h.data.size(); ++e) h.data[e] += m.data[e];
}

// ---- the multi-token-prediction head ---------------------------------------------------------

ReferenceMtpState ReferenceModel::new_mtp_state() const {
  if (!mtp_) fail("reference", "the checkpoint has no multi-token-prediction head (mtp.*)");
  ReferenceMtpState s;
  s.kv.assign(mtp_->layers.size(), empty_kv_cache(cfg_.num_key_value_heads));
  return s;
}

Matrix64 ReferenceModel::mtp_forward(const std::vector<int64_t>& next_ids, const Matrix64& hidden,
                                     ReferenceMtpState& state, Matrix64* hm) const {
  if (!mtp_) fail("reference", "the checkpoint has no multi-token-prediction head (mtp.*)");
  const ModelConfig& c = cfg_;
  const int64_t T = int64_t(next_ids.size()), H = c.hidden_size;
  if (hidden.rows != T || hidden.cols != H)
    fail("reference", "the head takes one hidden row of width " + std::to_string(H) + " per token: got [" +
                          std::to_string(hidden.rows) + "][" + std::to_string(hidden.cols) + "] for " +
                          std::to_string(T) + " tokens");
  if (state.kv.size() != mtp_->layers.size()) fail("reference", "state does not belong to this head (use new_mtp_state())");
  // x = fc([norm(embed(t_{i+1})) | norm(h_i)]): the embedding first.
  const Matrix64 e = rms_norm_rows(embed(next_ids), mtp_->norm_embedding, c.rms_norm_eps);
  const Matrix64 g = rms_norm_rows(hidden, mtp_->norm_hidden, c.rms_norm_eps);
  Matrix64 both(T, 2 * H);
  for (int64_t t = 0; t < T; ++t) {
    std::copy(e.row(t), e.row(t) + H, both.row(t));
    std::copy(g.row(t), g.row(t) + H, both.row(t) + H);
  }
  Matrix64 x = linear(both, mtp_->fc);
  // The head's layers at the hidden rows' own positions, with their own caches.
  const MropePositions pos = text_positions(state.position, T);
  for (size_t l = 0; l < mtp_->layers.size(); ++l) run_layer(mtp_->layers[l], x, pos, &state.kv[l], nullptr, nullptr, nullptr);
  state.position += T;
  Matrix64 normed = rms_norm_rows(x, mtp_->norm, c.rms_norm_eps);
  Matrix64 logits = linear(normed, logits_weight());  // the model's own lm_head
  if (hm) *hm = std::move(normed);
  return logits;
}

Matrix64 ReferenceModel::final_norm(const Matrix64& h) const {
  return rms_norm_rows(h, final_norm_, cfg_.rms_norm_eps);
}

Matrix64& ReferenceModel::linear_weight(const std::string& tensor) {
  if (tensor == lm_head_name_) return lm_head_.rows ? lm_head_ : embed_;
  for (LayerWeights& w : layers_) {
    if (tensor.rfind(w.prefix, 0) != 0) continue;
    const std::string rest = tensor.substr(w.prefix.size());
    if (!cfg_.is_moe()) {
      if (rest == "mlp.gate_proj.weight") return w.mlp.gate_proj;
      if (rest == "mlp.up_proj.weight") return w.mlp.up_proj;
      if (rest == "mlp.down_proj.weight") return w.mlp.down_proj;
    }
    if (w.full) {
      if (rest == "self_attn.q_proj.weight") return w.attn.q_proj;
      if (rest == "self_attn.k_proj.weight") return w.attn.k_proj;
      if (rest == "self_attn.v_proj.weight") return w.attn.v_proj;
      if (rest == "self_attn.o_proj.weight") return w.attn.o_proj;
    } else {
      if (rest == "linear_attn.in_proj_qkv.weight") return w.lin.in_proj_qkv;
      if (rest == "linear_attn.in_proj_z.weight") return w.lin.in_proj_z;
      if (rest == "linear_attn.in_proj_b.weight") return w.lin.in_proj_b;
      if (rest == "linear_attn.in_proj_a.weight") return w.lin.in_proj_a;
      if (rest == "linear_attn.out_proj.weight") return w.lin.out_proj;
    }
  }
  fail(tensor, "is not a Linear weight of the reference model");
}

std::vector<std::string> ReferenceModel::linear_weight_names() const {
  std::vector<std::string> names;
  for (const LayerWeights& w : layers_) {
    const std::vector<std::string> mixer =
        w.full ? std::vector<std::string>{"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj"}
               : std::vector<std::string>{"linear_attn.in_proj_qkv", "linear_attn.in_proj_z", "linear_attn.in_proj_b",
                                          "linear_attn.in_proj_a", "linear_attn.out_proj"};
    for (const std::string& m : mixer) names.push_back(w.prefix + m + ".weight");
    if (!cfg_.is_moe())
      for (const char* m : {"mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"}) names.push_back(w.prefix + m + ".weight");
  }
  names.push_back(lm_head_name_);
  return names;
}

// ---- state access for tests ------------------------------------------------------------------

const std::vector<double>& ReferenceModel::conv_state(const ReferenceState& s, int64_t layer) const {
  if (layer < 0 || layer >= cfg_.num_hidden_layers || cfg_.is_full(layer) || size_t(layer) >= s.deltanet.size())
    fail("reference", "layer " + std::to_string(layer) + " is not a linear-attention layer");
  return s.deltanet[size_t(layer)].conv;
}

const std::vector<double>& ReferenceModel::recurrent_state(const ReferenceState& s, int64_t layer) const {
  if (layer < 0 || layer >= cfg_.num_hidden_layers || cfg_.is_full(layer) || size_t(layer) >= s.deltanet.size())
    fail("reference", "layer " + std::to_string(layer) + " is not a linear-attention layer");
  return s.deltanet[size_t(layer)].recurrent;
}

const KvCache& ReferenceModel::kv_cache(const ReferenceState& s, int64_t layer) const {
  if (layer < 0 || layer >= cfg_.num_hidden_layers || !cfg_.is_full(layer) || size_t(layer) >= s.kv.size())
    fail("reference", "layer " + std::to_string(layer) + " is not a full-attention layer");
  return s.kv[size_t(layer)];
}

// ---- greedy generation -------------------------------------------------------------------------

namespace {
int64_t argmax(const double* x, int64_t n) {  // first maximum, like torch.argmax
  return int64_t(std::max_element(x, x + n) - x);
}

// Greedy decoding after a prefill that produced `prefill` [P][V] and left `state`.
GreedyResult greedy_after(const ReferenceModel& model, const Matrix64& prefill, ReferenceState& state,
                          int64_t new_tokens) {
  const int64_t V = model.config().vocab_size, P = prefill.rows;
  GreedyResult r;
  r.logits = Matrix64(P + std::max<int64_t>(new_tokens - 1, 0), V);
  std::copy(prefill.data.begin(), prefill.data.end(), r.logits.data.begin());
  if (new_tokens <= 0) return r;
  r.generated.push_back(argmax(prefill.row(P - 1), V));
  for (int64_t j = 1; j < new_tokens; ++j) {
    Matrix64 step = model.forward({r.generated.back()}, state);  // [1][V]
    std::copy(step.row(0), step.row(0) + V, r.logits.row(P - 1 + j));
    r.generated.push_back(argmax(step.row(0), V));
  }
  return r;
}
}  // namespace

GreedyResult reference_greedy(const ReferenceModel& model, const std::vector<int64_t>& prompt,
                              int64_t new_tokens) {
  if (prompt.empty()) fail("reference", "empty prompt");
  ReferenceState state = model.new_state();
  const Matrix64 prefill = model.forward(prompt, state);
  return greedy_after(model, prefill, state, new_tokens);
}

GreedyResult reference_greedy_with_images(const ReferenceModel& model, const std::vector<int64_t>& ids,
                                          const Matrix64& image_features, const std::vector<ImageGrid>& grids,
                                          int64_t new_tokens) {
  const ModelConfig& c = model.config();
  if (ids.empty()) fail("reference", "empty prompt");
  if (!c.vision) fail("reference", "the model has no vision_config: no images");
  const MropePositions pos = mrope_positions(ids, c.image_token_id, grids, c.vision->spatial_merge_size);
  ReferenceState state = model.new_state();
  const Matrix64 prefill = model.forward_embeds(model.embed_with_images(ids, image_features), pos, state);
  return greedy_after(model, prefill, state, new_tokens);
}

}  // namespace deltagen
