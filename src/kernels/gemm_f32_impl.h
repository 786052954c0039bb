// The GEMM block of gemm_f32.h for the per-ISA files, written once with GCC
// vector types of `Lanes` floats (4: SSE2, 8: AVX2, 16: AVX-512) and compiled
// per target. A register tile is kRows rows of A by two vectors of columns
// (24 accumulators with AVX-512's 32 registers, 12 with 16), each step one
// broadcast of A per row and two loads of the packed panel, FMAs where the
// flags allow them (12 rows measured 72 GFLOP/s on one Zen 5 core, 6 rows 59). Internal linkage, so each
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
  static constexpr int kRows = Lanes == 16 ? 12 : 6;  // accumulators: 24 of 32 registers (AVX-512), 12 of 16
  static constexpr int64_t kPanel = 2 * Lanes;

  static Vec load(const float* p) {
    Vec v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }

  // C[0..rows)[0..cols) += alpha A . panel; rows <= kRows, cols <= kPanel;
  // `a` is the packed tile, [depth][kRows].
  template <int Rows>
  static void tile(const float* a, const float* panel, int64_t depth, int64_t cols, float* c, int64_t ldc,
                   float alpha) {
    Vec lo[Rows], hi[Rows];
    for (int r = 0; r < Rows; ++r) lo[r] = hi[r] = Vec{};
    for (int64_t d = 0; d < depth; ++d) {
      const Vec b0 = load(panel + d * kPanel), b1 = load(panel + d * kPanel + Lanes);
      for (int r = 0; r < Rows; ++r) {
        const float x = a[d * kRows + r];
        lo[r] += x * b0;
        hi[r] += x * b1;
      }
    }
    for (int r = 0; r < Rows; ++r) {
      float out[kPanel];
      std::memcpy(out, &lo[r], sizeof lo[r]);
      std::memcpy(out + Lanes, &hi[r], sizeof hi[r]);
      float* cr = c + r * ldc;
      for (int64_t j = 0; j < cols; ++j) cr[j] += alpha * out[j];
    }
  }

  // The last rows (fewer than kRows): the tile of exactly that many.
  template <int Rows>
  static void rest(int64_t rows, const float* a, const float* panel, int64_t depth, int64_t cols, float* c,
                   int64_t ldc, float alpha) {
    if constexpr (Rows > 0) {
      if (rows == Rows) return tile<Rows>(a, panel, depth, cols, c, ldc, alpha);
      rest<Rows - 1>(rows, a, panel, depth, cols, c, ldc, alpha);
    }
  }

  // Each tile of rows is packed once ([depth][kRows], contiguous: rows of A
  // a multiple of 4 KB apart, as in a 9216-wide matrix, all fall into one L1
  // set and evict each other) and then meets every panel.
  static void block(const float* a, int64_t lda, const float* bp, int64_t depth, int64_t m, int64_t n, float* c,
                    int64_t ldc, float alpha) {
    float packed[kRows * 256];  // depth <= kGemmDepth
    for (int64_t i = 0; i < m; i += kRows) {
      const int64_t rows = std::min<int64_t>(kRows, m - i);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t d = 0; d < depth; ++d) packed[d * kRows + r] = a[(i + r) * lda + d];
      for (int64_t p0 = 0; p0 < n; p0 += kPanel) {
        const float* panel = bp + (p0 / kPanel) * depth * kPanel;
        const int64_t cols = std::min(kPanel, n - p0);
        if (rows == kRows) tile<kRows>(packed, panel, depth, cols, c + i * ldc + p0, ldc, alpha);
        else rest<kRows - 1>(rows, packed, panel, depth, cols, c + i * ldc + p0, ldc, alpha);
      }
    }
  }
};

}  // namespace
}  // namespace deltagen::kernels
