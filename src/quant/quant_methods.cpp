#include "quant/quant_methods.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "deltagen/error.h"
#include "quant/gptq.h"
#include "util/half.h"

namespace deltagen::quant {
namespace {

// One block's fitted parameters: w ~= (q - zero_point) * scale.
struct BlockFit {
  float scale = 0.0f;
  int zero_point = 0;
};

int encode(float w, const BlockFit& b, int max_code) {
  const float q = b.scale != 0.0f ? std::nearbyint(w / b.scale) + float(b.zero_point) : float(b.zero_point);
  return int(std::clamp(q, 0.0f, float(max_code)));
}

float decode(int q, const BlockFit& b) { return float(q - b.zero_point) * b.scale; }

double block_error(const float* w, const double* importance, int64_t n, const BlockFit& b, int max_code) {
  double err = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = double(w[i]) - double(decode(encode(w[i], b, max_code), b));
    err += (importance ? importance[i] : 1.0) * d * d;
  }
  return err;
}

// Clip factors tried by `search`: RTN's range (1.0) first, so that a tie keeps RTN.
constexpr float kSymmetricClips[] = {1.0f, 0.95f, 0.9f, 0.85f, 0.8f, 0.75f, 0.7f, 0.65f, 0.6f};
constexpr float kAsymmetricClips[] = {1.0f, 0.95f, 0.9f, 0.85f, 0.8f, 0.75f, 0.7f, 0.6f};

// The scale (and zero point) of least weighted squared error over the
// candidates. w: n values (a padded block holds zeros of importance 0).
BlockFit search_block(const float* w, const double* importance, int64_t n, const BlockFormat& f, ScaleStorage st) {
  const int max_code = f.max_code();
  BlockFit best;
  double best_err = INFINITY;
  auto consider = [&](const BlockFit& candidate) {
    const double err = block_error(w, importance, n, candidate, max_code);
    if (err < best_err) {
      best_err = err;
      best = candidate;
    }
  };
  if (f.symmetric) {
    const int half = f.implicit_zero_point();
    float largest = 0.0f;
    for (int64_t i = 0; i < n; ++i)
      if (std::fabs(w[i]) > std::fabs(largest)) largest = w[i];
    if (largest == 0.0f) return {0.0f, half};
    // The largest magnitude at the wide end of the code range (RTN: -2^(b-1)),
    // or at the narrow end (2^(b-1) - 1), each clipped.
    for (float clip : kSymmetricClips) {
      consider({stored_scale(largest / float(-half) * clip, st), half});
      consider({stored_scale(largest / float(half - 1) * clip, st), half});
    }
    return best;
  }
  float lo = 0.0f, hi = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    lo = std::min(lo, w[i]);
    hi = std::max(hi, w[i]);
  }
  if (hi == lo) return {0.0f, 0};
  for (float clip_lo : kAsymmetricClips)
    for (float clip_hi : kAsymmetricClips) {
      const float l = lo * clip_lo, h = hi * clip_hi;
      BlockFit c;
      c.scale = stored_scale((h - l) / float(max_code), st);
      if (c.scale == 0.0f) continue;
      c.zero_point = int(std::clamp(std::nearbyint(-l / c.scale), 0.0f, float(max_code)));
      consider(c);
    }
  return best;
}

// One row fitted block by block with `search`.
void search_row(float* row, int64_t k, const BlockFormat& f, const double* importance, ScaleStorage st,
                uint8_t* codes, float* scales, uint8_t* zero_points) {
  const int64_t bs = f.block_size;
  std::vector<float> block(static_cast<size_t>(bs));
  std::vector<double> weights(static_cast<size_t>(bs));
  for (int64_t b = 0; b < f.blocks_per_row(k); ++b) {
    const int64_t begin = b * bs, n = std::min(bs, k - begin);
    std::fill(block.begin(), block.end(), 0.0f);
    std::copy(row + begin, row + begin + n, block.begin());
    std::fill(weights.begin(), weights.end(), 0.0);
    for (int64_t i = 0; i < n; ++i) weights[size_t(i)] = importance ? importance[begin + i] : 1.0;
    const BlockFit fit = search_block(block.data(), weights.data(), bs, f, st);
    for (int64_t i = 0; i < bs; ++i) codes[b * bs + i] = uint8_t(encode(block[size_t(i)], fit, f.max_code()));
    scales[b] = fit.scale;
    zero_points[b] = uint8_t(fit.zero_point);
  }
}

// One row with GPTQ's error feedback (gptq.h has U, the factor of H^-1).
void gptq_row(float* row, int64_t k, const BlockFormat& f, const GptqFactor& h, ScaleStorage st, uint8_t* codes,
              float* scales, uint8_t* zero_points) {
  const int64_t bs = f.block_size;
  std::vector<float> block(static_cast<size_t>(bs));
  std::vector<double> weights(static_cast<size_t>(bs));
  for (int64_t b = 0; b < f.blocks_per_row(k); ++b) {
    const int64_t begin = b * bs, n = std::min(bs, k - begin);
    // The block's scale from its values as updated by the columns before it.
    std::fill(block.begin(), block.end(), 0.0f);
    std::copy(row + begin, row + begin + n, block.begin());
    std::fill(weights.begin(), weights.end(), 0.0);
    for (int64_t i = 0; i < n; ++i) weights[size_t(i)] = h.importance[size_t(begin + i)];
    const BlockFit fit = search_block(block.data(), weights.data(), bs, f, st);
    scales[b] = fit.scale;
    zero_points[b] = uint8_t(fit.zero_point);
    for (int64_t i = n; i < bs; ++i) codes[b * bs + i] = uint8_t(encode(0.0f, fit, f.max_code()));
    for (int64_t j = begin; j < begin + n; ++j) {
      const int q = encode(row[j], fit, f.max_code());
      codes[j] = uint8_t(q);
      const float* u = h.row(j);  // U[j][j..k)
      const float e = (row[j] - decode(q, fit)) / u[0];
      float* rest = row + j + 1;
      const float* u_rest = u + 1;
      const int64_t m = k - j - 1;
      for (int64_t c = 0; c < m; ++c) rest[c] -= e * u_rest[c];
    }
  }
}

}  // namespace

const char* quant_method_name(QuantMethod method) {
  switch (method) {
    case QuantMethod::Rtn: return "rtn";
    case QuantMethod::Search: return "search";
    case QuantMethod::Gptq: return "gptq";
    case QuantMethod::Awq: return "awq";
  }
  return "?";
}

std::optional<QuantMethod> parse_quant_method(std::string_view text) {
  for (QuantMethod m : {QuantMethod::Rtn, QuantMethod::Search, QuantMethod::Gptq, QuantMethod::Awq})
    if (text == quant_method_name(m)) return m;
  return std::nullopt;
}

bool needs_calibration(QuantMethod method) { return method == QuantMethod::Gptq; }

void check_quant_method(QuantMethod method) {
  if (method == QuantMethod::Awq)
    fail("--quant-method", "awq is not implemented; use gptq (calibrated, error feedback) or search");
}

InputStats::InputStats(int64_t channels, bool full_gram) : k(channels), diag(size_t(channels), 0.0) {
  if (full_gram) gram.assign(size_t(channels * channels), 0.0);
}

void InputStats::add(const double* x, int64_t count) {
  for (int64_t t = 0; t < count; ++t) {
    const double* v = x + t * k;
    for (int64_t i = 0; i < k; ++i) diag[size_t(i)] += v[i] * v[i];
    if (full()) {
      // The lower triangle only (mirrored in gptq.cpp): row i += v[i] * v[0..i].
      for (int64_t i = 0; i < k; ++i) {
        double* g = gram.data() + i * k;
        const double vi = v[i];
        for (int64_t j = 0; j <= i; ++j) g[j] += vi * v[j];
      }
    }
  }
  tokens += count;
}

std::vector<double> InputStats::importance() const {
  std::vector<double> out(diag);
  if (tokens > 0)
    for (double& d : out) d /= double(tokens);
  return out;
}

float stored_scale(float scale, ScaleStorage storage) {
  switch (storage) {
    case ScaleStorage::F32: return scale;
    case ScaleStorage::F16: return f16_to_f32(f32_to_f16(scale));
    case ScaleStorage::BF16: return bf16_to_f32(f32_to_bf16(scale));
  }
  return scale;
}

QuantizedMatrix quantize_matrix(int64_t rows, int64_t cols, const BlockFormat& format, const FitOptions& fit,
                                const RowSource& source, int threads, const RowsDone& rows_done) {
  check_block_format(format);
  check_quant_method(fit.method);
  if (fit.stats && fit.stats->k != cols)
    throw std::logic_error("quantize_matrix: statistics of " + std::to_string(fit.stats->k) + " channels for " +
                           std::to_string(cols) + " columns");
  switch (fit.method) {
    case QuantMethod::Rtn: return quantize_matrix(rows, cols, format, source, threads, rows_done);
    case QuantMethod::Search: {
      const std::vector<double> importance = fit.stats ? fit.stats->importance() : std::vector<double>{};
      const double* imp = importance.empty() ? nullptr : importance.data();
      return quantize_matrix(rows, cols, format, source, threads, rows_done,
                             [&](float* row, uint8_t* codes, float* scales, uint8_t* zero_points) {
                               search_row(row, cols, format, imp, fit.scales, codes, scales, zero_points);
                             });
    }
    case QuantMethod::Gptq: {
      if (!fit.stats || !fit.stats->full() || fit.stats->tokens == 0)
        fail("--quant-method", "gptq needs calibration statistics (--calibration TEXT_FILE)");
      const GptqFactor h = gptq_factor(*fit.stats, fit.damp);
      return quantize_matrix(rows, cols, format, source, threads, rows_done,
                             [&](float* row, uint8_t* codes, float* scales, uint8_t* zero_points) {
                               gptq_row(row, cols, format, h, fit.scales, codes, scales, zero_points);
                             });
    }
    case QuantMethod::Awq: break;
  }
  throw std::logic_error("quantize_matrix: unknown method");
}

double weighted_error(const std::vector<float>& w, const QuantizedMatrix& q, const std::vector<double>& importance) {
  const std::vector<float> d = dequantize_matrix(q);
  double err = 0;
  for (int64_t r = 0; r < q.rows; ++r)
    for (int64_t c = 0; c < q.cols; ++c) {
      const double e = double(w[size_t(r * q.cols + c)]) - double(d[size_t(r * q.cols + c)]);
      err += importance[size_t(c)] * e * e;
    }
  return err;
}

double output_error(const std::vector<float>& w, const QuantizedMatrix& q, const InputStats& stats) {
  if (!stats.full() || stats.k != q.cols) throw std::logic_error("output_error: needs full statistics of the width");
  const std::vector<float> d = dequantize_matrix(q);
  const int64_t k = q.cols;
  std::vector<double> e(static_cast<size_t>(k));
  double err = 0;
  for (int64_t r = 0; r < q.rows; ++r) {
    for (int64_t c = 0; c < k; ++c) e[size_t(c)] = double(w[size_t(r * k + c)]) - double(d[size_t(r * k + c)]);
    // e^T G e from the lower triangle of G.
    for (int64_t i = 0; i < k; ++i) {
      const double* g = stats.gram.data() + i * k;
      double s = 0;
      for (int64_t j = 0; j < i; ++j) s += g[j] * e[size_t(j)];
      err += e[size_t(i)] * (2 * s + g[i] * e[size_t(i)]);
    }
  }
  return stats.tokens > 0 ? err / double(stats.tokens) : err;
}

}  // namespace deltagen::quant
