#include "kernels/quantize_activations.h"

#include <algorithm>
#include <cmath>

namespace deltagen::kernels {

namespace detail {

void quantize_block_portable(const float* src, int64_t n, int8_t* dst, float* scale, int32_t* sum) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(src[i]));
  // The kernels reproduce this exactly: the same float multiply, then
  // round-to-nearest-even (the SIMD conversion's default rounding), here as
  // (x + 1.5 * 2^23) - 1.5 * 2^23, exact for |x| < 2^22 (|x| <= 127 here)
  // and free of nearbyint's floating-point environment calls.
  const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
  constexpr float kRound = 12582912.0f;
  int32_t total = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float q = (src[i] * inv + kRound) - kRound;
    const int v = q >= 127.0f ? 127 : q <= -127.0f ? -127 : q == q ? int(q) : 0;
    dst[i] = int8_t(v);
    total += v;
  }
  *scale = amax / 127.0f;
  *sum = total;
}

}  // namespace detail

void quantize_rows(const float* a, int64_t rows, int64_t k, int64_t lda, int block_size, QuantizedRows& out,
                   const Parallel& parallel, KernelLevel level) {
  out.rows = rows;
  out.k_blocks = (k + block_size - 1) / block_size;
  out.k_padded = out.k_blocks * block_size;
  out.values.assign(size_t(rows * out.k_padded), 0);
  out.scales.resize(size_t(rows * out.k_blocks));
  out.sums.resize(size_t(rows * out.k_blocks));
  const QuantizeKernels& kernels = kQuantizeFamily.at(level);
  constexpr int64_t kRowsPerTask = 32;
  for_each_range(rows, kRowsPerTask, parallel, [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m)
      kernels.row(a + m * lda, k, block_size, out.values.data() + m * out.k_padded,
                  out.scales.data() + m * out.k_blocks, out.sums.data() + m * out.k_blocks);
  });
}

void quantize_rows(const float* a, int64_t rows, int64_t k, int64_t lda, int block_size, QuantizedRows& out,
                   KernelLevel level) {
  quantize_rows(a, rows, k, lda, block_size, out, SerialParallel(), level);
}

namespace {
void quantize_row_portable(const float* src, int64_t k, int block_size, int8_t* dst, float* scales, int32_t* sums) {
  quantize_row_with(detail::quantize_block_portable, 1, src, k, block_size, dst, scales, sums);
}
}  // namespace

const QuantizeKernels kQuantizeScalar{KernelLevel::Scalar, quantize_row_portable};
const KernelFamily<QuantizeKernels> kQuantizeFamily{
    "quantize_activations", {&kQuantizeScalar, &kQuantizeAvx2, &kQuantizeAvx512, &kQuantizeAvx512}};

}  // namespace deltagen::kernels
