// Portable int8-activation kernel over the packed layout: the fallback for
// CPUs without AVX2, and the readable statement of what the SIMD versions do.
#include <algorithm>
#include <cstring>

#include "kernels/kernel_impls.h"
#include "util/half.h"

namespace deltagen::kernels::detail {

void gemm_q8_scalar(const Q8GemmArgs& args, int64_t g_begin, int64_t g_end, int64_t m_begin, int64_t m_end) {
  const PackedWeights& w = *args.w;
  const QuantizedRows& a = *args.a;
  const NBitsShape& s = w.shape();
  const int64_t rows = PackedWeights::kGroupRows;
  const int64_t chunks = s.block_size / PackedWeights::kChunkK;
  for (int64_t g = g_begin; g < g_end; ++g) {
    const int64_t n0 = g * rows;
    const int64_t valid = std::min(rows, s.n - n0);
    for (int64_t m = m_begin; m < m_end; ++m) {
      float acc[PackedWeights::kGroupRows] = {};
      const uint8_t* record = w.group(g);
      for (int64_t b = 0; b < s.k_blocks(); ++b, record += w.block_stride()) {
        const int8_t* qa = a.row(m) + b * s.block_size;
        const uint8_t* scales = record + w.payload_bytes();
        const uint8_t* zps = scales + w.scale_bytes();
        for (int64_t r = 0; r < rows; ++r) {
          int32_t dot = 0;
          for (int64_t c = 0; c < chunks; ++c) {
            const uint8_t* lane = record + c * PackedWeights::kChunkBytes + 4 * r;
            for (int i = 0; i < 4; ++i)
              dot += (lane[i] & 0x0f) * qa[8 * c + i] + (lane[i] >> 4) * qa[8 * c + 4 + i];
          }
          const int zp = w.asymmetric() ? zps[r] : w.default_zero_point();
          dot -= zp * a.row_sums(m)[b];
          float ws;
          if (w.scale_format() == ScaleFormat::F16) {
            uint16_t h;
            std::memcpy(&h, scales + 2 * r, 2);
            ws = f16_to_f32(h);
          } else {
            std::memcpy(&ws, scales + 4 * r, 4);
          }
          acc[r] += float(dot) * (ws * a.row_scales(m)[b]);
        }
      }
      float* y = args.y + m * args.ldy + n0;
      for (int64_t r = 0; r < valid; ++r) y[r] = acc[r] + (args.bias ? args.bias[n0 + r] : 0.0f);
    }
  }
}

}  // namespace deltagen::kernels::detail

namespace deltagen::kernels {

const MatMulKernels kMatMulScalar{KernelLevel::Scalar, detail::gemm_q8_scalar, nullptr, nullptr};

}  // namespace deltagen::kernels
