#include "kernels/activations.h"

#include <algorithm>
#include <cmath>

namespace deltagen::kernels {

void quantize_rows(const float* a, int64_t rows, int64_t k, int64_t lda, int block_size, QuantizedRows& out) {
  out.rows = rows;
  out.k_blocks = (k + block_size - 1) / block_size;
  out.k_padded = out.k_blocks * block_size;
  out.values.assign(size_t(rows * out.k_padded), 0);
  out.scales.resize(size_t(rows * out.k_blocks));
  out.sums.resize(size_t(rows * out.k_blocks));
  for (int64_t m = 0; m < rows; ++m) {
    const float* src = a + m * lda;
    int8_t* dst = out.values.data() + m * out.k_padded;
    for (int64_t b = 0; b < out.k_blocks; ++b) {
      const int64_t k0 = b * block_size;
      const int64_t k1 = std::min<int64_t>(k, k0 + block_size);
      float amax = 0.0f;
      for (int64_t i = k0; i < k1; ++i) amax = std::max(amax, std::fabs(src[i]));
      // The kernels reproduce this exactly: the same float multiply, then
      // round-to-nearest-even (the SIMD conversion's default rounding).
      const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
      int32_t sum = 0;
      for (int64_t i = k0; i < k1; ++i) {
        const float q = std::nearbyint(src[i] * inv);
        const int v = int(std::clamp(q, -127.0f, 127.0f));
        dst[i] = int8_t(v);
        sum += v;
      }
      out.scales[size_t(m * out.k_blocks + b)] = amax / 127.0f;
      out.sums[size_t(m * out.k_blocks + b)] = sum;
    }
  }
}

}  // namespace deltagen::kernels
