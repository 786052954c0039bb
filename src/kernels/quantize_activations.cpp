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
                   KernelLevel level) {
  out.rows = rows;
  out.k_blocks = (k + block_size - 1) / block_size;
  out.k_padded = out.k_blocks * block_size;
  out.values.assign(size_t(rows * out.k_padded), 0);
  out.scales.resize(size_t(rows * out.k_blocks));
  out.sums.resize(size_t(rows * out.k_blocks));
  const bool avx512 = std::min(level, supported_level()) >= KernelLevel::Avx512;
  for (int64_t m = 0; m < rows; ++m) {
    const float* src = a + m * lda;
    int8_t* dst = out.values.data() + m * out.k_padded;
    for (int64_t b = 0; b < out.k_blocks; ++b) {
      const int64_t k0 = b * block_size, n = std::min<int64_t>(k, k0 + block_size) - k0;
      float* scale = &out.scales[size_t(m * out.k_blocks + b)];
      int32_t* sum = &out.sums[size_t(m * out.k_blocks + b)];
      if (avx512 && n % 16 == 0)
        detail::quantize_block_avx512(src + k0, n, dst + k0, scale, sum);
      else
        detail::quantize_block_portable(src + k0, n, dst + k0, scale, sum);
    }
  }
}

}  // namespace deltagen::kernels
