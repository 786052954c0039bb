#include "kernels/gated_qkv.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/vector_math.h"
#include "kernels/rms_norm.h"

namespace deltagen::kernels {

namespace {

// Rows per task for a prompt: ~64K floats of the packed projection.
int64_t rows_per_task(int64_t width) { return std::max<int64_t>(1, (int64_t(1) << 16) / std::max<int64_t>(1, width)); }

}  // namespace

void split_gated_qkv(const GatedQkvShape& s, const float* qkv, const float* q_weight, float q_epsilon,
                     const float* k_weight, float k_epsilon, float* q, float* gate, float* k, float* v,
                     const Parallel& parallel) {
  const int64_t hd = s.head_dim, width = s.width(), q_width = s.heads * hd, kv_width = s.kv_heads * hd;
  const size_t head_bytes = size_t(hd) * sizeof(float), kv_bytes = size_t(kv_width) * sizeof(float);
  for_each_range(s.rows, rows_per_task(width), parallel, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* row = qkv + r * width;
      for (int64_t h = 0; h < s.heads; ++h) {
        std::memcpy(q + r * q_width + h * hd, row + h * 2 * hd, head_bytes);
        std::memcpy(gate + r * q_width + h * hd, row + h * 2 * hd + hd, head_bytes);
      }
      std::memcpy(k + r * kv_width, row + 2 * q_width, kv_bytes);
      std::memcpy(v + r * kv_width, row + 2 * q_width + kv_width, kv_bytes);
    }
  });
  // Every head is a row of hd values for the norm (in place).
  rms_norm_rows(q, nullptr, q_weight, s.rows * s.heads, hd, q_epsilon, nullptr, q, parallel);
  rms_norm_rows(k, nullptr, k_weight, s.rows * s.kv_heads, hd, k_epsilon, nullptr, k, parallel);
}

void apply_sigmoid_gate(float* out, const float* gate, int64_t rows, int64_t width, const Parallel& parallel) {
  for_each_range(rows, rows_per_task(width), parallel, [&](int64_t r0, int64_t r1) {
    mul_sigmoid(out + r0 * width, gate + r0 * width, (r1 - r0) * width);
  });
}

}  // namespace deltagen::kernels
