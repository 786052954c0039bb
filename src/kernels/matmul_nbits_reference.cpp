#include "kernels/matmul_nbits_reference.h"

#include <algorithm>

#include "kernels/quantize_activations.h"
#include "util/half.h"

namespace deltagen::kernels {
namespace {

int weight_nibble(const NBitsWeightsView& w, int64_t n, int64_t k) {
  const NBitsShape& s = w.shape;
  const int64_t b = k / s.block_size, j = k % s.block_size;
  const uint8_t byte = w.data[(n * s.k_blocks() + b) * s.file_block_bytes() + j / 2];
  return (j % 2 == 0) ? (byte & 0x0f) : (byte >> 4);
}

int zero_point(const NBitsWeightsView& w, int64_t n, int64_t b) {
  if (!w.zero_points) return 1 << (w.shape.bits - 1);
  const uint8_t byte = w.zero_points[n * w.shape.zero_point_row_bytes() + b / 2];
  return (b % 2 == 0) ? (byte & 0x0f) : (byte >> 4);
}

}  // namespace

std::vector<float> dequantize_reference(const NBitsWeightsView& w) {
  const NBitsShape& s = w.shape;
  std::vector<float> out(size_t(s.n * s.k));
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t k = 0; k < s.k; ++k) {
      const int64_t b = k / s.block_size;
      out[size_t(n * s.k + k)] = float(weight_nibble(w, n, k) - zero_point(w, n, b)) * w.scales[n * s.k_blocks() + b];
    }
  return out;
}

void matmul_reference(const NBitsWeightsView& w, const float* a, int64_t m, const float* bias, float* y) {
  const NBitsShape& s = w.shape;
  const std::vector<float> deq = dequantize_reference(w);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t n = 0; n < s.n; ++n) {
      double acc = bias ? bias[n] : 0.0;
      for (int64_t k = 0; k < s.k; ++k) acc += double(a[i * s.k + k]) * deq[size_t(n * s.k + k)];
      y[i * s.n + n] = float(acc);
    }
}

void matmul_reference_q8(const NBitsWeightsView& w, const float* a, int64_t m, const float* bias, float* y,
                         bool scale_rounding_f16) {
  const NBitsShape& s = w.shape;
  QuantizedRows q;
  quantize_rows(a, m, s.k, s.k, s.block_size, q);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t n = 0; n < s.n; ++n) {
      double acc = bias ? bias[n] : 0.0;
      for (int64_t b = 0; b < s.k_blocks(); ++b) {
        int64_t dot = 0;
        for (int64_t k = b * s.block_size; k < std::min(s.k, (b + 1) * s.block_size); ++k)
          dot += int64_t(q.row(i)[k]) * (weight_nibble(w, n, k) - zero_point(w, n, b));
        float ws = w.scales[n * s.k_blocks() + b];
        if (scale_rounding_f16) ws = f16_to_f32(f32_to_f16(ws));
        acc += double(dot) * double(ws) * double(q.row_scales(i)[b]);
      }
      y[i * s.n + n] = float(acc);
    }
}

}  // namespace deltagen::kernels
