#include "models/streamed_calibration.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "kernels/gemm_f32.h"

namespace deltagen {
namespace {

// One site's sums over the windows: the Gram matrix's lower triangle in
// fp32 (accumulated in place by the GEMM), the diagonal in float64.
struct SiteSums {
  std::vector<std::string> weights;
  int64_t k = 0;
  std::vector<float> gram;   // [k][k], lower triangle; empty for diagonal-only statistics
  quant::InputStats summary;  // tokens and diagonal
  std::vector<float> xt;      // x^T of the window, kept between windows

  SiteSums(std::vector<std::string> w, int64_t channels, bool full)
      : weights(std::move(w)), k(channels), summary(channels, false) {
    if (full) gram.assign(size_t(k * k), 0.0f);
  }

  void add(const Matrix64& x) {
    summary.add(x.data.data(), x.rows);  // the diagonal and the token count, in float64
    if (gram.empty()) return;
    // G += x^T x: the GEMM of x^T [k][T] with itself, rows against rows.
    xt.resize(size_t(k * x.rows));
    for (int64_t t = 0; t < x.rows; ++t)
      for (int64_t i = 0; i < k; ++i) xt[size_t(i * x.rows + t)] = float(x.row(t)[i]);
    kernels::GemmShape shape{k, k, x.rows};
    shape.lower = true;
    kernels::gemm_nt_f32(xt.data(), xt.data(), gram.data(), shape, true, 0);
  }
};

// The sites of one layer (or of the lm_head), in the order the reference reads them.
class LayerSites {
 public:
  explicit LayerSites(bool full) : full_(full) {}

  LinearInputObserver observer() {
    return [this](const std::vector<std::string>& weights, const Matrix64& x) {
      auto it = std::find_if(sums_.begin(), sums_.end(), [&](const SiteSums& s) { return s.weights == weights; });
      if (it == sums_.end()) {
        sums_.emplace_back(weights, x.cols, full_);
        it = sums_.end() - 1;
      }
      it->add(x);
    };
  }

  // Moves the sums into `cal`: the Gram matrices to disk.
  void finish(Calibration& cal) {
    for (SiteSums& s : sums_) {
      CalibrationSite site{s.weights, std::make_shared<quant::InputStats>(s.summary), nullptr};
      if (!s.gram.empty()) site.spilled = std::make_shared<const SpilledGram>(s.gram, s.k);
      cal.sites.push_back(std::move(site));
    }
    sums_.clear();
  }

 private:
  bool full_;
  std::vector<SiteSums> sums_;
};

// While alive, malloc keeps blocks up to 32 MB in its heap (and does not
// trim it) instead of mapping and unmapping each: a fresh mapping faults in
// and zeroes every page, which took more time than the products.
struct HeapForLargeBuffers {
  HeapForLargeBuffers() {
    ::mallopt(M_MMAP_THRESHOLD, 32 << 20);  // the most glibc accepts on 64-bit
    ::mallopt(M_TRIM_THRESHOLD, 1 << 30);
  }
  ~HeapForLargeBuffers() {
    ::mallopt(M_MMAP_THRESHOLD, 128 * 1024);  // glibc's defaults
    ::mallopt(M_TRIM_THRESHOLD, 128 * 1024);
    ::malloc_trim(0);
  }
};

}  // namespace

Calibration calibrate_streamed(const Checkpoint& ckpt, const std::vector<int64_t>& ids, const CalibrationOptions& o) {
  if (o.window <= 0 || o.max_tokens <= 0)
    throw std::logic_error("calibrate_streamed: window and max_tokens must be positive");
  ReferenceModel model(ckpt, {.streamed = true, .fp32_linear = true});
  // The layer math allocates and frees buffers of megabytes per call; kept
  // in the heap instead of fresh mappings, they cost no page faults.
  HeapForLargeBuffers heap;
  const ModelConfig& c = model.config();
  Calibration cal;
  const int64_t total = std::min<int64_t>(o.max_tokens, int64_t(ids.size()));
  cal.tokens = total;

  // The windows' residual streams, carried from layer to layer.
  std::vector<Matrix64> streams;
  for (int64_t begin = 0; begin < total; begin += o.window)
    streams.push_back(model.embed(
        std::vector<int64_t>(ids.begin() + begin, ids.begin() + std::min(total, begin + o.window))));

  const bool show = o.progress && ::isatty(STDERR_FILENO);
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    if (show) std::fprintf(stderr, "\rcalibrating: layer %lld / %lld", (long long)layer + 1, (long long)c.num_hidden_layers);
    model.load_layer(layer);
    LayerSites sites(o.full_gram);
    ReferenceTrace trace;
    trace.linear_inputs = sites.observer();
    for (Matrix64& h : streams) {
      ReferenceState state = model.new_state();  // each window from an empty state
      model.run_layers(layer, layer + 1, h, state, &trace);
      trace.hidden.clear();
    }
    model.release_layer(layer);
    sites.finish(cal);
  }
  // The lm_head's input: the final norm of the last residual stream.
  LayerSites head(o.full_gram);
  const LinearInputObserver observe = head.observer();
  for (const Matrix64& h : streams) observe({model.lm_head_name()}, model.final_norm(h));
  head.finish(cal);
  if (show) std::fputc('\n', stderr);
  return cal;
}

namespace {

// The reference's values of layer i's weights (ReferenceModel::load_layer).
int64_t layer_weight_count(const ModelConfig& c, int64_t i) {
  const int64_t H = c.hidden_size;
  int64_t n = 2 * H;  // the two norms
  if (c.is_full(i)) {
    n += (2 * c.num_attention_heads + 2 * c.num_key_value_heads) * c.head_dim * H +
         H * c.num_attention_heads * c.head_dim;
  } else {
    n += (c.conv_dim() + 2 * c.linear_value_dim() + 2 * c.linear_num_value_heads) * H +
         c.conv_dim() * c.linear_conv_kernel_dim;
  }
  n += c.is_moe() ? (c.num_experts + 1) * H + 3 * c.num_experts * c.moe_intermediate_size * H +
                        3 * c.shared_expert_intermediate_size * H
                  : 3 * c.intermediate_size * H;
  return n;
}

int64_t ffn_width(const ModelConfig& c) {
  return c.is_moe() ? std::max(c.moe_intermediate_size, c.shared_expert_intermediate_size) : c.intermediate_size;
}

// Entries of layer i's Gram matrices (the sites' inputs: the mixer's input,
// its output projection's, the MLP's, its down projection's).
int64_t layer_gram_entries(const ModelConfig& c, int64_t i) {
  const int64_t H = c.hidden_size, mixer_out = c.is_full(i) ? c.num_attention_heads * c.head_dim : c.linear_value_dim();
  return 2 * H * H + mixer_out * mixer_out + ffn_width(c) * ffn_width(c);
}

// One window's working memory: one fp32 copy of the largest weight and its
// input while a product runs, a few float64 intermediates, x^T for the Gram,
// and an empty state of every layer (ReferenceModel::new_state).
int64_t window_bytes(const ModelConfig& c, int64_t T) {
  const int64_t H = c.hidden_size, ffn = ffn_width(c);
  const int64_t widest_in = std::max({H, ffn, c.linear_value_dim(), c.num_attention_heads * c.head_dim});
  const int64_t widest_out =
      std::max({2 * ffn, c.conv_dim(), 2 * c.num_attention_heads * c.head_dim, c.is_moe() ? c.num_experts : 0});
  const int64_t product = 4 * (widest_out * widest_in + T * (widest_in + widest_out));
  const int64_t states = 8 * c.num_hidden_layers *
                         (c.linear_num_value_heads * c.linear_key_head_dim * c.linear_value_head_dim +
                          c.conv_dim() * c.linear_conv_kernel_dim);
  return product + 8 * 6 * T * widest_out + 4 * T * widest_in + states;
}

}  // namespace

int64_t streamed_calibration_bytes(const ModelConfig& c, int64_t tokens, const CalibrationOptions& o) {
  int64_t layer = 0;  // the largest layer's float64 weights and fp32 Gram matrices
  for (int64_t i = 0; i < c.num_hidden_layers; ++i)
    layer = std::max(layer, 8 * layer_weight_count(c, i) + (o.full_gram ? 4 * layer_gram_entries(c, i) : 0));
  // The windows' residual streams, carried from layer to layer.
  return layer + 8 * tokens * c.hidden_size + window_bytes(c, std::min(tokens, o.window));
}

int64_t resident_calibration_bytes(const ModelConfig& c, int64_t tokens, const CalibrationOptions& o) {
  int64_t values = c.vocab_size * c.hidden_size * (c.tie_word_embeddings ? 1 : 2);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i)
    values += layer_weight_count(c, i) + (o.full_gram ? layer_gram_entries(c, i) : 0);
  if (o.full_gram) values += c.hidden_size * c.hidden_size;  // the lm_head's
  return 8 * values + 8 * tokens * c.hidden_size + window_bytes(c, std::min(tokens, o.window));
}

}  // namespace deltagen
