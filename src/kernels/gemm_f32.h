// A plain fp32 matrix product for the builder's calibration (not the ONNX
// kernels): C[m][n] (+)= A[m][k] * B[n][k]^T, both operands row-major with
// the reduction along their rows, which is how Linear weights ([out][in]) and
// activations ([tokens][in]) are stored. Also the Gram matrix X^T X, with
// A = B = X^T.
//
// Each C entry is one fp32 sum over k in a fixed order (blocks of kGemmDepth,
// inside a block in k order), whatever the thread count: the threads split
// the columns n, and the rows m when there are fewer column chunks than threads.
#pragma once
#include <cstdint>

#include "kernels/dispatch.h"

namespace deltagen::kernels {

inline constexpr int64_t kGemmDepth = 256;  // k per pass: a packed panel of B stays in L1/L2

struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;  // row strides in elements (0: k, k, n)
  // Only the lower triangle c[i][j], j <= i, is needed (a Gram matrix, m = n):
  // a block of columns starting at j0 skips the rows above j0.
  bool lower = false;
  float alpha = 1.0f;  // C (+)= alpha A B^T (-1: the updates of a factorization)
};

// C = A B^T (accumulate = false) or C += A B^T. threads: 0 = all cores.
// With shape.lower, entries above the diagonal may hold anything.
void gemm_nt_f32(const float* a, const float* b, float* c, const GemmShape& shape, bool accumulate, int threads,
                 KernelLevel level = default_level());

// The per-ISA table (dispatch.h). The block function multiplies rows
// [0, m) of A with a packed panel set of B: bp holds ceil(n / panel) panels
// of [depth][panel] floats (columns past n zero), and adds into C.
struct GemmF32Kernels {
  KernelLevel isa;
  int64_t panel;  // columns per packed panel (two vector registers)
  void (*block)(const float* a, int64_t lda, const float* bp, int64_t depth, int64_t m, int64_t n, float* c,
                int64_t ldc, float alpha);
};
extern const GemmF32Kernels kGemmF32Scalar;  // gemm_f32.cpp (baseline x86-64, SSE2)
extern const GemmF32Kernels kGemmF32Avx2;    // gemm_f32_avx2.cpp
extern const GemmF32Kernels kGemmF32Avx512;  // gemm_f32_avx512.cpp
extern const KernelFamily<GemmF32Kernels> kGemmF32Family;  // AMX: the AVX-512 table

}  // namespace deltagen::kernels
