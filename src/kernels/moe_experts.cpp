#include "kernels/moe_experts.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "deltagen/error.h"
#include "kernels/swiglu.h"

namespace deltagen::kernels {
namespace {

const char* const kSubject = "QMoE";

// One FC of one expert: `shape.n` rows of the file's [N, K/2] codes and
// [N, K/block] scales. With `deinterleave` the rows are fc1's (gate 0, up 0,
// gate 1, ...) and are packed as [all gate | all up], the layout swiglu()
// reads; the copy is one expert's rows, freed again after packing.
PackedWeights pack_fc(const uint8_t* codes, const float* scales, const NBitsShape& shape, bool deinterleave,
                      const PackOptions& options) {
  if (!deinterleave) return pack_weights({shape, codes, scales, nullptr}, options);
  const int64_t half = shape.n / 2, row_bytes = shape.k_blocks() * shape.file_block_bytes(), blocks = shape.k_blocks();
  std::vector<uint8_t> rows(size_t(shape.n * row_bytes));
  std::vector<float> row_scales(size_t(shape.n * blocks));
  for (int64_t r = 0; r < shape.n; ++r) {
    const int64_t from = r < half ? 2 * r : 2 * (r - half) + 1;
    std::copy_n(codes + from * row_bytes, row_bytes, rows.begin() + r * row_bytes);
    std::copy_n(scales + from * blocks, blocks, row_scales.begin() + r * blocks);
  }
  return pack_weights({shape, rows.data(), row_scales.data(), nullptr}, options);
}

// Buffers of one call. A decode step reuses one set per thread (nothing is
// allocated per token); a prompt's, which may be MBs, are freed after the call.
struct Scratch {
  std::vector<int64_t> ids, first, cursor, slot_token;
  std::vector<float> weights, slot_weight, gathered, gate_up, activated, out;
};

}  // namespace

void check_moe_shape(const MoeWeightsView& v) {
  const int bs = v.block_size;
  if (bs < 16 || bs > 256 || (bs & (bs - 1)) != 0)
    fail(kSubject, "block_size=" + std::to_string(bs) + " is not a power of two in [16, 256]");
  if (v.experts < 1 || v.hidden < 1 || v.inter < 1 || v.hidden % bs != 0 || v.inter % bs != 0)
    fail(kSubject, "E=" + std::to_string(v.experts) + ", H=" + std::to_string(v.hidden) + ", I=" +
                       std::to_string(v.inter) + ": H and I must be positive multiples of block_size " +
                       std::to_string(bs));
}

int64_t MoeExperts::bytes() const {
  int64_t total = 0;
  for (int64_t e = 0; e < experts(); ++e) total += fc1(e).bytes() + fc2(e).bytes();
  return total;
}

int64_t MoeExperts::bytes_of(std::span<const int64_t> chosen) const {
  int64_t total = 0;
  for (int64_t e : chosen) total += fc1(e).bytes() + fc2(e).bytes();
  return total;
}

MoeExperts pack_moe_experts(const MoeWeightsView& v, const PackOptions& options) {
  check_moe_shape(v);
  if (!v.fc1 || !v.fc1_scales || !v.fc2 || !v.fc2_scales) fail(kSubject, "weights or scales missing");
  const NBitsShape fc1{2 * v.inter, v.hidden, 4, v.block_size};
  const NBitsShape fc2{v.hidden, v.inter, 4, v.block_size};
  const int64_t fc1_bytes = fc1.n * fc1.k / 2, fc1_scales = fc1.n * fc1.k_blocks();
  const int64_t fc2_bytes = fc2.n * fc2.k / 2, fc2_scales = fc2.n * fc2.k_blocks();
  MoeExperts m;
  m.hidden_ = v.hidden;
  m.inter_ = v.inter;
  m.fc1_.reserve(size_t(v.experts));
  m.fc2_.reserve(size_t(v.experts));
  for (int64_t e = 0; e < v.experts; ++e) {
    m.fc1_.push_back(pack_fc(v.fc1 + e * fc1_bytes, v.fc1_scales + e * fc1_scales, fc1, true, options));
    m.fc2_.push_back(pack_fc(v.fc2 + e * fc2_bytes, v.fc2_scales + e * fc2_scales, fc2, false, options));
  }
  return m;
}

void route_top_k(const float* logits, int64_t tokens, int64_t experts, int64_t k, int64_t* ids, float* weights) {
  if (k < 1 || k > experts)
    fail(kSubject, "k=" + std::to_string(k) + " must be in [1, " + std::to_string(experts) + "] (the experts)");
  std::vector<int64_t> order(static_cast<size_t>(experts));
  for (int64_t t = 0; t < tokens; ++t) {
    const float* row = logits + t * experts;
    // NaN as -inf keeps the comparison a strict weak order (partial_sort needs one).
    auto key = [row](int64_t e) { return std::isnan(row[e]) ? -std::numeric_limits<float>::infinity() : row[e]; };
    std::iota(order.begin(), order.end(), int64_t(0));
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
      const float ka = key(a), kb = key(b);
      return ka > kb || (ka == kb && a < b);
    });
    // softmax over the chosen logits = softmax over all of them, renormalised
    // over the chosen (norm_topk_prob); in double, then rounded once. An
    // infinite top logit (the limit of ever larger ones) shares the weight
    // equally among the chosen logits equal to it.
    const double top = key(order[0]);
    double sum = 0;
    for (int64_t j = 0; j < k; ++j) {
      const double d = double(key(order[size_t(j)]));
      sum += std::isinf(top) ? double(d == top) : std::exp(d - top);
    }
    for (int64_t j = 0; j < k; ++j) {
      const int64_t e = order[size_t(j)];
      const double d = double(key(e));
      ids[t * k + j] = e;
      weights[t * k + j] = float((std::isinf(top) ? double(d == top) : std::exp(d - top)) / sum);
    }
  }
}

void moe_forward(const MoeExperts& experts, const float* x, const float* logits, int64_t tokens, int64_t k, float* y,
                 const Parallel& parallel, const MatMulConfig& config) {
  const int64_t E = experts.experts(), H = experts.hidden(), I = experts.inter();
  if (tokens <= 0) return;
  thread_local Scratch decode_scratch;
  Scratch prompt_scratch;
  Scratch& s = tokens <= 4 ? decode_scratch : prompt_scratch;

  s.ids.resize(size_t(tokens * k));
  s.weights.resize(size_t(tokens * k));
  route_top_k(logits, tokens, E, k, s.ids.data(), s.weights.data());

  // The (token, weight) pairs grouped by expert (a counting sort): expert e's
  // are slots [first[e], first[e + 1]), tokens ascending.
  s.first.assign(size_t(E + 1), 0);
  for (int64_t e : s.ids) ++s.first[size_t(e + 1)];
  std::partial_sum(s.first.begin(), s.first.end(), s.first.begin());
  s.slot_token.resize(size_t(tokens * k));
  s.slot_weight.resize(size_t(tokens * k));
  int64_t most = 0;
  for (int64_t e = 0; e < E; ++e) most = std::max(most, s.first[size_t(e + 1)] - s.first[size_t(e)]);
  s.cursor.assign(s.first.begin(), s.first.end() - 1);
  for (int64_t i = 0; i < tokens * k; ++i) {
    const int64_t slot = s.cursor[size_t(s.ids[size_t(i)])]++;
    s.slot_token[size_t(slot)] = i / k;
    s.slot_weight[size_t(slot)] = s.weights[size_t(i)];
  }
  s.gathered.resize(size_t(most * H));
  s.gate_up.resize(size_t(most * 2 * I));
  s.activated.resize(size_t(most * I));
  s.out.resize(size_t(most * H));

  std::fill(y, y + tokens * H, 0.0f);
  // Ascending expert id: every token's sum is added up in Hugging Face's order,
  // whatever the thread count (the matmuls' results do not depend on it).
  for (int64_t e = 0; e < E; ++e) {
    const int64_t begin = s.first[size_t(e)], m = s.first[size_t(e + 1)] - begin;
    if (m == 0) continue;  // not chosen: its bytes are never read
    const int64_t* rows = s.slot_token.data() + begin;
    const float* in = x;  // every token routed here (a decode step's experts): x as it is
    if (m < tokens) {
      for (int64_t i = 0; i < m; ++i) std::copy_n(x + rows[i] * H, H, s.gathered.begin() + i * H);
      in = s.gathered.data();
    }
    matmul_nbits(experts.fc1(e), in, m, nullptr, s.gate_up.data(), parallel, config);
    swiglu(s.gate_up.data(), m, I, s.activated.data(), config.level);
    matmul_nbits(experts.fc2(e), s.activated.data(), m, nullptr, s.out.data(), parallel, config);
    for (int64_t i = 0; i < m; ++i) {
      const float w = s.slot_weight[size_t(begin + i)];
      const float* from = s.out.data() + i * H;
      float* to = y + rows[i] * H;
      for (int64_t h = 0; h < H; ++h) to[h] += w * from[h];
    }
  }
}

}  // namespace deltagen::kernels
