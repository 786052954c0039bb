#include "quant/quant_methods.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "deltagen/error.h"
#include "kernels/gemm_f32.h"
#include "quant/gptq.h"
#include "quant/parallel.h"
#include "util/half.h"

namespace deltagen::quant {
namespace {

// One block's fitted parameters: w ~= (q - zero_point) * scale.
struct BlockFit {
  float scale = 0.0f;
  int zero_point = 0;
  float inverse = 0.0f;  // 1 / scale (0 when the scale is): a multiply per value, not a divide
};

BlockFit block_fit(float scale, int zero_point) { return {scale, zero_point, scale != 0.0f ? 1.0f / scale : 0.0f}; }

int encode(float w, const BlockFit& b, int max_code) {
  const float q = std::nearbyint(w * b.inverse) + float(b.zero_point);
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
    if (largest == 0.0f) return block_fit(0.0f, half);
    // The largest magnitude at the wide end of the code range (RTN: -2^(b-1)),
    // or at the narrow end (2^(b-1) - 1), each clipped.
    for (float clip : kSymmetricClips) {
      consider(block_fit(stored_scale(largest / float(-half) * clip, st), half));
      consider(block_fit(stored_scale(largest / float(half - 1) * clip, st), half));
    }
    return best;
  }
  float lo = 0.0f, hi = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    lo = std::min(lo, w[i]);
    hi = std::max(hi, w[i]);
  }
  if (hi == lo) return block_fit(0.0f, 0);
  for (float clip_lo : kAsymmetricClips)
    for (float clip_hi : kAsymmetricClips) {
      const float l = lo * clip_lo, h = hi * clip_hi;
      const float scale = stored_scale((h - l) / float(max_code), st);
      if (scale == 0.0f) continue;
      consider(block_fit(scale, int(std::clamp(std::nearbyint(-l / scale), 0.0f, float(max_code)))));
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

// Rows [count][k] with GPTQ's error feedback (gptq.h has U, the factor of
// H^-1). Column by column inside a lazy batch of GptqFactor::kLazyColumns;
// at the batch's end its errors reach the later columns in one product. A
// block's scale is searched when the block is reached, on its values as
// updated so far (every batch before the block has been applied). The rows
// are independent: the result of a row does not depend on the others.
void gptq_rows(float* rows, int64_t count, int64_t k, const BlockFormat& f, const GptqFactor& h, ScaleStorage st,
               uint8_t* codes, float* scales, uint8_t* zero_points) {
  constexpr int64_t kLazy = GptqFactor::kLazyColumns;
  const int64_t bs = f.block_size, blocks = f.blocks_per_row(k), row_codes = blocks * bs;
  std::vector<float> block(static_cast<size_t>(bs));
  std::vector<double> weights(static_cast<size_t>(bs));
  std::vector<BlockFit> fits(static_cast<size_t>(count));
  std::vector<float> errors(static_cast<size_t>(count * kLazy));  // [count][kLazy]: the batch's e_j / U[j][j]
  for (int64_t j = 0; j < k; ++j) {
    if (j % bs == 0) {
      // Each row's block scale from its values as updated by the columns before it.
      const int64_t b = j / bs, n = std::min(bs, k - j);
      for (int64_t r = 0; r < count; ++r) {
        const float* row = rows + r * k;
        std::fill(block.begin(), block.end(), 0.0f);
        std::copy(row + j, row + j + n, block.begin());
        std::fill(weights.begin(), weights.end(), 0.0);
        for (int64_t i = 0; i < n; ++i) weights[size_t(i)] = h.importance[size_t(j + i)];
        const BlockFit fit = search_block(block.data(), weights.data(), bs, f, st);
        fits[size_t(r)] = fit;
        scales[r * blocks + b] = fit.scale;
        zero_points[r * blocks + b] = uint8_t(fit.zero_point);
        for (int64_t i = n; i < bs; ++i) codes[r * row_codes + j + i] = uint8_t(encode(0.0f, fit, f.max_code()));
      }
    }
    const int64_t c0 = j / kLazy * kLazy, c1 = std::min(k, c0 + kLazy);
    const float* u = h.row(j);  // U[j][j..k)
    for (int64_t r = 0; r < count; ++r) {
      float* row = rows + r * k;
      const BlockFit& fit = fits[size_t(r)];
      const int q = encode(row[j], fit, f.max_code());
      codes[r * row_codes + j] = uint8_t(q);
      const float e = (row[j] - decode(q, fit)) / u[0];
      errors[size_t(r * kLazy + (j - c0))] = e;
      for (int64_t c = j + 1; c < c1; ++c) row[c] -= e * u[c - j];
    }
    if (j + 1 == c1 && c1 < k) {  // the batch's feedback to every later column
      kernels::GemmShape later{.m = count, .n = k - c1, .k = c1 - c0, .lda = kLazy, .ldb = c1 - c0, .ldc = k};
      later.alpha = -1.0f;
      kernels::gemm_nt_f32(errors.data(), h.later_of(c0), rows + c1, later, true, 1);
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
  for (int64_t t = 0; t < count; ++t)
    for (int64_t i = 0; i < k; ++i) diag[size_t(i)] += x[t * k + i] * x[t * k + i];
  tokens += count;
  if (!full()) return;
  // The lower triangle only (gptq.cpp mirrors it): row i += x_t[i] * x_t[0..i].
  // In tiles of rows that stay in cache while every token goes through them,
  // the triangle cut into parts of equal work, one per thread.
  constexpr int64_t kTile = 16;
  const int parts = default_thread_count();
  parallel_for(parts, parts, 1, [&](int64_t p_begin, int64_t p_end) {
    for (int64_t p = p_begin; p < p_end; ++p) {
      const int64_t begin = int64_t(double(k) * std::sqrt(double(p) / parts));
      const int64_t end = p + 1 == parts ? k : int64_t(double(k) * std::sqrt(double(p + 1) / parts));
      for (int64_t i0 = begin; i0 < end; i0 += kTile)
        for (int64_t t = 0; t < count; ++t) {
          const double* v = x + t * k;
          for (int64_t i = i0; i < std::min(end, i0 + kTile); ++i) {
            double* g = gram.data() + i * k;
            const double vi = v[i];
            for (int64_t j = 0; j <= i; ++j) g[j] += vi * v[j];
          }
        }
    }
  });
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
  if (!fit.stats && fit.load_stats) {
    const std::shared_ptr<const InputStats> held = fit.load_stats();
    FitOptions loaded = fit;
    loaded.stats = held.get();
    loaded.load_stats = nullptr;
    return quantize_matrix(rows, cols, format, loaded, source, threads, rows_done);
  }
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
                             [&](float* rows_in, int64_t count, uint8_t* codes, float* scales,
                                 uint8_t* zero_points) {
                               const int64_t blocks = format.blocks_per_row(cols);
                               for (int64_t r = 0; r < count; ++r)
                                 search_row(rows_in + r * cols, cols, format, imp, fit.scales,
                                            codes + r * blocks * format.block_size, scales + r * blocks,
                                            zero_points + r * blocks);
                             });
    }
    case QuantMethod::Gptq: {
      if (!fit.stats || !fit.stats->full() || fit.stats->tokens == 0)
        fail("--quant-method", "gptq needs calibration statistics (--calibration TEXT_FILE)");
      const GptqFactor h = gptq_factor(*fit.stats, fit.damp);
      return quantize_matrix(rows, cols, format, source, threads, rows_done,
                             [&](float* rows_in, int64_t count, uint8_t* codes, float* scales,
                                 uint8_t* zero_points) {
                               gptq_rows(rows_in, count, cols, format, h, fit.scales, codes, scales, zero_points);
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
