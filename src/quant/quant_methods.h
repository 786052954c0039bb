// How the blocks of a MatMulNBits weight are fitted. Every method writes the
// same storage (block_quant.h: one scale, and zero point when asymmetric, per
// block of K), so stock ONNX Runtime runs every result; only the chosen
// scales and codes differ.
//
//   rtn     round to nearest: the block's largest magnitude sets the scale
//           (block_quant.h). Needs nothing; deltagen's default.
//   search  per block, tries clipped ranges (scales 0.6x .. 1x of RTN's, from
//           both ends of the signed code range) and keeps the one with the least
//           squared error, each input channel weighted by its importance (its
//           mean square over a calibration text) when one is given, else equally.
//   gptq    GPTQ (Frantar et al., 2022): the columns of each row are quantized
//           in order and each one's rounding error is spread over the columns
//           not yet quantized, through the Cholesky factor of the inverse of the
//           input's Gram matrix H = sum x x^T; this minimizes the output error
//           (w - q)^T H (w - q) rather than |w - q|^2. A block's scale is chosen
//           by `search` when the block is reached (on the updated weights).
//           Needs calibration.
//   awq     (AWQ-style channel scaling) not implemented: refused with an error.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "quant/block_quant.h"

namespace deltagen::quant {

enum class QuantMethod { Rtn, Search, Gptq, Awq };

const char* quant_method_name(QuantMethod method);  // "rtn", "search", "gptq", "awq"
std::optional<QuantMethod> parse_quant_method(std::string_view text);
bool needs_calibration(QuantMethod method);  // gptq
// Throws Error("--quant-method") for a method that is not implemented (awq).
void check_quant_method(QuantMethod method);

// The inputs one projection saw over a calibration text: the Gram matrix
// sum_t x_t x_t^T of its K input channels (its diagonal: each channel's
// importance). Projections that read the same input share one.
struct InputStats {
  int64_t k = 0;
  int64_t tokens = 0;
  std::vector<double> gram;  // [K][K], symmetric; empty when only the diagonal is kept
  std::vector<double> diag;  // [K]: sum_t x_t[i]^2

  InputStats(int64_t channels, bool full);
  bool full() const { return !gram.empty(); }
  // Adds `count` tokens, x [count][K] row-major.
  void add(const double* x, int64_t count);
  // diag / tokens: the mean square of each channel.
  std::vector<double> importance() const;
};

// How stored scales are rounded: a block's codes are chosen for the scale as
// the model will hold it (fp16 / bf16 in a q4f16 / bf16 build).
enum class ScaleStorage { F32, F16, BF16 };
float stored_scale(float scale, ScaleStorage storage);

struct FitOptions {
  QuantMethod method = QuantMethod::Rtn;
  const InputStats* stats = nullptr;  // search: optional (equal weights without); gptq: required, full
  // Statistics too large to keep in memory for every weight (a streamed
  // calibration's, on disk): read when the fit runs, which for a build is
  // when the weight is written, and freed after it. Used when stats is null.
  std::function<std::shared_ptr<const InputStats>()> load_stats;
  ScaleStorage scales = ScaleStorage::F32;
  double damp = 0.01;  // gptq: added to H's diagonal, times its mean (keeps H invertible)
};

// quantize_matrix (block_quant.h) with the method of `fit`. rtn gives exactly
// block_quant's bytes. The result does not depend on the thread count.
// Throws Error for gptq without full statistics or statistics of another width.
QuantizedMatrix quantize_matrix(int64_t rows, int64_t cols, const BlockFormat& format, const FitOptions& fit,
                                const RowSource& source, int threads, const RowsDone& rows_done = nullptr);

// The errors the methods minimize, for W [rows][cols] and its quantized form:
// sum over rows of sum_c importance[c] (w - q)^2 (search; all ones = plain squared error)
double weighted_error(const std::vector<float>& w, const QuantizedMatrix& q, const std::vector<double>& importance);
// sum over rows of (w - q)^T H (w - q) with H = stats.gram / tokens (gptq): the
// mean squared error of the projection's outputs over the calibration tokens.
double output_error(const std::vector<float>& w, const QuantizedMatrix& q, const InputStats& stats);

}  // namespace deltagen::quant
