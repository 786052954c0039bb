#include "kernels/rms_norm.h"

#include <algorithm>
#include <cmath>

namespace deltagen::kernels {
namespace {

// Rows handed to one task of a prompt: ~16K multiply-adds at Qwen3.5's widths.
constexpr int64_t kTaskElements = 16 << 10;

void norm_row(const float* x, const float* skip, const float* gamma, int64_t k, float epsilon, float* sum, float* out) {
  // The residual sum goes to `out` first when nobody wants it, so the norm
  // reads one row either way. Eight partial sums: a loop the compiler can
  // keep in registers without reassociating one long chain.
  float* s = sum ? sum : out;
  const float* v = x;
  if (skip) {
    for (int64_t j = 0; j < k; ++j) s[j] = x[j] + skip[j];
    v = s;
  }
  float partial[8] = {};
  int64_t j = 0;
  for (; j + 8 <= k; j += 8)
    for (int l = 0; l < 8; ++l) partial[l] += v[j + l] * v[j + l];
  for (; j < k; ++j) partial[0] += v[j] * v[j];
  float squares = 0;
  for (float p : partial) squares += p;
  const float inv = 1.0f / std::sqrt(squares / float(k) + epsilon);
  for (j = 0; j < k; ++j) out[j] = v[j] * inv * gamma[j];
}

}  // namespace

const RmsNormKernels kRmsNormScalar{KernelLevel::Scalar, norm_row};
const KernelFamily<RmsNormKernels> kRmsNormFamily{
    "rms_norm", {&kRmsNormScalar, &kRmsNormScalar, &kRmsNormScalar, &kRmsNormScalar}};

void rms_norm_rows(const float* x, const float* skip, const float* gamma, int64_t rows, int64_t k, float epsilon,
                   float* sum, float* out, const Parallel& parallel, KernelLevel level) {
  if (k <= 0) return;
  const auto norm_row = kRmsNormFamily.at(level).row;
  for_each_range(rows, kTaskElements / k, parallel, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      norm_row(x + r * k, skip ? skip + r * k : nullptr, gamma, k, epsilon, sum ? sum + r * k : nullptr, out + r * k);
  });
}

}  // namespace deltagen::kernels
