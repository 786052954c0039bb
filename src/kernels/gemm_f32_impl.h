// The GEMM block of gemm_f32.h for the per-ISA files, written once with GCC
// vector types of `Lanes` floats (4: SSE2, 8: AVX2, 16: AVX-512) and compiled
// per target. A register tile is kRows rows of A by two vectors of columns:
// 12 accumulators, each step one broadcast of A per row and two loads of the
// packed panel, FMAs where the flags allow them. Internal linkage, so each
// file keeps its own copy.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/gemm_f32.h"

namespace deltagen::kernels {
namespace {

// GCC drops vector_size on an alias whose size depends on a template
// parameter (it silently becomes a scalar): one named type per width.
template <int Lanes> struct FloatVector;
template <> struct FloatVector<4> { typedef float type __attribute__((vector_size(16))); };
template <> struct FloatVector<8> { typedef float type __attribute__((vector_size(32))); };
template <> struct FloatVector<16> { typedef float type __attribute__((vector_size(64))); };

template <int Lanes>
struct GemmTile {
  using Vec = typename FloatVector<Lanes>::type;
  static_assert(sizeof(Vec) == Lanes * sizeof(float));
  static constexpr int kRows = 6;
  static constexpr int64_t kPanel = 2 * Lanes;

  static Vec load(const float* p) {
    Vec v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }

  // C[0..rows)[0..cols) += A[0..rows) . panel; rows <= kRows, cols <= kPanel.
  template <int Rows>
  static void tile(const float* a, int64_t lda, const float* panel, int64_t depth, int64_t cols, float* c,
                   int64_t ldc) {
    Vec lo[Rows], hi[Rows];
    for (int r = 0; r < Rows; ++r) lo[r] = hi[r] = Vec{};
    for (int64_t d = 0; d < depth; ++d) {
      const Vec b0 = load(panel + d * kPanel), b1 = load(panel + d * kPanel + Lanes);
      for (int r = 0; r < Rows; ++r) {
        const float x = a[r * lda + d];
        lo[r] += x * b0;
        hi[r] += x * b1;
      }
    }
    for (int r = 0; r < Rows; ++r) {
      float out[kPanel];
      std::memcpy(out, &lo[r], sizeof lo[r]);
      std::memcpy(out + Lanes, &hi[r], sizeof hi[r]);
      float* cr = c + r * ldc;
      for (int64_t j = 0; j < cols; ++j) cr[j] += out[j];
    }
  }

  static void block(const float* a, int64_t lda, const float* bp, int64_t depth, int64_t m, int64_t n, float* c,
                    int64_t ldc) {
    for (int64_t p0 = 0; p0 < n; p0 += kPanel) {
      const float* panel = bp + (p0 / kPanel) * depth * kPanel;
      const int64_t cols = std::min(kPanel, n - p0);
      int64_t i = 0;
      for (; i + kRows <= m; i += kRows) tile<kRows>(a + i * lda, lda, panel, depth, cols, c + i * ldc + p0, ldc);
      switch (m - i) {  // the last rows
        case 5: tile<5>(a + i * lda, lda, panel, depth, cols, c + i * ldc + p0, ldc); break;
        case 4: tile<4>(a + i * lda, lda, panel, depth, cols, c + i * ldc + p0, ldc); break;
        case 3: tile<3>(a + i * lda, lda, panel, depth, cols, c + i * ldc + p0, ldc); break;
        case 2: tile<2>(a + i * lda, lda, panel, depth, cols, c + i * ldc + p0, ldc); break;
        case 1: tile<1>(a + i * lda, lda, panel, depth, cols, c + i * ldc + p0, ldc); break;
        default: break;
      }
    }
  }
};

}  // namespace
}  // namespace deltagen::kernels
